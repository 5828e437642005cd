"""The Kubernetes-API view switched off (none of its series, the kubernetes package never
imported) and set up wrong (one line and exit 2: no node name, no API configuration, an exec
plugin without the kube extra); on with a plain kubeconfig, it never imports kubernetes either.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from exporter.cli import main, parse_args
from exporter.simulator import load_profile, write_sysfs

from ..support.harness import REPO
from ..support.kubeapi import NODE
from ..support.kubeconfig import kubeconfig, without_kubernetes
from ..support.kubeobjects import node

VIEW_FAMILIES = {"podresources_extended_resource_capacity",
                 "podresources_extended_resource_allocatable",
                 "podresources_extended_resource_requested",
                 "podresources_extended_resource_stale", "podresources_dra_devices_allocatable",
                 "podresources_kube_api_up", "podresources_kube_api_errors"}


VIEW_OFF = """
import asyncio, sys
from tests.support.harness import Exporter, Node, small_profile

async def main():
    async with Node(small_profile()) as node, Exporter(node.settings()) as exporter:
        scrape = await exporter.ready()
    print(sorted(scrape.families))
    print("kubernetes" in sys.modules)

asyncio.run(main())
"""


def test_view_off_exports_none_of_it_and_never_imports_kubernetes():
    result = subprocess.run([sys.executable, "-c", VIEW_OFF], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    families, imported = result.stdout.splitlines()
    assert "podresources_up" in families
    assert not any(name in families for name in VIEW_FAMILIES)
    assert imported == "False"


def test_the_flag_and_its_environment_twin():
    assert parse_args([], environ={}).kube_api is False
    assert parse_args(["--kube-api"], environ={}).kube_api is True
    assert parse_args([], environ={"PODRESOURCES_EXPORTER_KUBE_API": "true"}).kube_api is True


@pytest.fixture
def sysfs(tmp_path) -> str:
    return str(write_sysfs(load_profile("small"), tmp_path / "sys"))


def _exit_line(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_the_view_needs_a_node_name(capsys, monkeypatch, sysfs):
    monkeypatch.delenv("NODE_NAME", raising=False)
    err = _exit_line(["--kube-api", "--sysfs-root", sysfs, "--listen-address", ":0"], capsys)
    assert "--kube-api needs the node name: set --node-name or NODE_NAME" in err


def test_the_view_needs_an_api_configuration(capsys, monkeypatch, sysfs):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    err = _exit_line(["--kube-api", "--node-name", NODE, "--sysfs-root", sysfs,
                      "--listen-address", ":0"], capsys)
    assert "--kube-api: no Kubernetes API configuration" in err


def test_an_exec_plugin_kubeconfig_without_the_kube_extra(capsys, monkeypatch, sysfs, tmp_path):
    without_kubernetes(monkeypatch)
    path = kubeconfig(tmp_path / "kubeconfig", {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
        "args": ["eks", "get-token", "--cluster-name", "prod"]}})
    monkeypatch.setenv("KUBECONFIG", str(path))
    err = _exit_line(["--kube-api", "--node-name", NODE, "--sysfs-root", sysfs,
                      "--listen-address", ":0"], capsys)
    assert err.startswith(f"podresources-exporter: error: --kube-api: kubeconfig {path}: user "
                          "'u' gets its credentials from an exec credential plugin "
                          "(aws), which needs the kubernetes package (")
    assert err.endswith("); install podresources-exporter[kube]\n")


VIEW_ON = """
import asyncio, sys
from tests.support.harness import Exporter, Node, small_profile

async def main():
    async with Node(small_profile()) as kubelet, \\
            Exporter(kubelet.settings(kube_api=True)) as exporter:
        await exporter.wait_for(lambda s: s.get("podresources_extended_resource_capacity",
                                                resource="example.com/dongle") == 4)
    print(sorted({m.split(".")[0] for m in sys.modules} & {"kubernetes", "urllib3", "requests"}))

asyncio.run(main())
"""


def test_the_view_on_a_plain_kubeconfig_never_imports_kubernetes(api):
    api.put("nodes", node(NODE, {"example.com/dongle": "4"}))
    # $KUBECONFIG (the fixture's): the real API server, a client certificate
    result = subprocess.run([sys.executable, "-c", VIEW_ON], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
