"""Named exceptions: the few disagreements that come from what the kubelet knows and no source
the exporter reads shows. Each is excluded by a narrow rule that names the kubelet function and
proves itself on the case: the exporter's answer must say what it assumed (its
``podresources_shape_assumption_info`` label), and the fit engine, told what it could not see,
must then agree with the kubelet; otherwise the disagreement stands. docs/fit.md has a sentence
for each, and tests/integration/test_differential_exceptions.py a test."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from exporter.fit.kubelet.devicemanager.manager import DeviceState
from exporter.fit.kubelet.managers_state import ManagersState
from exporter.fit.kubelet.topologymanager.topology_manager import NumaSet

UNSEEN_UNHEALTHY_DEVICE = "unseen-unhealthy-device"
EXCEPTIONS = {
    UNSEEN_UNHEALTHY_DEVICE:
        "an unhealthy device no container holds is in neither podresources API nor the "
        "device checkpoint's registry (healthy devices only), yet the device manager counts "
        "it: deviceHasTopologyAlignment, deviceNUMANodes and the minimum width read "
        "allDevices, unhealthy devices included (devicemanager/topology_hints.go), so its NUMA "
        "nodes decide whether a resource aligns at all and which NUMA sets its hints span",
}


def unseen_unhealthy_devices(dump: dict[str, Any], resources: set[str]
                             ) -> dict[str, dict[NumaSet, int]]:
    """Per requested resource, the NUMA sets of its unhealthy devices that no active pod's
    container holds (the component's dump of the device manager)."""
    held = {(resource, device_id)
            for pod in dump["pods"] or () if pod["active"]
            for container in pod["containers"] or ()
            for resource, ids in container["devices"].items() for device_id in ids}
    unseen: dict[str, dict[NumaSet, int]] = {}
    for resource, devices in dump["device_manager"]["registered"].items():
        if resource not in resources:
            continue
        for device_id, device in devices.items():
            if not device["healthy"] and (resource, device_id) not in held:
                numa = frozenset(device["numa"] or ())
                counts = unseen.setdefault(resource, {})
                counts[numa] = counts.get(numa, 0) + 1
    return unseen


def told(state: ManagersState, unseen: dict[str, dict[NumaSet, int]]) -> ManagersState:
    """``state`` with the unseen devices registered (none of them free)."""
    devices = dict(state.devices)
    for resource, counts in unseen.items():
        known = devices.get(resource) or DeviceState({}, {}, 0, 0)
        registered = dict(known.registered)
        for numa, count in counts.items():
            registered[numa] = registered.get(numa, 0) + count
        devices[resource] = replace(known, registered=registered, registered_unseen=False)
    return replace(state, devices=devices)
