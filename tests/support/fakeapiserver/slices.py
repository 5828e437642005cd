"""The ResourceSlices a profile's DRA drivers would publish for the node, as API objects.

The kubelet's podresources API names DRA devices without their locality; a driver publishes
that, and the taints of its devices, in ResourceSlices (``resource.k8s.io/v1``: one slice per
part of a pool, ``pool.generation`` and ``pool.resourceSliceCount`` telling which slices belong
together). This builds them from the profile, for the fake Kubernetes API of the demo and the
tests; a device's ``attributes`` and ``taints`` are the profile's, verbatim.
"""

from __future__ import annotations

from typing import Any

from exporter.simulator.profile import NodeSpec


def resource_slices(spec: NodeSpec, parts: int = 1, generation: int = 1) -> list[dict[str, Any]]:
    """Each pool split over ``parts`` slices (as drivers split big pools), named
    ``<node>-<driver>-<pool index>-<part>``."""
    slices = []
    for index, pool in enumerate(spec.dra_pools):
        for part in range(parts):
            devices = [{"name": name, **pool.published.get(name, {})}
                       for name in pool.devices[part::parts]]
            slices.append({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": f"{spec.name}-{pool.driver}-{index}-{part}"},
                "spec": {"driver": pool.driver, "nodeName": spec.name,
                         "pool": {"name": pool.pool, "generation": generation,
                                  "resourceSliceCount": parts},
                         "devices": devices}})
    return slices
