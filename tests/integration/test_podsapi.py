"""Pod context from the kubelet's local Pods API: the exporter against the simulator's Pods API
on a real unix socket (``exporter/simulator/podsapi/``, served as v1.37's
``pkg/kubelet/apis/pods`` serves it), alone and beside the Kubernetes-API view.

The simulated node (``small_profile``): NUMA nodes 0 (CPUs 0-3, CPU 0 reserved) and 1 (CPUs
4-7), two GPUs on NUMA node 0, one held by ml/trainer with one CPU of node 0. A Guaranteed pod
asking for 5 CPUs fits on no single NUMA node (2 and 4 free): the kubelet rejects it with
TopologyAffinityError under single-numa-node, and the blocking resource is cpu.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os

import pytest

from exporter.cli import main
from exporter.fit.explain import fit_json
from exporter.podsapi import sources as pod_sources
from exporter.simulator.profile import parse_pod

from ..support.controlplane_api import RealApi
from ..support.harness import Exporter, Node, Scrape, small_profile
from ..support.kubeobjects import container, node, pod

NODE = "test-node"
WIDE = {"namespace": "demo", "name": "wide",
        "containers": [{"name": "c", "cpus": 5, "memory": "1Gi"}]}


@pytest.fixture(autouse=True)
def root_logging():
    """``main()`` points the root logger at the running test's stderr: start each test without
    what an earlier one left (a closed stream), and put the root logger back afterwards."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers[:] = []
    yield
    root.handlers[:], root.level = saved[0], saved[1]


def podsapi_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("exporter.podsapi")]


def kubelet_profile() -> dict:
    return small_profile(
        devices=[{"resource": "nvidia.com/gpu", "count": 2, "numa": [0]}],
        pods=[{"namespace": "ml", "name": "trainer",
               "containers": [{"name": "c", "cpus": 1, "devices": {"nvidia.com/gpu": 1}}]}])


def source(scrape: Scrape) -> dict[str, str]:
    (labels,) = scrape.series("podresources_pods_source_info")
    return dict(labels)


def reject_wide(kubelet: Node) -> None:
    result = kubelet.simulator.state.admit(parse_pod(WIDE))
    assert result.reason == "TopologyAffinityError"


def snapshot(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["snapshot", *args])
    out, err = capsys.readouterr()
    return code, out, err


# ---- the Pods API alone --------------------------------------------------------------------

async def test_a_rejection_is_counted_with_only_the_kubelets_sockets(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="exporter.podsapi")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    async with Node(kubelet_profile(), pods_api=True) as kubelet, \
            Exporter(kubelet.settings()) as exporter:
        s = await exporter.wait_for(lambda s: source(s)["pods_api"] == "watching",
                                    what="the Pods API watched")
        assert source(s) == {"source": "pods_api", "pods_api": "watching"}
        assert not s.series("podresources_kube_api_up")  # no view, no API server
        reject_wide(kubelet)
        s = await exporter.wait_for(
            lambda s: s.series("podresources_admission_failure_info"), what="the rejection")
        assert s.by("podresources_admission_failure_info", "namespace", "pod", "reason",
                    "blocking_resource") == {("demo", "wide", "TopologyAffinityError", "cpu"): 1}
        assert s.value("podresources_admission_failures_total",
                       reason="TopologyAffinityError", blocking_resource="cpu") == 1
        records = exporter.refresher.pod_sources.records()
        assert set(records) == {("ml", "trainer"), ("demo", "wide")}
        assert records[("demo", "wide")].terminated
        assert not records[("ml", "trainer")].terminated
    messages = podsapi_lines(caplog)
    assert sum("watching the kubelet's 1 pods" in m for m in messages) == 1


async def test_snapshot_why_explains_from_the_pods_api(monkeypatch, capsys):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    async with Node(kubelet_profile(), pods_api=True) as kubelet:
        reject_wide(kubelet)
        common = ["--socket", str(kubelet.socket), "--sysfs-root", str(kubelet.sysfs),
                  "--pods-api-socket", str(kubelet.pods_api_socket)]
        code, out, err = await asyncio.to_thread(snapshot, *common, "--why", "demo/wide",
                                                 capsys=capsys)
        assert code == 0, err
        assert out.startswith("Pod demo/wide (Guaranteed): rejected at admission: "
                              "TopologyAffinityError (Pod was rejected: "), out
        assert "Container c: cpu=5, memory=1Gi -> not placed" in out
        code, out, err = await asyncio.to_thread(snapshot, *common, "--why", "demo/elsewhere",
                                                 capsys=capsys)
        assert code == 1 and out == ""
        assert err == (f"podresources-exporter: pod demo/elsewhere is not on this node (the "
                       f"kubelet's Pods API at {kubelet.pods_api_socket} does not have it)\n")
        # json: the same question, the same verdict
        code, out, err = await asyncio.to_thread(
            snapshot, *common, "--why", "demo/wide", "--format", "json", capsys=capsys)
        document = json.loads(out)
        assert (document["pod"], document["status"].split(" (")[0]) == (
            "demo/wide", "rejected at admission: TopologyAffinityError")


