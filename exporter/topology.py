"""Read the node's NUMA layout from sysfs.

The podresources API names CPUs by id but never says which NUMA node they sit on; the kernel
does, in ``devices/system/node/node<N>/cpulist``. Memory and hugepage totals come from the same
directories and are shown by the ``snapshot`` command. The CPU layout the kubelet's CPU
manager picks by (cores, sockets, uncore caches: the fit answers' ``takeByTopology``) is read as
cAdvisor reads it for the kubelet (``utils/sysinfo`` ``GetNodesInfo``): a core is the CPUs of
one NUMA node sharing ``topology/core_id`` and ``physical_package_id``; a core's uncore cache is
the first cache above L2 (``cache/index*``) shared by fewer CPUs than its NUMA node has; a CPU
without ``core_id`` falls back to ``thread_siblings_list``. docs/fit.md says where this and
the kernel's own grouping can differ.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .model import NumaNode, Topology

log = logging.getLogger(__name__)

_NODE_DIR = re.compile(r"^node(\d+)$")
_HUGEPAGES_DIR = re.compile(r"^hugepages-(\d+)kB$")
_MEMTOTAL = re.compile(r"MemTotal:\s+(\d+)\s*kB")


class TopologyError(Exception):
    """sysfs could not be read or parsed."""


def parse_cpulist(text: str) -> frozenset[int]:
    """Parse the kernel's list format: ``0-15,32-47``, ``3``, ``0-31:2/4`` or empty.

    Raises ``ValueError`` on anything else, so a corrupt file is reported, not misread.
    """
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        return frozenset()
    for part in text.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+)/(\d+))?)?", part)
        if not match:
            raise ValueError(f"bad cpulist element {part!r} in {text!r}")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ValueError(f"bad cpulist range {part!r} in {text!r}")
        if match.group(3) is not None:
            used, group = int(match.group(3)), int(match.group(4))
            if used == 0 or group == 0 or used > group:
                raise ValueError(f"bad cpulist stride {part!r} in {text!r}")
            cpus.update(c for c in range(first, last + 1) if (c - first) % group < used)
        else:
            cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_cpulist(cpus: set[int] | frozenset[int] | list[int]) -> str:
    """The inverse of :func:`parse_cpulist` (ranges, no strides): ``{0,1,2,5}`` -> ``0-2,5``."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    index = 0
    while index < len(ordered):
        start = end = ordered[index]
        while index + 1 < len(ordered) and ordered[index + 1] == end + 1:
            index += 1
            end = ordered[index]
        parts.append(str(start) if start == end else f"{start}-{end}")
        index += 1
    return ",".join(parts)


def read_topology(sysfs_root: str | Path) -> Topology:
    """Read every ``node<N>`` under ``<sysfs_root>/devices/system/node``.

    A machine without that directory (NUMA support compiled out) is treated as one node 0
    holding every online CPU, which is what the kubelet assumes too.
    """
    nodes = read_numa_nodes(sysfs_root)
    layout = read_cpu_layout(sysfs_root, nodes)
    return Topology.from_nodes(nodes, layout.siblings, layout.packages, layout.uncore)


