"""Write a fake sysfs tree matching a simulator profile.

Only what the exporter reads: ``devices/system/node/node<N>/{cpulist,distance,meminfo,
hugepages/...}`` (``distance``: the node's row of the NUMA distance table, as the kernel writes
it, which the Topology Manager's ``prefer-closest-numa-nodes`` compares),
``devices/system/node/online``, ``devices/system/cpu/online`` and each CPU's
``devices/system/cpu/cpu<N>/topology/`` (``core_id``, ``physical_package_id``, ``die_id``, and
``thread_siblings_list``: the hardware threads of the CPU's core, the CPU itself included,
Documentation/ABI/stable/sysfs-devices-system-cpu) and ``cache/index3`` where the profile names
its L3 (``cpu_layout``, :mod:`..cpulayout`): cAdvisor builds from them the cores, sockets and
uncore caches the kubelet's CPU manager picks CPUs by. And for the PCI devices the
profile names, ``bus/pci/devices/<BDF>/numa_node``: the kernel's NUMA node of the device, ``-1``
when the platform gives none (Documentation/ABI/testing/sysfs-bus-pci); the exporter reads it
for DRA devices published with only a ``resource.kubernetes.io/pciBusID``.
"""

from __future__ import annotations

from pathlib import Path

from ...topology import format_cpulist
from ..cpulayout import L3_SIZE_KB, cpu_entries
from ..profile import NodeSpec

ADMISSION_FEATURE_GATES = ("PodLevelResourceManagers",)


def write_sysfs(spec: NodeSpec, root: str | Path) -> Path:
    """Create (or refresh) the tree under ``root``; returns ``root``."""
    root = Path(root)
    node_root = root / "devices" / "system" / "node"
    cpu_root = root / "devices" / "system" / "cpu"
    node_root.mkdir(parents=True, exist_ok=True)
    cpu_root.mkdir(parents=True, exist_ok=True)
    (cpu_root / "online").write_text(format_cpulist(spec.all_cpus) + "\n")
    (node_root / "online").write_text(
        format_cpulist({n.numa_id for n in spec.numa_nodes}) + "\n")
    write_cpu_topology(spec, cpu_root)
    for bus_id, numa in spec.pci_numa.items():
        device_dir = root / "bus" / "pci" / "devices" / bus_id
        device_dir.mkdir(parents=True, exist_ok=True)
        (device_dir / "numa_node").write_text(f"{numa}\n")
    distances = spec.distances()
    for node in spec.numa_nodes:
        directory = node_root / f"node{node.numa_id}"
        directory.mkdir(exist_ok=True)
        (directory / "cpulist").write_text(format_cpulist(node.cpus) + "\n")
        row = distances[node.numa_id]
        (directory / "distance").write_text(" ".join(str(row[n]) for n in sorted(row)) + "\n")
        hugepage_bytes = sum(size * pages for size, pages in node.hugepages.items())
        total_kb = (node.memory_bytes + hugepage_bytes) // 1024
        (directory / "meminfo").write_text(
            f"Node {node.numa_id} MemTotal:       {total_kb} kB\n"
            f"Node {node.numa_id} MemFree:        {total_kb // 2} kB\n"
            f"Node {node.numa_id} HugePages_Total:     0\n")
        for size, pages in node.hugepages.items():
            pages_dir = directory / "hugepages" / f"hugepages-{size // 1024}kB"
            pages_dir.mkdir(parents=True, exist_ok=True)
            (pages_dir / "nr_hugepages").write_text(f"{pages}\n")
            (pages_dir / "free_hugepages").write_text(f"{pages}\n")
    return root


def write_cpu_topology(spec: NodeSpec, cpu_root: Path) -> None:
    """Each CPU's ``topology/`` and, where the profile names one, its L3 (``cache/index3``)."""
    siblings = spec.thread_siblings()
    entries = cpu_entries(spec)
    caches: dict[int, set[int]] = {}
    for entry in entries:
        if entry.l3 is not None:
            caches.setdefault(entry.l3, set()).add(entry.cpu)
    words = max(spec.all_cpus, default=0) // 32 + 1
    for entry in entries:
        files = {"topology/core_id": str(entry.core_id),
                 "topology/physical_package_id": str(entry.socket),
                 "topology/die_id": str(entry.die),
                 "topology/thread_siblings_list": format_cpulist(siblings[entry.cpu]),
                 "topology/core_cpus_list": format_cpulist(siblings[entry.cpu])}
        if entry.l3 is not None:
            shared = caches[entry.l3]
            files.update({"cache/index3/id": str(entry.l3), "cache/index3/level": "3",
                          "cache/index3/type": "Unified",
                          "cache/index3/size": f"{L3_SIZE_KB}K",
                          "cache/index3/shared_cpu_list": format_cpulist(shared),
                          "cache/index3/shared_cpu_map": _cpu_mask(shared, words)})
        for name, text in files.items():
            path = cpu_root / f"cpu{entry.cpu}" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text + "\n")


def _cpu_mask(cpus: set[int], words: int) -> str:
    """The kernel's bitmap format: 32-bit words in hex, the highest first."""
    return ",".join(f"{sum(1 << (c % 32) for c in cpus if c // 32 == w):08x}"
                    for w in reversed(range(words)))


def write_kubelet_config(spec: NodeSpec, path: str | Path) -> Path:
    """The simulated kubelet's ``KubeletConfiguration`` file (as ``/var/lib/kubelet/config.yaml``
    holds it), with the profile's resource-manager policies, their options and feature gates:
    the configuration the simulator's admission follows; and what it reserves, as the Node's
    allocatable it shows is computed (the reserved memory in ``systemReserved``, no eviction
    threshold)."""
    path = Path(path)
    reserved = sum(amount for (_, kind), amount in spec.reserved_memory.items()
                   if kind == "memory")
    text = ("apiVersion: kubelet.config.k8s.io/v1beta1\n"
            "kind: KubeletConfiguration\n"
            f"cpuManagerPolicy: {spec.cpu_manager_policy}\n"
            f"memoryManagerPolicy: {spec.memory_manager_policy}\n"
            f"topologyManagerPolicy: {spec.topology_manager_policy}\n"
            f"topologyManagerScope: {spec.topology_manager_scope}\n"
            f"reservedSystemCPUs: \"{format_cpulist(spec.reserved_cpus)}\"\n"
            f"systemReserved:\n  memory: \"{reserved}\"\n"
            "evictionHard: {}\n"
            f"maxPods: {spec.max_pods}\n")
    for key, options in (("cpuManagerPolicyOptions", spec.cpu_manager_policy_options),
                         ("topologyManagerPolicyOptions", spec.topology_manager_policy_options)):
        if options:
            text += f"{key}:\n" + "".join(f"  {name}: \"{value}\"\n"
                                          for name, value in sorted(options.items()))
    # the gates that change admission (the profile's others describe the podresources API)
    gates = {g: on for g, on in spec.feature_gates.items() if g in ADMISSION_FEATURE_GATES}
    if gates:
        text += "featureGates:\n" + "".join(f"  {gate}: {str(on).lower()}\n"
                                             for gate, on in sorted(gates.items()))
    path.write_text(text)
    return path
