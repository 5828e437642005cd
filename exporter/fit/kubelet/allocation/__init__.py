"""The kubelet's allocation manager (``pkg/kubelet/allocation``, v1.37.2).

- ``allocation_manager``: the admission of one pod (``canAdmitPod``): the Topology Manager's
  admit handler, then the resource-fit predicate.
"""