def read_numa_nodes(sysfs_root: str | Path) -> list[NumaNode]:
    """The NUMA nodes of :func:`read_topology`, without the SMT siblings: a few files per
    node, where the siblings are a file per CPU (512 on a large node)."""
    root = Path(sysfs_root)
    node_root = root / "devices" / "system" / "node"
    online = _read_online_cpus(root)
    nodes: list[NumaNode] = []
    try:
        entries = sorted(node_root.iterdir()) if node_root.is_dir() else []
    except OSError as error:
        raise TopologyError(f"cannot list {node_root}: {error}") from error
    for entry in entries:
        match = _NODE_DIR.match(entry.name)
        if not match or not entry.is_dir():
            continue
        numa_id = int(match.group(1))
        cpulist_path = entry / "cpulist"
        try:
            cpus = parse_cpulist(cpulist_path.read_text())
        except OSError as error:
            raise TopologyError(f"cannot read {cpulist_path}: {error}") from error
        except ValueError as error:
            raise TopologyError(f"{cpulist_path}: {error}") from error
        if online is not None:
            cpus = cpus & online
        nodes.append(NumaNode(
            numa_id=numa_id,
            cpus=cpus,
            memory_bytes=_read_memtotal(entry / "meminfo"),
            hugepages=_read_hugepages(entry / "hugepages"),
            distances=_read_distances(entry / "distance"),
        ))
    if not nodes:
        if online is None:
            raise TopologyError(
                f"no NUMA nodes under {node_root} and no {root / 'devices/system/cpu/online'}; "
                "is --sysfs-root pointing at a sysfs tree?")
        # cAdvisor's getCPUTopology: one node per physical package, numbered by it
        by_package: dict[int, set[int]] = {}
        for cpu, package in read_packages(root, online).items():
            by_package.setdefault(package, set()).add(cpu)
        log.info("no NUMA information under %s; treating each socket's online CPUs as a NUMA "
                 "node, as cAdvisor does", node_root)
        nodes.extend(NumaNode(numa_id=package, cpus=frozenset(cpus))
                     for package, cpus in sorted(by_package.items()))
        if not nodes:
            nodes.append(NumaNode(numa_id=0, cpus=online))
    return nodes


class RereadTopology:
    """The NUMA topology, read again at most every ``interval`` seconds (CPUs can be
    hot-plugged); only a real change replaces it, so the accounting starts over only then.

    A re-read first compares the files the nodes are read from, as raw bytes, with the last
    time (:func:`sysfs_fingerprint`: a few small reads per node, no parsing); only when they
    differ are the nodes read and compared. The SMT siblings are read again only with a
    change of the nodes: a core's threads change only by going on- or offline, which the
    nodes' CPU lists show."""

    def __init__(self, sysfs_root: str | Path, interval: float, topology: Topology):
        self.sysfs_root = sysfs_root
        self.interval = interval
        self.topology = topology
        self._read_at = time.monotonic()
        self._seen: tuple[object, ...] | None = None  # the files, as of the last full read

    def current(self) -> Topology:
        now = time.monotonic()
        if now - self._read_at < self.interval:
            return self.topology
        self._read_at = now
        seen = sysfs_fingerprint(self.sysfs_root)
        if seen == self._seen:
            return self.topology
        try:
            nodes = read_numa_nodes(self.sysfs_root)
            self._seen = seen
            if {node.numa_id: node for node in nodes} == self.topology.numa_nodes:
                return self.topology
            topology = read_topology(self.sysfs_root)
        except TopologyError as error:
            log.warning("keeping the previous NUMA topology: %s", error)
            return self.topology
        if topology.numa_nodes != self.topology.numa_nodes:
            log.info("NUMA topology changed: %d NUMA nodes, %d CPUs",
                     len(topology.numa_nodes), len(topology.cpu_to_numa))
            self.topology = topology
        return self.topology


def sysfs_fingerprint(sysfs_root: str | Path) -> tuple[object, ...]:
    """The bytes :func:`read_numa_nodes` reads its figures from (the online CPUs; each node's
    CPU list, ``MemTotal`` line, distances and hugepage counts; the lists of nodes and of
    hugepage sizes), read with plain system calls: equal fingerprints, equal nodes."""
    system = os.path.join(os.fspath(sysfs_root), "devices", "system")
    node_root = os.path.join(system, "node")
    parts: list[object] = [_raw(os.path.join(system, "cpu", "online"))]
    try:
        names = sorted(os.listdir(node_root))
    except OSError:
        names = []
    parts.append(tuple(names))
    for name in names:
        if not _NODE_DIR.match(name):
            continue
        node = os.path.join(node_root, name)
        memtotal = _MEMTOTAL.search((_raw(os.path.join(node, "meminfo")) or b"").decode(
            "ascii", "replace"))
        parts += [_raw(os.path.join(node, "cpulist")), memtotal and memtotal.group(1),
                  _raw(os.path.join(node, "distance"))]
        hugepages = os.path.join(node, "hugepages")
        try:
            sizes = sorted(os.listdir(hugepages))
        except OSError:
            sizes = []
        parts += [(size, _raw(os.path.join(hugepages, size, "nr_hugepages"))) for size in sizes]
    return tuple(parts)


