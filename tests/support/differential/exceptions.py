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
PLUGIN_NOT_REGISTERED = "plugin-not-registered-yet"
EXCEPTIONS = {
    UNSEEN_UNHEALTHY_DEVICE:
        "an unhealthy device no container holds is in neither podresources API nor the "
        "device checkpoint's registry (healthy devices only), yet the device manager counts "
        "it: deviceHasTopologyAlignment, deviceNUMANodes and the minimum width read "
        "allDevices, unhealthy devices included (devicemanager/topology_hints.go), so its NUMA "
        "nodes decide whether a resource aligns at all and which NUMA sets its hints span",
    PLUGIN_NOT_REGISTERED:
        "after a kubelet restart, until a resource's device plugin registers again, the "
        "device manager has the resource from its checkpoint with no device at all "
        "(readCheckpoint: empty healthy and unhealthy sets): deviceHasTopologyAlignment finds "
        "no device, so the resource gives no hint and the pod fails in Allocate (\"no healthy "
        "devices present\", UnexpectedAdmissionError); both podresources APIs and the "
        "checkpoint read the same as for a resource whose every device is unhealthy, whose "
        "devices keep their NUMA nodes (no hint under restricted and single-numa-node: "
        "TopologyAffinityError)",
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


def unregistered_resources(dump: dict[str, Any], resources: set[str]) -> set[str]:
    """The requested resources whose device plugin has not registered with the restarted
    kubelet yet: the device manager counts none of their devices (capacity 0) while the
    plugin has some."""
    capacity = dump["device_manager"]["capacity"]
    return {resource for resource, devices in dump["device_manager"]["registered"].items()
            if resource in resources and devices and not capacity.get(resource)}


def told_unregistered(state: ManagersState, resources: set[str]) -> ManagersState:
    """``state`` with those resources holding no device at all (so not NUMA-aware)."""
    devices = dict(state.devices)
    for resource in resources:
        known = devices.get(resource)
        if known is not None:
            devices[resource] = replace(known, registered={}, free={}, healthy=0,
                                        registered_unseen=False)
    return replace(state, devices=devices)
