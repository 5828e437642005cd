"""/numa in a real browser: Debian's chromium, headless, against the exporter on the simulator's
profiles. Every CPU cell is there with the holder the simulated kubelet gave it, the counts per
NUMA node are the metrics' of the same exporter, and the page logs no error (the
Content-Security-Policy would log a refused script or style). How long the page takes is the
benchmark's (``python -m benchmarks.numa_page``), not asserted here.

Without chromium these tests skip locally (``tests/tools/chromium.sh`` installs it) and fail
under ``CI=true``."""

from __future__ import annotations

from collections import Counter

import pytest

from ..support.chromium import Browser
from ..support.harness import Exporter, Node, Scrape, require_tool

READ = """(() => {
  const read = (selector, names) => [...document.querySelectorAll(selector)].map(
      e => names.map(n => e.getAttribute('data-' + n)));
  return {cells: read('[data-cpu]', ['cpu', 'state', 'numa', 'holder']),
          chips: read('[data-device]', ['kind', 'resource', 'device', 'numa', 'state']),
          bars: read('g.memory', ['numa', 'memory-type', 'allocatable', 'allocated']),
          boxes: read('g.numa', ['numa']).map(b => b[0]),
          height: document.querySelector('svg.nodemap').getBoundingClientRect().height};
})()"""


def kubelet_holders(node: Node) -> dict[int, str]:
    """Who the simulated kubelet gave each exclusive CPU to (its pods as ``List`` has them)."""
    holders: dict[int, str] = {}
    for pod in node.simulator.state.listed_pods(node.spec.feature("ListActivePodsOnly")):
        assignment = pod.assignment
        for container in assignment.containers:
            for cpu in container.cpu_ids:
                holders[cpu] = f"{assignment.namespace}/{assignment.name}/{container.name}"
        for cpu in assignment.cpu_ids:
            holders.setdefault(cpu, f"{assignment.namespace}/{assignment.name}")
    return holders


def numa_counts(rows, *keys: int, where=lambda row: True) -> Counter:
    return Counter(tuple(row[k] for k in keys) if len(keys) > 1 else row[keys[0]]
                   for row in rows if where(row))


def series(scrape: Scrape, name: str, *labels: str) -> dict:
    return {key: int(value) for key, value in scrape.by(name, *labels).items() if value}


@pytest.mark.parametrize("profile", ["small", "dual-socket-gpu", "large", "gb200-tray"])
async def test_every_cpu_and_device_is_drawn_as_the_kubelet_and_the_metrics_say(profile):
    chromium = require_tool("chromium", "Debian's chromium: bash tests/tools/chromium.sh")
    async with Node(profile) as node, Exporter(node.settings(interval=60.0)) as exporter:
        scrape = await exporter.ready(timeout=60)
        async with Browser(chromium) as browser:
            page = await browser.page()
            await page.goto(exporter.url + "/numa")
            drawn = await page.evaluate(READ)
            errors = page.errors()
        assert errors == []
        assert drawn["height"] > 100

        # every CPU of the node, once, with the state and holder the kubelet gave it
        online = {cpu for n in node.spec.numa_nodes for cpu in n.cpus}
        cells = {int(cpu): (state, numa, holder) for cpu, state, numa, holder in drawn["cells"]}
        assert len(drawn["cells"]) == len(cells) and set(cells) == online
        holders = kubelet_holders(node)
        allocatable = set(node.simulator.state.allocatable().cpu_ids)
        for cpu, (state, _, holder) in cells.items():
            expected = ("held" if cpu in holders else "free" if cpu in allocatable
                        else "reserved")
            assert (state, holder) == (expected, holders.get(cpu, "")), cpu
        assert set(drawn["boxes"]) >= {str(n.numa_id) for n in node.spec.numa_nodes}

        # per NUMA node, the metrics' counts
        rows = list(cells.values())
        assert numa_counts(rows, 1) == series(scrape, "podresources_numa_node_cpus", "numa_node")
        assert numa_counts(rows, 1, where=lambda r: r[0] == "held") == series(
            scrape, "podresources_cpus_allocated", "numa_node")
        assert numa_counts(rows, 1, where=lambda r: r[0] in ("held", "free")) == series(
            scrape, "podresources_cpus_allocatable", "numa_node")
        chips = [row for row in drawn["chips"] if row[0] == "device"]
        assert chips  # every profile has device-plugin devices
        assert numa_counts(chips, 3, 1, where=lambda r: r[4] in ("held", "unavailable")) \
            == series(scrape, "podresources_devices_allocated", "numa_node", "resource")
        assert numa_counts(chips, 3, 1, where=lambda r: r[4] in ("held", "free")) == series(
            scrape, "podresources_devices_allocatable", "numa_node", "resource")
        assert numa_counts(chips, 3, 1, where=lambda r: r[4] == "unavailable") == series(
            scrape, "podresources_devices_allocated_unavailable", "numa_node", "resource")
        dra = Counter()
        for (_, numa, driver), count in series(scrape, "podresources_dra_devices_allocated",
                                               "pool", "numa_node", "driver").items():
            dra[(numa, driver)] += count
        assert numa_counts([r for r in drawn["chips"] if r[0] == "dra"], 3, 1,
                           where=lambda r: r[4] == "held") == dra
        bars = {(numa, kind): (int(allocatable or 0), int(allocated))
                for numa, kind, allocatable, allocated in drawn["bars"]}
        assert {key: value[0] for key, value in bars.items() if value[0]} == series(
            scrape, "podresources_memory_allocatable_bytes", "numa_node", "memory_type")
        assert {key: value[1] for key, value in bars.items() if value[1]} == {
            key: value for key, value in series(
                scrape, "podresources_memory_allocated_bytes", "numa_node",
                "memory_type").items() if "," not in key[0]}