async def test_snapshot_says_when_the_pods_api_cannot_be_read(capsys):
    async with Node(kubelet_profile(), pods_api=True) as kubelet:
        kubelet.simulator.faults.pods_api_initializing = True
        code, out, err = await asyncio.to_thread(
            snapshot, "--socket", str(kubelet.socket), "--sysfs-root", str(kubelet.sysfs),
            "--pods-api-socket", str(kubelet.pods_api_socket), "--shape", "cpu=2", capsys=capsys)
        assert code == 0
        assert err == (f"podresources-exporter: warning: cannot read the kubelet's Pods API at "
                       f"{kubelet.pods_api_socket} (the kubelet is initializing: Kubelet is "
                       "initializing); pod context from nowhere\n")
        assert out.startswith("Shape request (Guaranteed)")


async def test_snapshot_shape_answers_as_the_running_exporter(capsys):
    shapes = {"two": "cpu=2,memory=1Gi", "gpu": "cpu=1,nvidia.com/gpu=1", "wide": "cpu=5"}
    async with Node(kubelet_profile(), pods_api=True) as kubelet:
        reject_wide(kubelet)
        shapes_file = kubelet.dir / "shapes.yaml"
        shapes_file.write_text("shapes:\n" + "".join(
            f"  {name}: {{{spec.replace('=', ': ')}}}\n" for name, spec in shapes.items()))
        async with Exporter(kubelet.settings(fit_shapes=str(shapes_file))) as exporter:
            s = await exporter.wait_for(
                lambda s: s.series("podresources_admission_failure_info")
                and s.series("podresources_shape_admitted"), what="answers and the rejection")
            fit = exporter.refresher.fit
            assert fit is not None and fit.state is not None and fit.config is not None
            served = {a.shape.name: fit_json(a, fit.state, fit.config) for a in fit.answers}
        for name in shapes:
            code, out, err = await asyncio.to_thread(
                snapshot, "--socket", str(kubelet.socket), "--sysfs-root", str(kubelet.sysfs),
                "--pods-api-socket", str(kubelet.pods_api_socket), "--fit-shapes",
                str(shapes_file), "--shape", name, "--format", "json", capsys=capsys)
            assert code == 0, err
            # every container's request, placement and NUMA nodes, the verdict and capacity
            assert json.loads(out) == json.loads(json.dumps(served[name])), name
    # by hand: 2 CPUs fit (2 and 4 free); one GPU free on NUMA node 0 beside 1 CPU; 5 do not
    assert s.by("podresources_shape_admitted", "shape") == {"two": 1, "gpu": 1, "wide": 0}
    assert served["gpu"]["containers"][0]["numa_nodes_used"] == [0]


async def test_the_watch_follows_the_kubelets_pods():
    async with Node(kubelet_profile(), pods_api=True) as kubelet, \
            Exporter(kubelet.settings()) as exporter:
        await exporter.wait_for(lambda s: source(s)["pods_api"] == "watching",
                                what="the Pods API watched")
        context = exporter.refresher.pod_sources
        assert context.pods_api is not None
        state = kubelet.simulator.state
        state.admit(parse_pod({"namespace": "ml", "name": "probe",
                               "containers": [{"name": "c", "cpus": 1}]}))
        await exporter.wait_for(lambda s: ("ml", "probe") in context.records(),
                                what="ADDED")
        assert state.remove("ml", "trainer")
        state.version += 1
        # DELETED: the pod finished; it stays, holding nothing, until the next watch lists
        await exporter.wait_for(lambda s: context.records()[("ml", "trainer")].terminated,
                                what="DELETED")
        assert context.records()[("ml", "trainer")].requests == ()
        assert kubelet.simulator.pods_api is not None
        assert kubelet.simulator.pods_api.drop_watchers() == 1
        await exporter.wait_for(lambda s: ("ml", "trainer") not in context.records(),
                                what="the next watch's list")
        s = await exporter.scrape()
        assert source(s) == {"source": "pods_api", "pods_api": "watching"}
        assert kubelet.simulator.stats.count("/v1alpha1.Pods/WatchPods",
                                             "RESOURCE_EXHAUSTED") == 1
        assert kubelet.simulator.stats.count("/v1alpha1.Pods/ListPods") == 0


