"""The Topology Manager (``pkg/kubelet/cm/topologymanager``, v1.37.2).

- ``topology_manager``: ``TopologyHint``, a provider's answer, ``TopologyAffinityError``;
- ``bitmask``: NUMA sets as bit masks, the sums the hint providers compute over them, and the
  intersections the merger reaches;
- ``numa_info``: NUMA distances (``prefer-closest-numa-nodes``);
- ``policy``: the hint merger (``HintMerger``, ``filterProvidersHints``);
- ``policy_none``, ``policy_best_effort``, ``policy_restricted``, ``policy_single_numa_node``:
  each policy's ``Merge``;
- ``scope``: what both scopes share (the policy by name, hints, ``allocateAlignedResources``);
- ``scope_container``, ``scope_pod``: each scope's ``Admit``.
"""
