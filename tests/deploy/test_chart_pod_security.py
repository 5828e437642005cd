"""Pod Security measured on the real API server: the DaemonSet's pod, made from its rendered
template as the DaemonSet controller makes it, created in namespaces that enforce each level.

The verdicts are the API server's own (k8s.io/pod-security-admission v0.37.2, the checks in
policy/check_*.go): ``privileged`` admits the pod; ``baseline`` and ``restricted`` refuse it
for the host paths and, under ``restricted``, for running as root, and for nothing else: no
privilege escalation, every capability dropped, seccomp ``RuntimeDefault``, no host namespace,
no privileged container. The ``helm test`` pod is admitted under ``restricted`` with no
warning.
"""

from __future__ import annotations

import pytest

from ..support.chart import CHART
from ..support.controlplane import POD_SECURITY_LEVELS, ApiStatus, ControlPlane
from ..support.controlplane_chart import Helm, pod_from_template

pytestmark = pytest.mark.external

ROOT = ('runAsNonRoot != true (container "exporter" must not set '
        'securityContext.runAsNonRoot=false), runAsUser=0 (container "exporter" must not set '
        'runAsUser=0)')
DEFAULT_VOLUMES = '"pod-resources", "pods-api", "sys-devices-system"'
SELINUX = ('seLinuxOptions (container "exporter" set forbidden securityContext.seLinuxOptions: '
           'type "container_device_plugin_t")')
WIDE_VOLUMES = '"pod-resources", "pods-api", "sys-devices", "sys-bus-pci-devices", "kubelet-root"'
# values file -> (the baseline refusal, the restricted refusal), each after 'violates PodSecurity
# "<level>:latest": '. Under restricted, "restricted volume types" replaces baseline's
# "hostPath volumes" (the check overrides it).
VERDICTS = {
    None: (f"hostPath volumes (volumes {DEFAULT_VOLUMES})",
           f'restricted volume types (volumes {DEFAULT_VOLUMES} use restricted volume type '
           f'"hostPath"), {ROOT}'),
    # the SELinux type for RHEL/OpenShift: baseline allows container_t, container_init_t,
    # container_kvm_t and container_engine_t only
    "openshift-custom-root-values.yaml": (
        f"hostPath volumes (volumes {DEFAULT_VOLUMES}), {SELINUX}",
        f'{SELINUX}, restricted volume types (volumes {DEFAULT_VOLUMES} use restricted volume '
        f'type "hostPath"), {ROOT}'),
    "kubeapi-watchpath-networkpolicy-values.yaml": (
        f"hostPath volumes (volumes {WIDE_VOLUMES})",
        f'restricted volume types (volumes {WIDE_VOLUMES} use restricted volume type '
        f'"hostPath"), {ROOT}'),
    # an init container of the user's running as root is named beside the exporter
    "umbrella-extras-values.yaml": (
        f"hostPath volumes (volumes {DEFAULT_VOLUMES})",
        f'restricted volume types (volumes {DEFAULT_VOLUMES} use restricted volume type '
        '"hostPath"), runAsNonRoot != true (container "exporter" must not set '
        'securityContext.runAsNonRoot=false), runAsUser=0 (containers "wait-for-kubelet", '
        '"exporter" must not set runAsUser=0)'),
}
# What no level may name: the exporter asks for none of it.
NEVER = ("allowPrivilegeEscalation", "unrestricted capabilities", "seccompProfile",
         "privileged", "host namespaces", "hostPort", "procMount", "sysctls", "appArmor")


