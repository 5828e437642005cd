"""The test tree, and which tests to run for a change.

    tests/unit/         pure and fast, no process, socket or server: the inner loop
    tests/integration/  the real simulator and exporter over a real unix socket, HTTP, TLS
    tests/spec/         the SPEC's rules, black box: simulated kubelet in, /metrics out
    tests/deploy/       the artifacts: Helm chart, Dockerfile, dashboards, rules, Prometheus
    tests/support/      what the tests share (harness, pki, spec, chart, docs, kubeconfig, the
                        Kubernetes-API view's cluster, the web config, the real kubelet's driver,
                        the differential fit runner, kubeobjects: Kubernetes objects by hand,
                        fakeapiserver/: the fake Kubernetes API server for what the real one
                        cannot stage, and controlplane*: the real one's driver, the chart, the
                        view's objects, the kubelet's objects and the Operator's translation
                        on it);
                        test modules never import each other
    tests/realkubelet/  the real kubelet as a Go test component (built by run.sh)
    tests/controlplane/ the real kube-apiserver on an embedded etcd, a Go test component (built
                        by run.sh; the session fixture ``control_plane``)

Each test is marked with its directory's name (``pytest -m unit``, ``-m "not deploy"``).

Changing ...                              run (besides ``pytest tests/unit``)
  exporter/accounting/, model.py           tests/spec
  exporter/kubelet/ (client, decode,       tests/integration/test_faults.py test_hostile_replies.py
                    convert, limits)
  exporter/kubelet/reader.py               tests/integration/test_faults.py
  exporter/refresh/                        tests/integration/test_faults.py test_watch.py
                                           test_refresh_worker.py test_integration.py
                                           test_real_kubelet_restart.py
  exporter/exposition/, catalog.py         tests/integration/test_exposition.py test_http.py
                                           tests/deploy/test_metrics_contract.py, docs/metrics.md
  exporter/fit/, podspec.py                tests/unit/fit/ (the layers: pytest tests/unit/fit)
                                           tests/spec/test_spec_fit.py
                                           tests/integration/test_fit_explain.py
                                           test_rejections.py test_differential_fit.py
  tests/realkubelet/ (the real kubelet)    tests/integration/test_real_kubelet_*.py
                                           test_differential_fit.py
                                           test_differential_sequences.py
  exporter/web/                            tests/integration/test_http.py test_http_fuzz.py
                                           test_listener.py test_webconfig*.py
                                           test_basicauth.py
  exporter/kubeapi/                        tests/integration/test_kubeapi*.py test_podsapi.py
                                           test_controlplane_*.py test_dra_view.py
  tests/controlplane/ (the real API server) tests/integration/test_controlplane_*.py
                                           test_kubeapi*.py test_dra_view.py
                                           test_fit_explain.py test_differential_fit.py
                                           tests/spec/test_spec_dra.py
                                           tests/deploy/test_chart_install.py
                                           test_chart_pod_security.py test_chart_discovery.py
  exporter/podsapi/, protos/               tests/integration/test_podsapi.py test_demo_api.py
  exporter/simulator/                      tests/unit/simulator/
                                           tests/integration/test_simulator.py test_rejections.py
                                           test_simulator_admission.py test_podsapi.py tests/spec
  tests/support/fakeapiserver/             tests/unit/test_fakeapiserver_cluster.py
                                           tests/integration/test_kubeapi.py
                                           test_kubeapi_watch.py
  exporter/commands/, cli.py               tests/integration/test_cli.py test_tour.py
  exporter/nodemap/                        tests/integration/test_numa_page.py
                                           test_numa_browser.py
  charts/, Dockerfile, dashboards/, mixin/ tests/deploy
  tests/tools/prometheus3/ (the 3.x pins)  bash tests/tools/prometheus3.sh, tests/deploy,
                                           tests/integration/test_exposition.py (both lines:
                                           tests/support/prometheus.py)
  anything, before a commit                bash tests/run.sh (ruff, mypy, every test)
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from .support.fakeapiserver.server import FakeApiServer
from .support.pki import CA, server_pki

LAYERS = ("unit", "integration", "spec", "deploy")
pytest_plugins = ["tests.support.timing"]  # the time per tier, at the end of a run
_ROOT = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the directory it is in, and ``external`` where it needs the real
    control plane (the fixture ``control_plane``, directly or through ``api``)."""
    for item in items:
        parts = Path(item.fspath).relative_to(_ROOT).parts
        if parts and parts[0] in LAYERS:
            item.add_marker(parts[0])
        if "control_plane" in getattr(item, "fixturenames", ()):
            item.add_marker("external")


@pytest.fixture
def api(control_plane, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The real API server (the session's control plane) for the Kubernetes-API view, with
    ``$KUBECONFIG`` naming the exporter's own identity there (a client certificate bound to the
    view's rules); ``api.requests`` are the exporter's. What the test put there is deleted
    after it."""
    from .support.controlplane_api import EXPORTER_USER, RealApi

    real = RealApi(control_plane, user=EXPORTER_USER)
    monkeypatch.setenv("KUBECONFIG", str(real.write_kubeconfig(tmp_path / "kubeconfig")))
    real.mark = control_plane.audit_mark()
    yield real
    real.clear()


@pytest.fixture
async def fake_api(tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeApiServer]:
    """The fake API server, empty, with ``$KUBECONFIG`` pointing at it: only for what the real
    one cannot be made to do here (tests/support/fakeapiserver/__init__.py says what)."""
    server = FakeApiServer()
    await server.start()
    monkeypatch.setenv("KUBECONFIG", str(server.write_kubeconfig(tmp_path / "kubeconfig")))
    yield server
    await server.stop()


@pytest.fixture
def pki(tmp_path: Path) -> tuple[CA, Path, Path]:
    """A CA and a server certificate for localhost (a file may ask for other ones)."""
    return server_pki(tmp_path)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The real control plane (tests/controlplane: kube-apiserver on an embedded etcd), one for
    the session; skips locally (fails under CI=true) when it is not built."""
    from .support.controlplane import ControlPlane

    plane = ControlPlane.start(tmp_path_factory.mktemp("controlplane"))
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    line = (f"control plane: kube-apiserver {plane.version} on an embedded etcd, "
            f"ready {plane.start_seconds:.1f} s after start")
    if reporter is not None:
        reporter.write_line(line)
    yield plane
    plane.close()


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """A test that runs the CLI in-process installs its log handler on the stderr pytest
    captured for that test; later tests would log to a closed stream ("Logging error"). A
    level a test sets on the product's logger would hide later tests' records."""
    root, product = logging.getLogger(), logging.getLogger("exporter")
    before, level, product_level = set(root.handlers), root.level, product.level
    yield
    product.setLevel(product_level)
    for handler in list(root.handlers):
        # pytest's own capture handlers come and go with each phase: pytest removes them
        if handler not in before and type(handler).__module__ != "_pytest.logging":
            root.removeHandler(handler)
    root.setLevel(level)
