"""/numa over HTTP and ``snapshot --format svg|html``: the page of the last refresh (no kubelet
call), its headers, before the first refresh, turned off, hostile kubelet data, the CLI.
The browser's view of it is tests/integration/test_numa_browser.py."""

from __future__ import annotations

import re
import xml.dom.minidom

import aiohttp
import pytest

from exporter.cli import parse_args
from exporter.commands.serve import UsageError
from exporter.commands.snapshot import snapshot
from exporter.simulator import Faults
from exporter.web.server import make_app, start_http

from ..support.harness import Exporter, Node, small_profile

# the kubelet places the pod on node 0, the lowest that holds it: CPUs 1 and 2 (0 is reserved)
PODS = [{"namespace": "ns", "name": "p", "containers": [{"name": "c", "cpus": 2}]}]


async def test_the_page_is_the_last_refresh_drawn_without_a_kubelet_call():
    async with Node(small_profile(pods=PODS)) as node, \
            Exporter(node.settings(interval=60.0)) as exporter:
        await exporter.ready()
        calls = node.simulator.stats.count()
        pages = [await exporter.get("/numa") for _ in range(5)]
        bodies = []
        for _ in range(2):
            async with exporter.session.get(exporter.url + "/numa") as response:
                bodies.append(await response.text())
        assert node.simulator.stats.count() == calls  # five pages, no call to the kubelet
        response = pages[0]
        assert [p.status for p in pages] == [200] * 5
        assert response.headers["Content-Type"] == "text/html; charset=utf-8"
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Content-Encoding"] == "gzip"  # aiohttp asks for it
        async with exporter.session.get(exporter.url + "/numa", headers={
                "Accept-Encoding": "identity"}) as plain:
            assert "Content-Encoding" not in plain.headers
            assert await plain.text() == bodies[0]
        policy = response.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
        body = bodies[0]
        assert bodies[1] == body  # the same refresh: the page built once, kept
        assert "NUMA map of node test-node" in body
        # CPUs 0-7, CPU 0 reserved; the pod's 2 CPUs on node 0 (1 and 2)
        assert body.count("data-cpu=") == 8
        assert 'data-cpu="0" data-state="reserved"' in body
        assert body.count('data-state="held" data-numa="0" data-holder="ns/p/c"') == 2
        assert '<meta http-equiv="refresh" content="60">' in body  # every --interval
        landing = await exporter.session.get(exporter.url + "/")
        assert '<a href="numa">/numa</a>' in await landing.text()
        assert (await exporter.get("/numa", allow_redirects=False)).status == 200
        async with exporter.session.post(exporter.url + "/numa") as posted:
            assert posted.status == 405


async def test_before_the_first_refresh_the_page_says_so_and_off_it_is_gone(tmp_path):
    async with Node(small_profile()) as node:
        settings = node.settings(socket=str(tmp_path / "absent.sock"))
        async with Exporter(settings) as exporter:
            await exporter.wait_for(lambda s: s.get("podresources_up") == 0.0)
            async with exporter.session.get(exporter.url + "/numa") as response:
                assert response.status == 503
                assert "no snapshot of the kubelet yet" in await response.text()
                assert "Traceback" not in await response.text()
                assert response.headers["Retry-After"] == "5"
        # --no-numa-page: no route, no link
        exporter = Exporter(node.settings())
        server, port = await start_http(make_app(exporter.refresher),
                                        "127.0.0.1", 0)
        try:
            await exporter.refresher.refresh_once()
            async with aiohttp.ClientSession() as session:
                async with session.get(f"http://127.0.0.1:{port}/numa") as response:
                    assert response.status == 404
                async with session.get(f"http://127.0.0.1:{port}/") as response:
                    assert "numa" not in await response.text()
        finally:
            await exporter.refresher.client.close()
            await server.cleanup()
    assert parse_args(["--no-numa-page"]).no_numa_page is True
    assert parse_args([], environ={"PODRESOURCES_EXPORTER_NO_NUMA_PAGE": "true"}).no_numa_page
    assert parse_args(["demo", "--no-numa-page"]).no_numa_page is True
    assert parse_args([]).no_numa_page is False


