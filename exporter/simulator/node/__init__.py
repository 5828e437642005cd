"""The simulated node and its kubelet.

- ``book``: :class:`SimulatedNode`, the kubelet's book of one node (admitted pods, pods refused
  at admission, the views the servers serve);
- ``admitting``: admission by the fit engine's rules on the book's exact state;
- ``admissionconfig``: the kubelet configuration admission follows (profile, ``POST /config``);
- ``allocator``: what the resource managers hold, taken and given back;
- ``podmaker``: pods made up from a profile's templates, for churn;
- ``server``: the podresources gRPC server (``v1``, ``v1alpha1``);
- ``wire``: its replies in the kubelet's wire shape;
- ``faults``: the fault switches, the kubelet's rate limiter and the record of calls;
- ``sysfs``: the fake sysfs tree and the kubelet config file;
- ``checkpoints``: the kubelet's state files, for ``--watch-path``.
"""
