"""A profile's CPU layout (sockets, dies, L3 caches): the sysfs tree the simulator writes, and
the topology the simulated kubelet picks CPUs by, which must be what the exporter reads back
from that tree."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from exporter.simulator import load_profile, parse_profile, write_sysfs
from exporter.simulator.cpulayout import kubelet_topology
from exporter.simulator.profile import ProfileError
from exporter.topology import read_topology

from ...support.differential.cases import draw_case


def view(topology):  # type: ignore[no-untyped-def]
    return ({c: topology.siblings(c) for c in topology.cpu_to_numa}, topology.cpu_packages,
            topology.cpu_uncore, topology.cpu_to_numa)


def test_epyc_nps4_as_written_and_as_read(tmp_path: Path) -> None:
    """epyc-nps4: CPU 70 is core 6's second thread (6 + 64), NUMA node 0, socket 0, L3 1
    (cores 4-7); CPU 40 is core 40, NUMA node 5, socket 1, L3 10."""
    spec = load_profile("epyc-nps4")
    root = write_sysfs(spec, tmp_path)
    cache = root / "devices/system/cpu/cpu70/cache/index3"
    assert (cache / "id").read_text() == "1\n"
    assert (cache / "shared_cpu_list").read_text() == "4-7,68-71\n"
    assert (cache / "shared_cpu_map").read_text() == "00000000,000000f0,00000000,000000f0\n"
    assert (root / "devices/system/cpu/cpu40/topology/physical_package_id").read_text() == "1\n"
    read = read_topology(root)
    assert read.cpu_uncore[70] == 1 and read.cpu_uncore[40] == 10
    assert read.siblings(70) == {6, 70} and read.cpu_to_numa[40] == 5
    assert view(read) == view(kubelet_topology(spec))


@pytest.mark.parametrize("index", range(40))
def test_drawn_layouts_read_back_as_the_simulator_sees_them(index: int, tmp_path: Path) -> None:
    """The differential's layouts (per-CPU sockets, dies with core_id per die, L3 caches,
    memory-only NUMA nodes): the exporter's reading of the tree equals the simulator's own."""
    spec = parse_profile(draw_case(random.Random(index).randrange(10**6), index).profile)
    assert view(read_topology(write_sysfs(spec, tmp_path))) == view(kubelet_topology(spec))


@pytest.mark.parametrize("layout, message", [
    ({"sockets": {"0": "0-99"}}, "names CPUs the node lacks"),
    ({"l3": {"0": "0-3", "1": "3-5"}}, "CPU 3 is in two of them"),
    ({"sockets": "0-7"}, "must map ids to CPU lists"),
    ({"dies": {"x": "0"}}, "cpu_layout.dies.x"),
])
def test_a_bad_layout_is_a_profile_error(layout: dict[str, object], message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_profile({"name": "n", "numa_nodes": [{"id": 0, "cpus": "0-7"}],
                       "cpu_layout": layout})
