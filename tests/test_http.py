"""HTTP behaviour of /metrics, /healthz, /readyz and /."""

from __future__ import annotations

import asyncio
import gzip

from .helpers import Exporter, Node, small_profile

OPENMETRICS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                      "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")


async def test_readyz_waits_for_the_first_refresh_and_healthz_does_not():
    async with Node(small_profile()) as node, \
            Exporter(node.settings(), run_loop=False) as exporter:
        assert (await exporter.get("/readyz")).status == 503
        assert (await exporter.get("/healthz")).status == 200
        await exporter.refresher.refresh_once()
        assert (await exporter.get("/readyz")).status == 200


async def test_readyz_is_ready_even_when_the_kubelet_is_away():
    node = Node(small_profile())  # never started: no socket
    async with Exporter(node.settings(), run_loop=False) as exporter:
        await exporter.refresher.refresh_once()
        assert (await exporter.get("/readyz")).status == 200
        scrape = await exporter.scrape()
        assert scrape.value("podresources_up") == 0
        assert scrape.value("podresources_node_info", node="test-node", kubelet_api="none") == 1


async def test_methods_and_paths():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        async with exporter.session.post(exporter.url + "/metrics") as response:
            assert response.status == 405
            assert set(response.headers["Allow"].replace(" ", "").split(",")) == {"GET", "HEAD"}
        async with exporter.session.delete(exporter.url + "/healthz") as response:
            assert response.status == 405
        for method in ("GET", "POST", "PUT"):
            async with exporter.session.request(method, exporter.url + "/metrics/x") as response:
                assert response.status == 404
        async with exporter.session.head(exporter.url + "/metrics") as response:
            assert response.status == 200
            assert await response.read() == b""
        landing = await exporter.session.get(exporter.url + "/")
        assert 'href="metrics"' in await landing.text()
        landing.release()


async def test_content_negotiation_and_gzip():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        exporter.refresher.stop()  # freeze the exposition for comparisons
        await asyncio.sleep(0.3)
        async with exporter.session.get(exporter.url + "/metrics", headers={
                "Accept": OPENMETRICS_ACCEPT, "Accept-Encoding": "identity"}) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text")
            openmetrics = await response.read()
        assert openmetrics.endswith(b"# EOF\n")
        assert b"# TYPE podresources_api_requests counter" in openmetrics
        async with exporter.session.get(exporter.url + "/metrics",
                                        headers={"Accept-Encoding": "identity"}) as response:
            assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = await response.read()
        assert b"# EOF" not in text
        assert b"# TYPE podresources_api_requests_total counter" in text
        async with exporter.session.get(exporter.url + "/metrics", auto_decompress=False,
                                        headers={"Accept-Encoding": "gzip"}) as response:
            assert response.headers["Content-Encoding"] == "gzip"
            assert gzip.decompress(await response.read()) == text


async def test_scrapes_never_call_the_kubelet():
    async with Node(small_profile()) as node, \
            Exporter(node.settings(interval=3600), run_loop=True) as exporter:
        await exporter.ready()
        calls = len(node.simulator.stats.records)
        await asyncio.gather(*(exporter.scrape() for _ in range(50)))
        assert len(node.simulator.stats.records) == calls


async def test_oversized_and_malformed_requests_get_4xx_and_the_server_survives():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        answers = []
        for raw in (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20000 + b"\r\n\r\n",
                    b"\x16\x03\x01garbage\r\n\r\n",
                    b"GET /metrics HTTP/9.9\r\n\r\n"):
            reader, writer = await asyncio.open_connection("127.0.0.1", exporter.port)
            writer.write(raw)
            await writer.drain()
            answers.append(await asyncio.wait_for(reader.read(200), 5))
            writer.close()
        for answer in answers:
            status = int(answer.split(b" ")[1])
            assert 400 <= status < 500, answer
        scrape = await exporter.scrape()
        assert scrape.value("podresources_up") == 1
