"""The differential test's named exceptions (tests/support/differential/exceptions.py), each
shown on a case of its own against the real kubelet: the fit engine, as a deployed exporter
asks it, differs from the kubelet for a reason no source it reads can show, and, told what it
could not see, agrees.

``unseen-unhealthy-device``: 2 NUMA nodes of 4 CPUs (CPU 0 reserved), Topology Manager policy
restricted, scope container, static CPU manager. example.com/nic has two devices: nx-0 without
topology (healthy) and n-0 on NUMA node 1, unhealthy and held by no container. The candidate,
Guaranteed, asks for 1 CPU and 1 NIC. The kubelet's device manager counts n-0: the resource is
NUMA-aware (deviceHasTopologyAlignment reads allDevices) and its hints span node 1 only
(deviceNUMANodes); the one available NIC, nx-0, has no topology and meets no mask, so there is
no hint: TopologyAffinityError. Neither podresources API nor the checkpoint's registry names
n-0, so the exporter sees a NIC resource without topology, which "does not care": it admits,
and its answer says what it assumed (``unseen_unhealthy_devices``: with the Pods API alone
nothing rules such a device out). Told of n-0, the fit engine rejects with
TopologyAffinityError too.

``plugin-not-registered-yet`` (the sequences' kubelet restarts): its test below.

Not an exception but a limit of the comparison, shown here too: a container whose hints follow
a device pick the kubelet makes by map order (tests/support/differential/exact.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..support.differential.cases import Case, ContainerDraw, PodDraw
from ..support.differential.exceptions import PLUGIN_NOT_REGISTERED, UNSEEN_UNHEALTHY_DEVICE
from ..support.differential.judging import except_unregistered, probe
from ..support.differential.runner import Outcome, compare, fit_answer, run_case, workdir
from ..support.realkubelet import RealKubelet, node_description, write_kubelet_config

PROFILE = {
    "name": "differential", "node_name": "differential-node", "kubernetes_version": "1.37",
    "numa_nodes": [{"id": 0, "cpus": "0,1,2,3", "memory": "8Gi"},
                   {"id": 1, "cpus": "4,5,6,7", "memory": "8Gi"}],
    "threads_per_core": 1, "cpu_manager_policy": "static", "reserved_cpus": "0",
    "memory_manager_policy": "None", "topology_manager_policy": "restricted",
    "topology_manager_scope": "container",
    "devices": [{"resource": "example.com/nic", "id_prefix": "nx-", "count": 1},
                {"resource": "example.com/nic", "id_prefix": "n-", "per_numa": {"1": 1},
                 "unhealthy": 1}],
}
# the candidate asks for 1 CPU, 1Gi and one NIC; only nx-0 can serve it, so 1 copy at most
CANDIDATE = PodDraw("candidate", "Guaranteed", (
    ContainerDraw("app", "app", 1000, 1 << 30, {}, {"example.com/nic": 1}),), start=False)


def test_an_unseen_unhealthy_device_is_a_named_exception() -> None:
    case = Case(0, 0, PROFILE, (), CANDIDATE)
    with RealKubelet.start("1.37") as kubelet:
        outcome = run_case(kubelet, case, workdir())
    assert outcome.real is not None and outcome.fit is not None
    assert (outcome.real.admitted, outcome.real.reason) == (False, "TopologyAffinityError")
    assert outcome.fit.verdict.admitted  # what the exporter can see
    assert "unseen_unhealthy_devices" in outcome.fit.assumptions
    assert outcome.exception == UNSEEN_UNHEALTHY_DEVICE
    assert outcome.differences == []
    assert outcome.excepted == [
        "verdict: kubelet rejects (TopologyAffinityError: Resources cannot be allocated with "
        "Topology locality), fit engine admits", "capacity: kubelet 0, fit engine 1.0"]


def test_a_device_plugin_not_registered_again_after_a_restart_is_a_named_exception(
        tmp_path: Path) -> None:
    """``plugin-not-registered-yet``: the same node under ``restricted``, but its NICs one on
    each NUMA node, all healthy; the kubelet restarts and the NIC plugin has not registered
    again. The device manager has example.com/nic from its checkpoint with no device at all:
    no hint (it does not care), then Allocate fails: UnexpectedAdmissionError ("no healthy
    devices present"). The exporter sees the resource registered and no NIC in either
    podresources API, as when every NIC is unhealthy, and says TopologyAffinityError. Told
    that the resource has no device, the fit engine says UnexpectedAdmissionError too."""
    profile = {**PROFILE, "devices": [{"resource": "example.com/nic", "id_prefix": "n-",
                                       "per_numa": {"0": 1, "1": 1}}]}
    case = Case(0, 0, profile, (), CANDIDATE)
    description = node_description(case.spec)
    with RealKubelet.start("1.37") as kubelet:
        node = kubelet.reset(description)
        kubelet.restart(plugins_late=True)
        config = str(write_kubelet_config(description, tmp_path / "kubelet-config.yaml"))
        read = asyncio.run(fit_answer(case, node, description["name"], config, None))
        dump = kubelet.dump()
        first, capacity, stop, _ = probe(kubelet, CANDIDATE, "t")
    assert (first.admitted, first.reason) == (False, "UnexpectedAdmissionError")
    assert "no healthy devices present" in first.message
    assert (read.answer.verdict.admitted, read.answer.verdict.reason) == (
        False, "TopologyAffinityError")
    outcome = Outcome(case, real=first, real_capacity=capacity, stop_reason=stop,
                      fit=read.answer)
    compare(outcome, description)
    assert outcome.differences == ["reason"]
    except_unregistered(outcome, description, dump, read)
    assert outcome.exception == PLUGIN_NOT_REGISTERED
    assert outcome.differences == []


def test_a_container_placed_after_the_kubelets_draw_is_not_compared() -> None:
    """Seed 2027's case 1558, reduced: one device on each of 2 NUMA nodes, ``best-effort``,
    scope container. The init container takes both; the sidecar after it needs one of the two,
    and the device manager takes it from the reusable set by Go map order (devicesToAllocate):
    either. The app needs one: its only hint is the NUMA node of the device the sidecar left
    (GetTopologyHints, generated before its Allocate), so its placement is the draw's; the
    fit engine, which takes the lowest id, is right half of the time. The comparison leaves
    the app out and counts it; the sidecar's own pick is counted as random."""
    profile = {**PROFILE, "topology_manager_policy": "best-effort",
               "devices": [{"resource": "example.com/dev", "id_prefix": "d-",
                            "per_numa": {"0": 1, "1": 1}}]}
    candidate = PodDraw("candidate", "Burstable", (
        ContainerDraw("init-0", "init", 500, 0, {}, {"example.com/dev": 2}),
        ContainerDraw("sidecar-1", "sidecar", 500, 0, {}, {"example.com/dev": 1}),
        ContainerDraw("app-2", "app", 500, 0, {}, {"example.com/dev": 1})), start=False)
    with RealKubelet.start("1.37") as kubelet:
        outcome = run_case(kubelet, Case(0, 0, profile, (), candidate), workdir())
    assert outcome.real is not None and outcome.real.admitted
    sidecar = outcome.real.containers["sidecar-1"].devices["example.com/dev"]
    app = outcome.real.containers["app-2"].devices["example.com/dev"]
    assert {*sidecar, *app} == {"d-0", "d-1"} and len(sidecar) == len(app) == 1
    assert outcome.real.containers["app-2"].numa == ((0,) if app == ("d-0",) else (1,))
    assert outcome.exact is not None
    assert outcome.exact.after_draw == ["app-2"]
    assert outcome.exact.random_devices == 1  # the sidecar's
    assert outcome.differences == [], outcome.details
