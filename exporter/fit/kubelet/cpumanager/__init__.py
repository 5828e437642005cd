"""The CPU manager (``pkg/kubelet/cm/cpumanager``, v1.37.2).

- ``policy_static``: the ``static`` policy's hints and ``Allocate`` (``full-pcpus-only``,
  ``allocateCPUs``, ``takeByTopology``);
- ``cpu_assignment``: which CPUs are taken (``takeByTopologyNUMAPacked``,
  ``takeByTopologyNUMADistributed``);
- ``policy_options``: the options that change which CPUs are taken;
- ``topology``: ``CPUTopology`` (cores, sockets, NUMA nodes of every CPU);
- ``state``: what the policy holds (online CPUs, the default set, reserved cores).
"""
