"""Property-based tests: random, inconsistent kubelet data never breaks the accounting.

Whatever the kubelet says — CPUs held twice, NUMA ids sysfs does not know, negative ids,
repeated entries, empty names, absurd sizes — the accounting must not raise, must count every
CPU and device once, must keep per-NUMA figures summing to the node totals, and must keep every
ratio within [0, 1]; the rendered exposition must parse and hold no duplicate series.

Drawing these snapshots is most of the cost (hypothesis' own generation, not the code under
test): the example counts keep the whole unit tier under 30 s. Every run draws new examples,
so the runs add up.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings, strategies as st
from prometheus_client.parser import text_string_to_metric_families

from exporter.accounting import UNKNOWN, Ledger, account, label_ids
from exporter.exposition.rendering import Renderer, RenderOptions, data_families, render_text
from exporter.model import (
    Allocatable,
    ContainerAssignment,
    DeviceEntry,
    DraDevice,
    KubeletSnapshot,
    MemoryBlock,
    NumaNode,
    PodAssignment,
    Topology,
)

cpu_ids = st.integers(min_value=-2, max_value=40)
numa_ids = st.integers(min_value=-2, max_value=6)
topologies = st.one_of(st.none(), st.lists(numa_ids, max_size=3).map(tuple))
names = st.sampled_from(["", "a", "b", "c"])
resources = st.sampled_from(["", "r/gpu", "r/vf", "vendor.example.com/x"])
memory_types = st.sampled_from(["", "memory", "hugepages-2Mi", "hugepages-1Gi"])
sizes = st.one_of(st.integers(min_value=0, max_value=1 << 40), st.just((1 << 64) - 1))

devices = st.builds(DeviceEntry, resources,
                    st.lists(st.sampled_from(["", "d0", "d1", "d2", "d3"]), max_size=2).map(tuple),
                    topologies)
memory = st.builds(MemoryBlock, memory_types, sizes, topologies)
dra = st.builds(DraDevice, st.sampled_from(["", "drv"]), st.sampled_from(["", "p"]),
                st.sampled_from(["", "x", "y"]), names, names,
                st.one_of(st.none(), st.sampled_from(["s1", "s2"])))
containers = st.builds(ContainerAssignment, names,
                       st.lists(cpu_ids, max_size=5).map(tuple),
                       st.lists(memory, max_size=2).map(tuple),
                       st.lists(devices, max_size=4).map(tuple),
                       st.lists(dra, max_size=2).map(tuple))
pods = st.builds(PodAssignment, names, names, st.lists(containers, max_size=3).map(tuple),
                 st.lists(cpu_ids, max_size=4).map(tuple), st.lists(memory, max_size=2).map(tuple))
allocatables = st.one_of(st.none(), st.builds(
    Allocatable, st.lists(cpu_ids, max_size=12).map(tuple), st.lists(memory, max_size=4).map(tuple),
    st.lists(devices, max_size=6).map(tuple)))
snapshots = st.builds(KubeletSnapshot, st.lists(pods, max_size=6).map(tuple), allocatables,
                      st.sampled_from(["v1", "v1", "v1alpha1"]))


@st.composite
def topology_strategy(draw):
    node_count = draw(st.integers(min_value=1, max_value=4))
    owner = draw(st.lists(st.integers(min_value=-1, max_value=node_count - 1),
                          min_size=32, max_size=32))
    nodes = [NumaNode(n, frozenset(cpu for cpu, o in enumerate(owner) if o == n))
             for n in range(node_count)]
    return Topology.from_nodes(nodes)


def listed_cpus(snapshot: KubeletSnapshot) -> set[int]:
    return {cpu for pod in snapshot.pods
            for cpu in (*pod.cpu_ids, *(c for ctr in pod.containers for c in ctr.cpu_ids))}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots, topology=topology_strategy())
def test_accounting_invariants(snapshot, topology):
    result = account(snapshot, topology)
    known = {str(n) for n in topology.numa_nodes}
    v1 = snapshot.api_version == "v1"

    # every CPU counted at most once, and per-NUMA figures sum to the node total
    if v1:
        assert sum(result.cpus_allocated.values()) == len(listed_cpus(snapshot))
        if result.cpus_allocatable is not None:
            assert sum(result.cpus_allocatable.values()) == len(set(snapshot.allocatable.cpu_ids))
    else:
        assert result.cpus_allocated is None and result.misaligned_containers is None
    per_container = Counter()
    for (namespace, pod, container, _), count in result.container_cpus.items():
        per_container[(namespace, pod, container)] += count
    assert all(count <= len(listed_cpus(snapshot)) for count in per_container.values())

    # devices: each (resource, id) once, whatever the number of entries naming it
    distinct = {(e.resource, i) for p in snapshot.pods for c in p.containers for e in c.devices
                for i in e.device_ids if e.resource and i}
    by_resource = Counter()
    for (_, resource), count in result.devices_allocated.items():
        by_resource[resource] += count
    assert by_resource == Counter(resource for resource, _ in distinct)

    # unavailable devices: the assigned ones allocatable does not list, only with that call
    if v1 and snapshot.allocatable is not None:
        listed = {(e.resource, i) for e in snapshot.allocatable.devices for i in e.device_ids
                  if e.resource and i}
        unavailable = result.devices_allocated_unavailable
        assert set(unavailable) == set(result.devices_allocated)
        assert all(0 <= unavailable[key] <= count
                   for key, count in result.devices_allocated.items())
        assert sum(unavailable.values()) == len(distinct - listed)
    else:
        assert result.devices_allocated_unavailable is None

    # memory: between the containers' own blocks and containers plus pod-level blocks
    if v1:
        for memory_type in {t for _, t in result.memory_allocated}:
            total = sum(v for (_, t), v in result.memory_allocated.items() if t == memory_type)
            containers_only = sum(v for k, v in result.container_memory.items()
                                  if k[4] == memory_type)
            pod_level = sum(b.size for p in snapshot.pods for b in p.memory
                            if b.memory_type == memory_type)
            assert containers_only <= total <= containers_only + pod_level

    # ratios: within [0, 1], only for single NUMA nodes that sysfs knows
    for (numa, _), ratio in result.utilization.items():
        assert 0.0 <= ratio <= 1.0
        assert numa in known
    for label in [*(k[0] for k in result.devices_allocated), *(result.cpus_allocated or {})]:
        assert label == UNKNOWN or set(map(str, label_ids(label))) <= known

    # alignment
    if v1:
        assert result.misaligned_containers == sum(
            1 for n in result.container_numa_nodes.values() if n > 1)
        assert all(1 <= n <= len(topology.numa_nodes)
                   for n in result.container_numa_nodes.values())
    assert all(v > 0 for v in result.data_issues.values())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots, topology=topology_strategy())
def test_rendered_exposition_parses_without_duplicate_series(snapshot, topology):
    result = account(snapshot, topology)
    text = render_text(data_families(result, topology, RenderOptions())).decode()
    seen = set()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            assert key not in seen, key
            seen.add(key)
            assert sample.value >= 0


def comparable(result):
    """Every figure of an Accounting, as plain comparable data."""
    return (result.cpus_allocatable, result.cpus_allocated, result.memory_allocatable,
            result.memory_allocated, result.devices_allocatable, result.devices_allocated,
            result.devices_allocated_unavailable, result.utilization,
            result.dra_devices_allocated, result.misaligned_containers,
            result.container_cpus, result.container_memory, result.container_devices,
            result.container_numa_nodes, result.pod_cpus, result.pod_memory, result.device_info,
            result.dra_device_info, dict(result.data_issues), result.pod_level_seen,
            result.pods, result.containers)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool=st.lists(pods, min_size=1, max_size=8), allocatable=allocatables,
       other_allocatable=allocatables,
       topology=topology_strategy(), api=st.sampled_from(["v1", "v1alpha1"]),
       steps=st.lists(st.tuples(st.lists(st.integers(0, 7), max_size=6),
                                st.sampled_from(["same", "fresh copy", "other"])),
                      min_size=1, max_size=6))
def test_incremental_ledger_equals_accounting_from_scratch(pool, allocatable, other_allocatable,
                                                           topology, api, steps):
    """Pods come and go (the same objects reused, as the decoder hands them back) while
    allocatable is re-read: the same object, an equal new one, or another one (devices
    turning unhealthy, plugins registering)."""
    ledger = Ledger()
    for picks, which in steps:
        listed = tuple(pool[i % len(pool)] for i in picks)
        current_allocatable = allocatable
        if which == "fresh copy" and allocatable is not None:
            current_allocatable = Allocatable(allocatable.cpu_ids, allocatable.memory,
                                              allocatable.devices)
        elif which == "other":
            current_allocatable = other_allocatable
        incremental = ledger.update(listed, current_allocatable, topology, api)
        scratch = account(KubeletSnapshot(listed, current_allocatable, api), topology)
        assert comparable(incremental) == comparable(scratch)
        again = ledger.update(listed, current_allocatable, topology, api)
        if len(set(map(id, listed))) == len(listed):  # a repeated pod always takes the long way
            assert again is incremental  # nothing changed: the same result, nothing recomputed
        assert comparable(again) == comparable(scratch)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=snapshots, topology=topology_strategy(), device_info=st.booleans())
def test_renderer_matches_rendering_in_one_go(snapshot, topology, device_info):
    options = RenderOptions(workload_metrics=True, device_info=device_info)
    result = account(snapshot, topology)
    incremental = Renderer(options).render(result, topology).decode()
    reference = render_text(data_families(result, topology, options)).decode()

    def samples(text):
        return sorted((s.name, tuple(sorted(s.labels.items())), s.value)
                      for f in text_string_to_metric_families(text) for s in f.samples)
    assert samples(incremental) == samples(reference)