async def test_a_pod_that_cannot_be_decoded_is_skipped_once(caplog):
    caplog.set_level(logging.WARNING, logger="exporter.podsapi")
    async with Node(kubelet_profile(), pods_api=True) as kubelet, \
            Exporter(kubelet.settings()) as exporter:
        kubelet.simulator.faults.garbage = "bytes"
        await exporter.wait_for(lambda s: source(s)["pods_api"] == "watching",
                                what="the Pods API watched")
        assert kubelet.simulator.pods_api is not None
        kubelet.simulator.pods_api.drop_watchers()
        await asyncio.sleep(1.5)  # watched again, the garbage listed again
        kubelet.simulator.pods_api.drop_watchers()
        await asyncio.sleep(1.5)
        assert set(exporter.refresher.pod_sources.records()) == {("ml", "trainer")}
    warnings = [r.getMessage() for r in caplog.records if r.name == "exporter.podsapi.source"
                and r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith(
        "Pods API: skipping a pod that cannot be decoded (not a v1.Pod: ")


# ---- beside the Kubernetes-API view ----------------------------------------------------------

def cluster(server: RealApi) -> None:
    """The node with a patched dongle resource and its GPUs, and in the API a pod using
    dongles that the kubelet's Pods API does not have (its pods win)."""
    server.put("nodes", node(NODE, {"example.com/dongle": "4", "nvidia.com/gpu": "2"}))
    server.put("pods", pod("ml", "dongler", NODE, [container("c", {"example.com/dongle": "3"})]))


async def test_with_the_view_pods_come_from_the_kubelet_and_not_the_api_server(api):
    cluster(api)
    async with Node(kubelet_profile(), pods_api=True) as kubelet, \
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        s = await exporter.wait_for(
            lambda s: s.by("podresources_kube_api_up", "resource") == {
                "node": 1, "resourceslices": 1, "devicetaintrules": 1}
            and source(s)["pods_api"] == "watching"
            and s.series("podresources_extended_resource_requested"), what="both synced")
        assert source(s) == {"source": "pods_api", "pods_api": "watching"}
        # the kubelet's trainer holds a GPU; the API's dongler is not the kubelet's pod
        assert s.by("podresources_extended_resource_requested", "resource") == {
            "example.com/dongle": 0, "nvidia.com/gpu": 1}
        assert not [path for path, _ in api.requests if path == "/api/v1/pods"]
        assert api.watches("pods") == []


async def test_the_view_takes_over_while_the_pods_api_fails_and_gives_back(api, caplog):
    caplog.set_level(logging.INFO, logger="exporter.podsapi.sources")
    cluster(api)
    async with Node(kubelet_profile(), pods_api=True) as kubelet:
        kubelet.simulator.faults.pods_api_initializing = True
        exporter = Exporter(kubelet.settings(kube_api=True))
        assert exporter.refresher.pod_sources is not None
        exporter.refresher.pod_sources.fallback_seconds = 1.0
        async with exporter:
            s = await exporter.wait_for(lambda s: source(s)["source"] == "kube_api"
                                        and s.get("podresources_kube_api_up",
                                                  resource="pods") == 1,
                                        what="the view to take the pods over")
            assert source(s) == {"source": "kube_api", "pods_api": "failing"}
            assert s.by("podresources_extended_resource_requested", "resource") == {
                "example.com/dongle": 3, "nvidia.com/gpu": 0}
            kubelet.simulator.faults.pods_api_initializing = False
            s = await exporter.wait_for(lambda s: source(s)["source"] == "pods_api"
                                        and s.series("podresources_extended_resource_requested",
                                                     resource="nvidia.com/gpu") == {
                                            (("resource", "nvidia.com/gpu"),): 1},
                                        timeout=15, what="the Pods API back")
            assert "pods" not in s.by("podresources_kube_api_up", "resource")
            asked = sum(path == "/api/v1/pods" for path, _ in api.requests)
            await asyncio.sleep(1.5)  # no more lists or watches of pods
            assert sum(path == "/api/v1/pods" for path, _ in api.requests) == asked
    messages = [r.getMessage() for r in caplog.records if r.name == "exporter.podsapi.sources"]
    assert messages == [
        f"pod context: from the kubelet's Pods API at {kubelet.pods_api_socket}",
        "pod context: from the Kubernetes API (--kube-api) (the Pods API has not answered for "
        "1 s: the kubelet is initializing: Kubelet is initializing)",
        f"pod context: from the kubelet's Pods API at {kubelet.pods_api_socket}"]


# ---- the socket coming and going -------------------------------------------------------------

async def test_no_socket_then_a_socket(caplog):
    caplog.set_level(logging.INFO, logger="exporter.podsapi")
    from exporter.simulator.podsapi.server import PodsApiServer

    async with Node(kubelet_profile()) as kubelet:
        exporter = Exporter(kubelet.settings())
        assert exporter.refresher.pod_sources is not None
        exporter.refresher.pod_sources.fallback_seconds = 1.0
        async with exporter:
            s = await exporter.ready()
            assert source(s) == {"source": "none", "pods_api": "absent"}
            await asyncio.sleep(1)  # several looks at --interval 0.2: one line said it
            server = PodsApiServer(kubelet.simulator.state, kubelet.pods_api_socket,
                                   kubelet.simulator.faults, kubelet.simulator.stats)
            await server.start()
            try:
                s = await exporter.wait_for(lambda s: source(s)["pods_api"] == "watching",
                                            what="the socket found")
                assert source(s) == {"source": "pods_api", "pods_api": "watching"}
            finally:
                await server.stop()
            # gone after it worked: a restarting kubelet makes a new one, so the last pods
            # stay until the fallback delay is over
            s = await exporter.wait_for(lambda s: source(s)["pods_api"] == "absent",
                                        what="the socket gone")
            assert source(s)["source"] == "pods_api"
            await exporter.wait_for(lambda s: source(s)["source"] == "none",
                                    what="the fallback delay over")
    messages = podsapi_lines(caplog)
    socket = str(kubelet.pods_api_socket)
    assert [m.split(" at ")[0].split(" (")[0] for m in messages] == [
        "Pods API: no socket",
        f"Pods API: socket {socket} appeared; watching it",
        "pod context: from the kubelet's Pods API",
        "Pods API: watching the kubelet's 1 pods",
        f"Pods API: the socket {socket} is gone; looking for it every 0.2 s, keeping the last "
        "pods",
        "pod context: none"]


async def test_a_kubelet_restart_keeps_the_last_pods_and_logs_twice(caplog):
    caplog.set_level(logging.INFO, logger="exporter.podsapi")
    async with Node(kubelet_profile(), pods_api=True) as kubelet, \
            Exporter(kubelet.settings()) as exporter:
        await exporter.wait_for(lambda s: source(s)["pods_api"] == "watching",
                                what="the Pods API watched")
        reject_wide(kubelet)
        await exporter.wait_for(lambda s: s.series("podresources_admission_failure_info"),
                                what="the rejection")
        restart = asyncio.create_task(kubelet.simulator.restart(downtime=2.0))
        s = await exporter.wait_for(lambda s: source(s)["pods_api"] in ("failing", "absent"),
                                    what="the watch to fail")
        # the last pods stay, and with them the explained rejection
        assert s.series("podresources_admission_failure_info")
        assert source(s)["source"] == "pods_api"
        await restart
        s = await exporter.wait_for(lambda s: source(s)["pods_api"] == "watching", timeout=15,
                                    what="watching again")
        assert s.value("podresources_admission_failures_total",
                       reason="TopologyAffinityError", blocking_resource="cpu") == 1
    messages = podsapi_lines(caplog)
    # watching; then one line for the restart (the watch failing first, or the socket going
    # first) and one when it is back; the pod context never changed
    assert len(messages) == 4, messages
    assert messages[2].startswith(("Pods API: cannot read", "Pods API: the socket"))
    assert messages[3] == "Pods API: watching again (2 pods)"


async def test_an_initializing_kubelet_is_retried_with_back_off(caplog):
    caplog.set_level(logging.INFO, logger="exporter.podsapi")
    async with Node(kubelet_profile(), pods_api=True) as kubelet:
        kubelet.simulator.faults.pods_api_initializing = True
        async with Exporter(kubelet.settings()) as exporter:
            await asyncio.sleep(4)
            s = await exporter.scrape()
            assert source(s) == {"source": "pods_api", "pods_api": "starting"} or \
                source(s) == {"source": "pods_api", "pods_api": "failing"}
            attempts = kubelet.simulator.stats.count("/v1alpha1.Pods/WatchPods",
                                                     "FAILED_PRECONDITION")
            # back-off of 1 s at least, growing: at most 4 attempts in 4 s
            assert 1 <= attempts <= 4
            kubelet.simulator.faults.pods_api_initializing = False
            await exporter.wait_for(lambda s: source(s)["pods_api"] == "watching",
                                    timeout=20, what="watching")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING
                and r.name.startswith("exporter.podsapi")]
    assert warnings == [f"Pods API: cannot read {kubelet.pods_api_socket} (the kubelet is "
                        "initializing: Kubelet is initializing); retrying with back-off"]


