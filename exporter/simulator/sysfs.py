"""Write a fake sysfs tree matching a simulator profile.

Only what the exporter reads: ``devices/system/node/node<N>/{cpulist,meminfo,hugepages/...}``,
``devices/system/node/online`` and ``devices/system/cpu/online``.
"""

from __future__ import annotations

from pathlib import Path

from ..topology import format_cpulist
from .profile import NodeSpec


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
    for node in spec.numa_nodes:
        directory = node_root / f"node{node.numa_id}"
        directory.mkdir(exist_ok=True)
        (directory / "cpulist").write_text(format_cpulist(node.cpus) + "\n")
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
