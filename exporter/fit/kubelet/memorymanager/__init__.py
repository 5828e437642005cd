"""The memory manager (``pkg/kubelet/cm/memorymanager``, v1.37.2).

- ``policy_static``: the ``Static`` policy's hints (the group rule) and ``Allocate``;
- ``state``: what it holds per NUMA node (allocatable, free, group, assignments).
"""