def _raw(path: str) -> bytes | None:
    """A small file's bytes (sysfs files are read whole by one read); None when unreadable."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(descriptor, 65536)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def read_thread_siblings(sysfs_root: str | Path, cpus: frozenset[int]) -> dict[int, frozenset[int]]:
    """Each CPU's core siblings (itself included), limited to ``cpus`` (the online ones).

    The kernel keeps ``thread_siblings_list`` to online CPUs only. A CPU whose file is missing
    or unreadable (an old kernel, a container hiding it) is left out: it counts as a core of its
    own, which is what a machine without SMT looks like. One small read per CPU (512 on a large
    node, at start and when the nodes change): plain system calls, no path objects.
    """
    cpu_root = os.path.join(os.fspath(sysfs_root), "devices", "system", "cpu")
    siblings: dict[int, frozenset[int]] = {}
    for cpu in sorted(cpus):
        path = os.path.join(cpu_root, f"cpu{cpu}", "topology", "thread_siblings_list")
        raw = _raw(path)
        if raw is None:
            continue
        try:
            listed = parse_cpulist(raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError) as error:
            log.debug("ignoring %s: %s", path, error)
            continue
        siblings[cpu] = (listed & cpus) | {cpu}
    return siblings


def read_packages(sysfs_root: str | Path, cpus: frozenset[int]) -> dict[int, int]:
    """Each CPU's socket (``topology/physical_package_id``, what cAdvisor gives the kubelet's
    CPU manager); a CPU whose file is missing or unreadable is left out."""
    return _read_ints(Path(sysfs_root) / "devices" / "system" / "cpu", cpus,
                      "topology/physical_package_id")


@dataclass(frozen=True)
class CpuLayout:
    """The CPU manager's cores (each CPU's threads), sockets and uncore caches."""

    siblings: dict[int, frozenset[int]]
    packages: dict[int, int]
    uncore: dict[int, int]


@dataclass(frozen=True)
class CacheInfo:
    """What cAdvisor keeps of a cache (``sysfs.CacheInfo``): equal ones are one cache."""

    cache_id: int
    size_kb: int
    level: int
    kind: str
    cpus: int  # CPUs in shared_cpu_map


def read_cpu_layout(sysfs_root: str | Path, nodes: list[NumaNode]) -> CpuLayout:
    """The cores, sockets and uncore caches as cAdvisor gives them to the kubelet, read from
    ``<sysfs_root>/devices/system/cpu`` (:func:`cpu_layout`)."""
    cpus = frozenset().union(*(node.cpus for node in nodes))
    cpu_root = Path(sysfs_root) / "devices" / "system" / "cpu"
    return cpu_layout(nodes, _read_ints(cpu_root, cpus, "topology/core_id"),
                      read_packages(sysfs_root, cpus),
                      lambda cpu: _read_caches(cpu_root, cpu),
                      lambda missing: read_thread_siblings(sysfs_root, missing))


def cpu_layout(nodes: list[NumaNode], core_ids: dict[int, int], packages: dict[int, int],
               caches: Callable[[int], list[CacheInfo] | None],
               siblings_of: Callable[[frozenset[int]], dict[int, frozenset[int]]]
               ) -> CpuLayout:
    """cAdvisor's ``getCoresInfo`` and ``addCacheInfo`` over each NUMA node in its order
    (directory names sorted as strings): a core is the node's CPUs sharing ``core_id`` and
    package (``siblings_of`` gives the siblings of the CPUs without them); ``caches(cpu)`` is
    the caches of a core's first thread, ``None`` when they cannot be read."""
    siblings: dict[int, frozenset[int]] = {}
    uncore: dict[int, int] = {}
    for node in sorted(nodes, key=lambda n: f"node{n.numa_id}"):
        cores: dict[tuple[int, int], list[int]] = {}
        for cpu in sorted(node.cpus, key=lambda c: f"cpu{c}"):
            if cpu in core_ids and cpu in packages:
                cores.setdefault((core_ids[cpu], packages[cpu]), []).append(cpu)
        for threads in cores.values():
            for cpu in threads:
                siblings[cpu] = frozenset(threads)
        uncore.update(_uncore_caches(list(cores.values()), caches))
    every: frozenset[int] = frozenset().union(*(node.cpus for node in nodes))
    siblings.update(siblings_of(every - siblings.keys()))
    return CpuLayout(siblings, packages, uncore)