@pytest.fixture(scope="module")
def levels(control_plane: ControlPlane, helm: str, tmp_path_factory) -> tuple[Helm, dict]:
    namespaces = {}
    for level in POD_SECURITY_LEVELS:
        name = f"pod-security-{level}"
        try:
            control_plane.namespace(name, enforce=level)
        except ApiStatus as error:
            if error.status != 409:
                raise
        namespaces[level] = name
        # the chart's ServiceAccount, which the ServiceAccount admission plugin looks up
        control_plane.client().apply({"apiVersion": "v1", "kind": "ServiceAccount",
                                      "metadata": {"name": "pre-podresources-exporter",
                                                   "namespace": name}})
    return Helm(helm, control_plane, tmp_path_factory.mktemp("helm-home")), namespaces


def verdict(plane: ControlPlane, pod: dict, namespace: str) -> tuple[int, str, list[str]]:
    """What the API server answers a pod's creation: the status, the refusal's message, the
    warnings; an admitted pod is deleted again."""
    admin = plane.client()
    reply = admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod,
                          query={"fieldValidation": "Strict"}, check=False)
    if reply.status == 201:
        admin.delete(f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}"
                     "?gracePeriodSeconds=0")
        return 201, "", reply.warnings
    return reply.status, reply.body.get("message", ""), reply.warnings


@pytest.mark.parametrize("values", list(VERDICTS), ids=lambda v: v or "chart-defaults")
def test_each_level_refuses_the_exporter_pod_for_host_paths_and_root_only(levels,
                                                                         control_plane,
                                                                         values):
    helm, namespaces = levels
    options = ["--values", str(CHART / "ci" / values)] if values else []
    docs = helm.template("pre", "monitoring", *options)
    daemonset = next(d for d in docs if d["kind"] == "DaemonSet")
    name = "pre-podresources-exporter-abcde"
    baseline, restricted = VERDICTS[values]
    status, message, warnings = verdict(control_plane, pod_from_template(daemonset, name),
                                        namespaces["privileged"])
    assert (status, message, warnings) == (201, "", [])
    for level, expected in (("baseline", baseline), ("restricted", restricted)):
        status, message, _ = verdict(control_plane, pod_from_template(daemonset, name),
                                     namespaces[level])
        assert status == 403, message
        assert message == (f'pods "{name}" is forbidden: violates PodSecurity '
                           f'"{level}:latest": {expected}')
        for word in NEVER:
            assert word not in message.replace("restricted volume types", ""), (level, word)


def test_the_exporter_container_asks_for_nothing_beyond_its_paths(levels, control_plane):
    """The pod as the API server stored it (defaults applied) in the privileged namespace."""
    helm, namespaces = levels
    daemonset = next(d for d in helm.template("pre", "monitoring") if d["kind"] == "DaemonSet")
    pod = pod_from_template(daemonset, "pre-podresources-exporter-stored")
    admin = control_plane.client()
    stored = admin.create(pod, namespaces["privileged"])
    try:
        spec = stored["spec"]
        context = spec["containers"][0]["securityContext"]
        assert context == {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False,
                           "privileged": False, "allowPrivilegeEscalation": False,
                           "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]},
                           "seccompProfile": {"type": "RuntimeDefault"}}
        assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
        assert not any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
        assert spec["automountServiceAccountToken"] is False
        assert all(m.get("readOnly") for m in spec["containers"][0]["volumeMounts"])
    finally:
        admin.delete(f"/api/v1/namespaces/{namespaces['privileged']}/pods/"
                     "pre-podresources-exporter-stored?gracePeriodSeconds=0")


@pytest.mark.parametrize("values", [None, "webconfig-values.yaml"],
                         ids=["chart-defaults", "webconfig-values.yaml"])
def test_helm_test_pod_is_admitted_under_restricted_without_warnings(levels, control_plane,
                                                                      values):
    helm, namespaces = levels
    options = ["--values", str(CHART / "ci" / values)] if values else []
    test_pod = next(d for d in helm.template("pre", "monitoring", *options)
                    if d["kind"] == "Pod")
    test_pod["metadata"].pop("namespace", None)
    status, message, warnings = verdict(control_plane, test_pod, namespaces["restricted"])
    assert (status, message, warnings) == (201, "", [])
