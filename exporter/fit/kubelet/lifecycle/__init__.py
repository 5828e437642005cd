"""The kubelet's admit handlers (``pkg/kubelet/lifecycle``, v1.37.2).

- ``predicate``: the resource-fit predicate that runs after the Topology Manager.
"""