def test_the_flags_and_their_environment_twins(monkeypatch):
    from exporter.cli import parse_args, settings_from

    defaults = settings_from(parse_args([]))
    assert (defaults.pods_api, defaults.pods_api_socket) == (
        True, "/var/lib/kubelet/pods-api/pods-api.sock")
    given = settings_from(parse_args(["--pods-api-socket", "unix:///run/p.sock",
                                      "--no-pods-api"]))
    assert (given.pods_api, given.pods_api_socket) == (False, "unix:///run/p.sock")
    monkeypatch.setenv("PODRESOURCES_EXPORTER_NO_PODS_API", "true")
    monkeypatch.setenv("PODRESOURCES_EXPORTER_PODS_API_SOCKET", "/run/q.sock")
    twins = settings_from(parse_args(["snapshot"], environ=os.environ))
    assert (twins.pods_api, twins.pods_api_socket) == (False, "/run/q.sock")
    assert pod_sources.FALLBACK_SECONDS == 60.0


def test_a_bad_socket_value_exits_2(capsys):
    assert main(["--pods-api-socket", "relative/p.sock"]) == 2
    assert capsys.readouterr().err == (
        "podresources-exporter: error: argument --pods-api-socket: socket must be an absolute "
        "path or unix:// URL, got 'relative/p.sock'\n")