async def test_hostile_kubelet_data_makes_a_page_not_a_crash():
    async with Node("dual-socket-gpu", faults=Faults(garbage="inconsistent")) as node, \
            Exporter(node.settings()) as exporter:
        await exporter.wait_for(lambda s: (s.get("podresources_data_issues_total",
                                                 kind="cpu_multiple_owners") or 0) > 0,
                                what="hostile data counted")
        async with exporter.session.get(exporter.url + "/numa") as response:
            assert response.status == 200
            body = await response.text()
    svg = body[body.index("<svg"):body.index("</svg>") + 6]
    xml.dom.minidom.parseString(svg.encode())  # well formed, whatever the names held
    assert body.count("<script>") == 1
    assert "data issues:" in body and "cpu_multiple_owners" in body
    assert "assigned twice: inconsistent kubelet data" in body


async def test_snapshot_draws_the_same_map_as_svg_and_html(capsys):
    async with Node(small_profile(pods=PODS)) as node:
        settings = node.settings(node_name="test-node")
        assert await snapshot(settings, "svg", "info") == 0
        svg = capsys.readouterr().out
        assert await snapshot(settings, "html", "info") == 0
        page = capsys.readouterr().out
    document = xml.dom.minidom.parseString(svg.encode())
    cells = {int(r.getAttribute("data-cpu")): (r.getAttribute("data-state"),
                                               r.getAttribute("data-holder"))
             for r in document.getElementsByTagName("rect") if r.hasAttribute("data-cpu")}
    assert cells == {0: ("reserved", ""), 1: ("held", "ns/p/c"), 2: ("held", "ns/p/c"),
                     3: ("free", ""), 4: ("free", ""), 5: ("free", ""), 6: ("free", ""),
                     7: ("free", "")}
    assert page.startswith("<!DOCTYPE html>") and "http-equiv" not in page
    cell = re.compile(r'<rect class="[^"]*" [^>]*data-cpu="\d+"[^>]*>')
    assert cell.findall(page) == cell.findall(svg) and len(cell.findall(svg)) == 8


async def test_snapshot_refuses_a_map_with_a_question():
    async with Node(small_profile()) as node:
        with pytest.raises(UsageError, match="--format svg draws the node map"):
            await snapshot(node.settings(), "svg", "info", shape="cpu=2")


async def test_a_map_that_cannot_be_drawn_is_a_503_and_one_log_line(monkeypatch, caplog):
    from exporter.nodemap import page

    def broken(*args):
        raise ValueError("a drawing bug")

    monkeypatch.setattr(page, "build_page", broken)
    async with Node(small_profile()) as node, \
            Exporter(node.settings(interval=60.0)) as exporter:
        await exporter.ready()
        for _ in range(3):
            async with exporter.session.get(exporter.url + "/numa") as response:
                assert response.status == 503
                assert "could not be drawn" in await response.text()
        assert (await exporter.get("/metrics")).status == 200
    logged = [r for r in caplog.records if "node map could not be drawn" in r.getMessage()]
    assert len(logged) == 1  # once for this snapshot, not once per request


async def test_the_shapes_answers_are_on_the_page_as_on_metrics(tmp_path):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("shapes:\n  pair: {cpu: 2}\n  too-big: {cpu: 8}\n")
    async with Node(small_profile(pods=PODS)) as node, \
            Exporter(node.settings(fit_shapes=str(shapes))) as exporter:
        scrape = await exporter.wait_for(
            lambda s: s.get("podresources_shape_admitted", shape="too-big") is not None,
            what="the shapes answered")
        async with exporter.session.get(exporter.url + "/numa") as response:
            body = await response.text()
    # free CPUs: 3 on node 0, 4-7 on node 1 (CPU 0 reserved, 1-2 held): two CPUs fit on node
    # 1 alone; eight fit nowhere (five are free in all)
    assert scrape.value("podresources_shape_admitted", shape="pair") == 1
    assert scrape.value("podresources_shape_admitted", shape="too-big") == 0
    assert 'data-shape="pair" data-admitted="true"' in body
    assert 'data-shape="too-big" data-admitted="false"' in body
    fits = re.findall(r'data-shape="([^"]+)" data-fits="(true|false)"', body)
    assert fits == [("pair", "false"), ("too-big", "false"),  # NUMA node 0
                    ("pair", "true"), ("too-big", "false")]  # NUMA node 1
    assert "rejected: UnexpectedAdmissionError" in body or "rejected: TopologyAffinity" in body
