"""HTTP behaviour of /metrics, /healthz, /readyz and /."""

from __future__ import annotations

import asyncio
import gzip
import logging
import re

import aiohttp
import pytest

from ..support.harness import Exporter, Node, small_profile

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


# ---- content negotiation --------------------------------------------------------------------

PROMETHEUS_3_ACCEPT = ("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"
                       "application/openmetrics-text;version=0.0.1;q=0.5,"
                       "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,"
                       "text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
TEXT = "text/plain; version=0.0.4; charset=utf-8"
OM_1 = "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping="
OM_0_0_1 = "application/openmetrics-text; version=0.0.1; charset=utf-8"


@pytest.mark.parametrize("accept, content_type", [
    (None, TEXT),
    ("*/*", TEXT),  # curl's default: the classic format
    (PROMETHEUS_3_ACCEPT, OM_1 + "allow-utf-8"),
    (OPENMETRICS_ACCEPT, OM_1 + "underscores"),
    ("application/openmetrics-text", OM_1 + "underscores"),
    ("application/openmetrics-text;version=0.0.1", OM_0_0_1),
    # versions the exporter does not produce are not claimed
    ("application/openmetrics-text;version=2.0.0", TEXT),
    ("application/openmetrics-text;version=2.0.0;q=0.9,application/openmetrics-text;"
     "version=1.0.0;q=0.1", OM_1 + "underscores"),
    # q=0 refuses, and quality decides over order
    ("application/openmetrics-text;q=0", TEXT),
    ("application/openmetrics-text;q=0,text/plain", TEXT),
    ("text/plain;q=0.2, application/openmetrics-text;q=0.3", OM_1 + "underscores"),
    ("application/openmetrics-text;q=0.3, text/plain;q=0.5", TEXT),
    # the most specific range applies
    ("application/*;q=0.9, application/openmetrics-text;q=0, text/plain;q=0.1", TEXT),
    ("*/*;q=0", TEXT),  # refusing everything: text 0.0.4 is the last resort
    ("application/json", TEXT),
    ("text/plain;version=1.0.0;escaping=allow-utf-8", TEXT),
    ("!!;;==,,q=x", TEXT),
])
async def test_accept_negotiates_with_quality_values(accept, content_type):
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        headers = {"Accept-Encoding": "identity"}
        if accept is not None:
            headers["Accept"] = accept
        async with exporter.session.get(exporter.url + "/metrics", headers=headers) as response:
            assert response.status == 200
            assert response.headers["Content-Type"] == content_type
            body = await response.read()
        openmetrics = content_type.startswith("application/openmetrics-text")
        assert body.endswith(b"# EOF\n") == openmetrics
        assert (b"# TYPE podresources_api_requests counter" in body) == openmetrics


@pytest.mark.parametrize("accept_encoding, coding", [
    (None, "identity"),
    ("", "identity"),
    ("gzip", "gzip"),
    ("GZip", "gzip"),
    ("x-gzip", "gzip"),
    ("gzip;q=0", "identity"),
    ("gzip;q=0.5", "gzip"),
    ("identity;q=1, gzip;q=0.5", "identity"),
    ("gzip;q=0.5, identity;q=0.5", "gzip"),
    ("gzip;q=0, *", "identity"),
    ("*", "gzip"),
    ("br, deflate", "identity"),
    ("identity, *;q=0", "identity"),
    ("identity;q=0, gzip", "gzip"),
    ("*;q=0", 406),
    ("identity;q=0", 406),
    ("gzip;q=0, identity;q=0", 406),
    ("gzip;q=garbage", "identity"),
])
async def test_accept_encoding_negotiates_per_rfc_9110(accept_encoding, coding):
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        exporter.refresher.stop()
        headers = {} if accept_encoding is None else {"Accept-Encoding": accept_encoding}
        session = aiohttp.ClientSession(auto_decompress=False,
                                        skip_auto_headers=["Accept-Encoding"])
        async with session, session.get(exporter.url + "/metrics", headers=headers) as response:
            body = await response.read()
            if coding == 406:
                assert response.status == 406
                return
            assert response.status == 200
            if coding == "gzip":
                assert response.headers["Content-Encoding"] == "gzip"
                body = gzip.decompress(body)
            else:
                assert "Content-Encoding" not in response.headers
        assert body.startswith(b"# HELP ") and b"podresources_up 1" in body


async def test_metrics_answers_vary_on_both_negotiated_headers():
    """Caches between Prometheus and the exporter must key on what was negotiated."""
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        for headers in ({}, {"Accept": OPENMETRICS_ACCEPT, "Accept-Encoding": "gzip"},
                        {"Accept-Encoding": "*;q=0"}):
            response = await exporter.get("/metrics", headers=headers)
            assert response.headers["Vary"] == "Accept, Accept-Encoding", headers


async def test_large_bodies_stream_whole_and_head_sends_none():
    """The large profile's exposition is written in slices; every byte arrives."""
    async with Node("large") as node, Exporter(node.settings(interval=3600)) as exporter:
        await exporter.ready(timeout=60)
        exporter.refresher.stop()
        expected = exporter.refresher.body(False, False)
        assert len(expected) > 256 * 1024
        async with exporter.session.get(exporter.url + "/metrics",
                                        headers={"Accept-Encoding": "identity"}) as response:
            assert response.headers["Content-Length"] == str(len(expected))
            assert await response.read() == expected
        async with exporter.session.head(exporter.url + "/metrics",
                                         headers={"Accept-Encoding": "identity"}) as response:
            assert response.status == 200
            assert response.headers["Content-Length"] == str(len(expected))
            assert await response.read() == b""


async def test_malformed_requests_log_nothing_above_debug(caplog):
    """A peer's garbage is its own problem: no ERROR and no traceback in the exporter's log."""
    caplog.set_level(logging.DEBUG)
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        for raw in (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
                    b"GET /\x00 HTTP/1.1\r\n\r\n",
                    b"\x16\x03\x01\x00\x05hello",
                    b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                    b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20000 + b"\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n"):
            reader, writer = await asyncio.open_connection("127.0.0.1", exporter.port)
            writer.write(raw)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(200), 5)
            writer.close()
            assert re.match(rb"HTTP/1\.[01] 4\d\d ", answer), answer
        assert (await exporter.scrape()).value("podresources_up") == 1
    loud = [r for r in caplog.records
            if r.levelno >= logging.WARNING or (r.exc_info and r.levelno > logging.DEBUG)]
    assert loud == [], [r.getMessage() for r in loud]
    assert any(r.name == "aiohttp.server" and r.levelno == logging.DEBUG
               for r in caplog.records)


async def test_expect_header_gets_417_or_passes_never_500():
    """aiohttp's own Expect handling echoes the value and fails on bytes that are not UTF-8."""
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        answers = []
        for expect in (b"\xff\xfe", b"something", b"100-continue"):
            for path in (b"/metrics", b"/nowhere"):
                reader, writer = await asyncio.open_connection("127.0.0.1", exporter.port)
                writer.write(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nExpect: " + expect
                             + b"\r\nConnection: close\r\n\r\n")
                answers.append(await asyncio.wait_for(reader.read(), 5))
                writer.close()
        codes = [int(re.findall(rb"HTTP/1\.1 (\d{3}) ", answer)[-1]) for answer in answers]
        assert codes == [417, 417, 417, 417, 200, 404], answers
        assert all(b"\xff" not in answer for answer in answers)
