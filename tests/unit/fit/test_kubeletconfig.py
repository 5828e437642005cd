"""The kubelet configuration in use: flags, then the file, then the assumptions (SPEC 7.1)."""

from __future__ import annotations

import pytest

from exporter.fit.kubeletconfig import (
    FileConfig,
    FlagConfig,
    KubeletConfigError,
    parse_kubelet_config,
    resolve,
)


def test_assumed_without_file_or_flags():
    config = resolve(FlagConfig(), None, lists_cpus=True, lists_memory=False, numa_nodes=2)
    assert config.labels() == ("single-numa-node", "container", "static", "None", "assumed")


def test_assumed_policy_is_none_beyond_eight_numa_nodes():
    config = resolve(FlagConfig(), None, True, True, numa_nodes=16)
    assert config.topology_manager_policy == "none"


def test_file_then_flags():
    file = parse_kubelet_config({
        "kind": "KubeletConfiguration", "topologyManagerPolicy": "restricted",
        "topologyManagerScope": "pod", "cpuManagerPolicy": "static",
        "memoryManagerPolicy": "Static",
        "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
        "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
        "featureGates": {"PodLevelResourceManagers": True}})
    config = resolve(FlagConfig(), file, False, False, 2)
    assert config.labels() == ("restricted", "pod", "static", "Static", "file")
    assert config.full_pcpus_only and config.prefer_closest_numa_nodes
    assert config.rules().managers.pod_level_resource_managers
    mixed = resolve(FlagConfig("best-effort"), file, False, False, 2)
    assert mixed.labels() == ("best-effort", "pod", "static", "Static", "flags+file")
    flags_only = resolve(FlagConfig(None, "pod"), None, True, True, 2)
    assert flags_only.source == "flags+assumed"


def test_file_defaults_are_the_kubelet_defaults():
    assert parse_kubelet_config({}) == FileConfig()
    assert FileConfig().topology_manager_policy == "none"


@pytest.mark.parametrize("document, message", [
    ({"topologyManagerPolicy": "numa"}, "topologyManagerPolicy 'numa'"),
    ({"topologyManagerScope": "node"}, "topologyManagerScope 'node'"),
    ({"cpuManagerPolicyOptions": {"full-pcpus-only": "yes"}}, "full-pcpus-only must be"),
    ({"kind": "Pod"}, "kind is 'Pod'"),
])
def test_bad_file_is_one_line(document, message):
    with pytest.raises(KubeletConfigError, match=message):
        parse_kubelet_config(document)


def test_the_environment_twins_of_the_new_flags():
    from exporter import cli
    args = cli.parse_args([], {"PODRESOURCES_EXPORTER_TOPOLOGY_MANAGER_POLICY": "restricted",
                               "PODRESOURCES_EXPORTER_TOPOLOGY_MANAGER_SCOPE": "pod"})
    settings = cli.settings_from(args)
    assert (settings.topology_manager_policy, settings.topology_manager_scope) == (
        "restricted", "pod")