def test_without_a_socket_neither_the_stubs_nor_the_pod_schema_are_imported(tmp_path):
    """The Pods API costs memory only where the kubelet serves it (docs/pods-api.md)."""
    import subprocess
    import sys

    from exporter.simulator import load_profile, write_sysfs

    sysfs = write_sysfs(load_profile("small"), tmp_path / "sys")
    probe = (
        "import sys\n"
        "from exporter.commands.serve import build_refresher\n"
        "from exporter.refresh.settings import Settings\n"
        f"build_refresher(Settings(socket='/nonexistent/k.sock', sysfs_root={str(sysfs)!r}, "
        f"pods_api_socket={str(tmp_path / 'pods-api.sock')!r}))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('exporter._proto.k8s', "
        "'exporter._proto.pods', 'exporter.podsapi.client', 'exporter.podsapi.decode'))))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out == "[]\n"


async def test_snapshot_with_the_view_lists_each_resource_once_and_watches_nothing(api, capsys):
    cluster(api)
    async with Node(kubelet_profile()) as kubelet:  # no Pods API: the view lists the pods
        code, out, err = await asyncio.to_thread(
            snapshot, "--socket", str(kubelet.socket), "--sysfs-root", str(kubelet.sysfs),
            "--pods-api-socket", str(kubelet.pods_api_socket), "--kube-api", "--node-name",
            NODE, "--shape", "cpu=1", "--format", "json", capsys=capsys)
    assert (code, err) == (0, "")
    assert json.loads(out)["admitted"] is True
    listed = sorted(path for path, query in api.requests if "watch" not in query)
    assert listed == ["/api/v1/nodes", "/api/v1/pods",
                      "/apis/resource.k8s.io/v1/devicetaintrules",
                      "/apis/resource.k8s.io/v1/resourceslices"]
    assert not [path for path, query in api.requests if "watch" in query]


async def test_the_fit_answers_rest_on_the_pods_api_and_say_so(tmp_path):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("shapes:\n  two: {cpu: 2, memory: 1Gi}\n")
    async with Node(kubelet_profile(), pods_api=True) as kubelet:
        async with Exporter(kubelet.settings(fit_shapes=str(shapes))) as exporter:
            s = await exporter.wait_for(
                lambda s: source(s)["pods_api"] == "watching"
                and s.series("podresources_shape_assumption_info"), what="the answers")
            # pod context from the kubelet: no "no_pod_context"; no Node object without the
            # view, so the predicate's allocatable is derived; no --watch-path, so no state
            # files, but no pod has an init container: nothing they would add (no
            # no_cpu_manager_state, no no_memory_manager_state)
            assert set(s.by("podresources_shape_assumption_info", "assumption",
                            shape="two")) == {"node_allocatable_derived"}
        async with Exporter(kubelet.settings(fit_shapes=str(shapes),
                                             pods_api=False)) as exporter:
            s = await exporter.wait_for(lambda s: s.series("podresources_shape_assumption_info"),
                                        what="the answers")
            assert "no_pod_context" in s.by("podresources_shape_assumption_info", "assumption",
                                            shape="two")
