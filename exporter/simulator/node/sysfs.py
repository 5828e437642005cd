"""Write a fake sysfs tree matching a simulator profile.

Only what the exporter reads: ``devices/system/node/node<N>/{cpulist,distance,meminfo,
hugepages/...}`` (``distance``: the node's row of the NUMA distance table, as the kernel writes
it, which the Topology Manager's ``prefer-closest-numa-nodes`` compares),
``devices/system/node/online``, ``devices/system/cpu/online`` and each CPU's
``devices/system/cpu/cpu<N>/topology/thread_siblings_list``: the kernel lists there the hardware
threads of the CPU's core, the CPU itself included (Documentation/ABI/stable/
sysfs-devices-system-cpu), and cAdvisor reads it to build the CPU topology that the kubelet's CPU
manager allocates whole cores from (``full-pcpus-only``). And for the PCI devices the
profile names, ``bus/pci/devices/<BDF>/numa_node``: the kernel's NUMA node of the device, ``-1``
when the platform gives none (Documentation/ABI/testing/sysfs-bus-pci); the exporter reads it
for DRA devices published with only a ``resource.kubernetes.io/pciBusID``.
"""

from __future__ import annotations

from pathlib import Path

from ...topology import format_cpulist
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
    for cpu, siblings in spec.thread_siblings().items():
        topology_dir = cpu_root / f"cpu{cpu}" / "topology"
        topology_dir.mkdir(parents=True, exist_ok=True)
        (topology_dir / "thread_siblings_list").write_text(format_cpulist(siblings) + "\n")
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
