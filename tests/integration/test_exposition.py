"""The /metrics bodies: each variant finished once per change, at its first scrape (the health
section rendered then, in that format only), gzip from separately deflated sections, read whole
by Python's gzip, zlib, curl and a real Prometheus."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import zlib

import pytest
from aiohttp import web

from exporter.exposition.bodies import Exposition, Section
from exporter.web.server import make_app, start_http

from ..support.harness import (
    Exporter,
    Node,
    Scrape,
    small_profile,
)
from ..support.prometheus import LINES, Prometheus, scrape_job, tool

OPENMETRICS_ACCEPT = "application/openmetrics-text;version=1.0.0"
DATA = b"".join(b'podresources_container_cpus{namespace="ns",pod="p%d",container="c",'
                b'numa_node="%d"} %d\n' % (i, i % 8, i % 5) for i in range(5000))


def single_member(body: bytes) -> bytes:
    """Decompress ``body``, which must be exactly one gzip member (what curl and browsers
    read): zlib stops at the end of the first member and leaves the rest unused."""
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    text = decompressor.decompress(body) + decompressor.flush()
    assert decompressor.eof, "truncated gzip stream"
    assert decompressor.unused_data == b"", "more than one gzip member"
    return text


class Health:
    """A health section that says how often it was rendered, in which format."""

    def __init__(self, text: bytes) -> None:
        self.text = text
        self.rendered: list[bool] = []

    def __call__(self, openmetrics: bool) -> bytes:
        self.rendered.append(openmetrics)
        return self.text


def test_gzip_body_is_one_member_of_separately_deflated_sections():
    health = Health(b"up 1\n")
    exposition = Exposition(health)
    data = Section.of(DATA)
    exposition.update(data=data, view=Section.of(b"view 1\n"))
    for openmetrics, tail in ((False, b"view 1\nup 1\n"), (True, b"view 1\nup 1\n# EOF\n")):
        plain = bytes(exposition.body(openmetrics, False))
        assert plain == DATA + tail
        compressed = bytes(exposition.body(openmetrics, True))
        assert gzip.decompress(compressed) == plain
        assert single_member(compressed) == plain
        assert len(compressed) < len(plain) // 5
    assert health.rendered == [False, True]  # once per format, whatever the variants asked
    # the health section is due again: the data section's deflated bytes are reused as they are
    health.text = b"up 0\n"
    exposition.health_changed()
    body = exposition.body(False, True)
    assert any(part is data.deflated for part in body.parts)
    assert single_member(bytes(body)) == DATA + b"view 1\nup 0\n"
    assert body.length == len(bytes(body))
    assert health.rendered == [False, True, False]


def test_nothing_is_rendered_for_a_variant_nobody_asks_for():
    health = Health(b"up 1\n")
    exposition = Exposition(health)
    for step in range(3):  # refreshes nobody scrapes
        exposition.update(data=Section.of(b"a %d\n" % step))
        exposition.health_changed()
    assert health.rendered == []
    assert bytes(exposition.body(True, True)) == bytes(exposition.body(True, True))
    assert single_member(bytes(exposition.body(True, True))) == b"a 2\nup 1\n# EOF\n"
    assert health.rendered == [True]


def test_empty_sections_and_the_first_body():
    exposition = Exposition()
    assert bytes(exposition.body(True, False)) == b"# EOF\n"
    assert bytes(exposition.body(False, False)) == b""
    assert single_member(bytes(exposition.body(True, True))) == b"# EOF\n"
    assert single_member(bytes(exposition.body(False, True))) == b""
    exposition.update(data=Section.of(b"a 1\n"))
    assert single_member(bytes(exposition.body(False, True))) == b"a 1\n"


def test_body_slices_cover_every_byte_in_order():
    exposition = Exposition(Health(b"up 1\n"))
    exposition.update(data=Section.of(DATA))
    body = exposition.body(False, False)
    pieces = list(body.slices(64 * 1024))
    assert all(len(piece) <= 64 * 1024 for piece in pieces)
    assert b"".join(pieces) == DATA + b"up 1\n"


async def test_scrapes_read_the_body_finished_by_the_refresh():
    """After a refresh, each variant is finished at its first scrape; scraping it again builds
    nothing."""
    async with Node(small_profile()) as node, \
            Exporter(node.settings(), run_loop=False) as exporter:
        await exporter.refresher.refresh_once()
        bodies = {(om, gz): exporter.refresher.metrics_body(om, gz)
                  for om in (False, True) for gz in (False, True)}
        async with exporter.session.get(exporter.url + "/metrics", auto_decompress=False,
                                        headers={"Accept": OPENMETRICS_ACCEPT,
                                                 "Accept-Encoding": "gzip"}) as response:
            served = await response.read()
        assert served == bytes(bodies[True, True])
        for (om, gz), body in bodies.items():  # the very same objects: nothing rebuilt
            assert exporter.refresher.metrics_body(om, gz) is body
        text = single_member(served).decode()
        assert text.endswith("# EOF\n")
        scrape = Scrape(bytes(bodies[False, False]).decode())
        assert scrape.value("podresources_up") == 1
        # the fixture: two NUMA nodes of CPUs 0-3 and 4-7
        assert scrape.value("podresources_numa_node_cpus", numa_node="0") == 4
        assert scrape.value("podresources_numa_node_cpus", numa_node="1") == 4


async def test_curl_reads_the_whole_gzip_body():
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl not found")
    async with Node("dual-socket-gpu") as node, Exporter(node.settings()) as exporter:
        await exporter.ready()
        exporter.refresher.stop()
        await asyncio.sleep(0.5)
        expected = exporter.refresher.body(False, False)
        done = await asyncio.create_subprocess_exec(
            curl, "-sS", "--fail", "--compressed", exporter.url + "/metrics",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await done.communicate()
        assert done.returncode == 0, err
        assert out == expected
        assert b"podresources_up 1.0\n" in out  # the health section, after the data


@pytest.mark.external
@pytest.mark.parametrize("line", LINES)
async def test_prometheus_scrapes_the_gzip_body_whole(line):
    """A real Prometheus of each line asks for gzip; every series of the body, data section
    first and health section last, reaches its storage."""
    codings: list[str] = []

    @web.middleware
    async def record(request: web.Request, handler):  # type: ignore[no-untyped-def]
        response = await handler(request)
        if request.path == "/metrics":
            codings.append(response.headers.get("Content-Encoding", "identity"))
        return response

    async with Node("large") as node:
        exporter = Exporter(node.settings(interval=3600))
        server, port = await start_http(make_app(exporter.refresher, [record]), "127.0.0.1", 0)
        try:
            await exporter.refresher.refresh_once()
            expected = Scrape(exporter.refresher.body(False, False).decode())
            async with Prometheus(tool(line, "prometheus"), [
                    scrape_job("exporter", [(port, {})], honor_labels=True)]) as prometheus:
                scraped = await prometheus.wait_until(
                    lambda: prometheus.instant('scrape_samples_scraped{job="exporter"}'),
                    "a scrape", timeout=60)
                up = await prometheus.instant('up{job="exporter"}')
                first = await prometheus.instant("count(podresources_device_info)")
                last = await prometheus.instant("podresources_up")
        finally:
            await server.cleanup()
            await exporter.refresher.client.close()
    assert codings and set(codings) == {"gzip"}
    assert up[0]["value"][1] == "1"
    # OpenMetrics: a histogram's _created lines are off, so both formats hold the same samples
    assert int(scraped[0]["value"][1]) == len(expected.samples)
    assert int(first[0]["value"][1]) == len(expected.series("podresources_device_info"))
    assert last[0]["value"][1] == "1"  # the health section, the body's last segment


def test_health_section_is_what_prometheus_client_writes_in_both_formats():
    """The health section's counters and histograms are plain values with their own writer;
    it must stay byte-for-byte what prometheus_client writes for the same instruments fed the
    same events, as values change and new label sets appear, in both formats."""
    from prometheus_client import (
        CollectorRegistry,
        Counter,
        Histogram,
        ProcessCollector,
        disable_created_metrics,
        generate_latest,
    )
    from prometheus_client.openmetrics.exposition import generate_latest as generate_om

    from exporter import catalog
    from exporter.exposition.health import _CALL_BUCKETS, _REFRESH_BUCKETS, METHODS, Health
    from exporter.exposition.rendering import _Families
    from exporter.issues import IssueKind
    from exporter.kubelet.status import Capabilities, KubeletStatus

    health = Health("node-a")
    health.track_kube_api()
    status = KubeletStatus()
    disable_created_metrics()  # the exporter writes no _created samples
    # the reference: prometheus_client's own instruments, defined as the exporter's
    reference = CollectorRegistry(auto_describe=False)
    kube_registry = CollectorRegistry(auto_describe=False)

    def counter(metric, registry=reference):
        return Counter(metric.name, metric.help, metric.labels, registry=registry)

    def histogram(metric, buckets):
        return Histogram(metric.name, metric.help, metric.labels, buckets=buckets,
                         registry=reference)

    requests = counter(catalog.API_REQUESTS)
    call_duration = histogram(catalog.API_REQUEST_DURATION, _CALL_BUCKETS)
    refresh_duration = histogram(catalog.REFRESH_DURATION, _REFRESH_BUCKETS)
    issues = counter(catalog.DATA_ISSUES)
    kube_errors = counter(catalog.KUBE_API_ERRORS, kube_registry)
    for method in METHODS:
        requests.labels(method, "OK")
        call_duration.labels(method)
    for kind in IssueKind:
        issues.labels(kind)
    for resource in ("node", "pods", "resourceslices", "devicetaintrules"):
        kube_errors.labels(resource)
    # the fit answers' admission counter, written from its first count on (no empty family)
    admission_registry = CollectorRegistry(auto_describe=False)
    admissions = None

    def expected(openmetrics: bool) -> bytes:
        process = ProcessCollector(registry=None)  # the same names, help texts and order
        families = [*reference.collect(), *process.collect(), *kube_registry.collect(),
                    *admission_registry.collect(), *health._state_families(status)]
        if openmetrics:
            return generate_om(_Families(families))[:-len(b"# EOF\n")]
        return generate_latest(_Families(families))

    def steady(body: bytes) -> list[bytes]:  # process_* figures move between two collections
        return [line for line in body.splitlines() if not line.startswith(b"process_")]

    for step in range(4):
        text, openmetrics = health.render_both(status)
        assert steady(text) == steady(expected(False))
        assert steady(openmetrics) == steady(expected(True))
        assert b"# TYPE podresources_api_requests_total counter" in text
        assert b"# TYPE podresources_api_requests counter" in openmetrics
        code = "RESOURCE_EXHAUSTED" if step else "OK"
        seconds = (0.0005, 0.003, 0.25, 12.0)[step]  # the first bucket, middle ones, +Inf
        health.observe_call("List", code, seconds)
        requests.labels("List", code).inc()
        call_duration.labels("List").observe(seconds)
        health.refresh_duration.observe(seconds * 3)
        refresh_duration.observe(seconds * 3)
        health.count_issues({"unknown_cpu": step + 1})
        issues.labels("unknown_cpu").inc(step + 1)
        if step == 2:
            health.kube_api_errors.labels("pods").inc()
            kube_errors.labels("pods").inc()
            health.count_admission_failure("Topology Affinity", "cpu")
            admissions = admissions or counter(catalog.ADMISSION_FAILURES, admission_registry)
            admissions.labels("Topology Affinity", "cpu").inc()
        status.up, status.last_success, status.backoff_seconds = 1, 1_700_000_000.5, 0.25 * step
        status.capabilities = Capabilities("v1", "true", "false", "true" if step else "unknown")
    # steps 1 to 3 each counted one rate-limited call; 12 s is past the last bucket
    text, openmetrics = health.render_both(status)
    assert b'podresources_api_requests_total{code="RESOURCE_EXHAUSTED",method="List"} 3.0' \
        in text
    assert b'podresources_api_request_duration_seconds_bucket{le="+Inf",method="List"} 4.0' \
        in text
    assert b'podresources_api_request_duration_seconds_bucket{le="10.0",method="List"} 3.0' \
        in openmetrics
    assert b'podresources_kube_api_errors_total{resource="pods"} 1.0' in openmetrics
    assert b'podresources_kubelet_api_info{api_version="v1",get="false",get_allocatable="true"' \
        b',pod_level="true"} 1.0' in openmetrics


def test_health_section_leaves_out_the_kube_api_errors_without_the_view():
    from exporter.exposition.health import Health
    from exporter.kubelet.status import KubeletStatus

    health = Health("node-a")
    health.kube_api_errors.labels("pods").inc()  # the view is not tracked: not written
    text, openmetrics = health.render_both(KubeletStatus())
    assert b"podresources_kube_api" not in text
    assert b"podresources_kube_api" not in openmetrics
    assert b"podresources_refresh_duration_seconds_count 0.0" in text