def _uncore_caches(cores: list[list[int]], caches: Callable[[int], list[CacheInfo] | None]
                   ) -> dict[int, int]:
    """Each CPU's uncore cache id on one NUMA node (``addCacheInfo``, then the kubelet's
    ``getUncoreCacheID``, which takes the first): a cache above L2 shared by other than the
    node's thread count; the first core whose caches cannot be read ends the node's reading."""
    found: dict[int, int] = {}
    for threads in cores:
        read = caches(threads[0])
        if read is None:
            break
        per_node = len(cores) * len(threads)
        for cache in read:
            if cache.level > 2 and cache.cpus != per_node:
                found.update((cpu, cache.cache_id) for cpu in threads)
                break
    return found


def _read_caches(cpu_root: Path, cpu: int) -> list[CacheInfo] | None:
    """``GetCacheInfo`` for every ``index*`` of the CPU, in name order; ``None`` when one
    cannot be read as cAdvisor reads it."""
    directory = cpu_root / f"cpu{cpu}" / "cache"
    try:
        names = sorted(entry.name for entry in directory.iterdir()
                       if entry.name.startswith("index"))
        caches = []
        for name in names:
            index = directory / name
            size = re.match(r"\s*(\d+)K", (index / "size").read_text())
            if size is None:
                return None
            caches.append(CacheInfo(int((index / "id").read_text()), int(size.group(1)),
                                 int((index / "level").read_text()),
                                 (index / "type").read_text().strip(),
                                 _mask_bits((index / "shared_cpu_map").read_text())))
    except (OSError, ValueError):
        return None
    return caches


def _mask_bits(text: str) -> int:
    """CPUs in a kernel bitmap (``0000ffff,00000000``), as cAdvisor's ``getCPUCount``."""
    return sum(bin(int(word.strip(), 16)).count("1") for word in text.split(","))


def _read_ints(cpu_root: Path, cpus: frozenset[int], name: str) -> dict[int, int]:
    """One small integer file per CPU (512 on a large node, at start and when the nodes
    change): plain system calls, no path objects; unreadable or not an integer: left out."""
    root = os.fspath(cpu_root)
    values: dict[int, int] = {}
    for cpu in sorted(cpus):
        raw = _raw(os.path.join(root, f"cpu{cpu}", name))
        if raw is None:
            continue
        try:
            values[cpu] = int(raw)
        except ValueError:
            continue
    return values


def _read_online_cpus(root: Path) -> frozenset[int] | None:
    path = root / "devices" / "system" / "cpu" / "online"
    try:
        return parse_cpulist(path.read_text())
    except OSError:
        return None
    except ValueError as error:
        raise TopologyError(f"{path}: {error}") from error


def _read_distances(path: Path) -> tuple[int, ...]:
    """``node<N>/distance`` (``10 21``); empty when missing or unreadable (the fit answers then
    break ties by NUMA id, as without ``prefer-closest-numa-nodes``)."""
    try:
        return tuple(int(part) for part in path.read_text().split())
    except (OSError, ValueError):
        return ()


def _read_memtotal(path: Path) -> int | None:
    try:
        match = _MEMTOTAL.search(path.read_text())
    except OSError:
        return None
    return int(match.group(1)) * 1024 if match else None


def _read_hugepages(directory: Path) -> dict[int, int]:
    pages: dict[int, int] = {}
    try:
        entries = list(directory.iterdir())
    except OSError:
        return pages
    for entry in entries:
        match = _HUGEPAGES_DIR.match(entry.name)
        if not match:
            continue
        try:
            count = int((entry / "nr_hugepages").read_text().strip())
        except (OSError, ValueError):
            log.debug("unreadable %s", entry / "nr_hugepages")
            continue
        pages[int(match.group(1)) * 1024] = count
    return pages


def hugepage_resource_name(size_bytes: int) -> str:
    """Kubernetes' resource name for a hugepage size: 2 MiB -> ``hugepages-2Mi``."""
    for unit, suffix in ((1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki")):
        if size_bytes % unit == 0:
            return f"hugepages-{size_bytes // unit}{suffix}"
    return f"hugepages-{size_bytes}"
