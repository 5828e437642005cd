"""What the fit answers keep between refreshes: the resource managers' state and what feeds it.

- ``from_snapshot``: :func:`node_state`, the managers' state rebuilt from one snapshot
  (``List``, ``GetAllocatableResources``, sysfs), the pod context and the state files;
- ``incremental``: :class:`ManagersStateCache`, the same state kept from one snapshot to the
  next and updated from the pods that changed (equal to a rebuild, at the cost of the change);
- ``checkpoints``: the kubelet's own checkpoint files (``cpu_manager_state``,
  ``memory_manager_state``, the device manager's checkpoint), read for what ``List`` hides;
- ``init_cpus``: without ``cpu_manager_state``, the CPUs finished init containers still hold,
  inferred from pod context where the kubelet's rules decide them;
- ``allocatable``: the Node's allocatable as the kubelet's node status computes it, when no
  Node object gives it.

Imports from ``fit`` only :mod:`exporter.fit.kubelet` (tests/unit/test_layers.py).
"""
