"""SPEC section 2, DRA devices: deduplicated by (driver, pool, device) with the share id.

Each scenario drives the real exporter against the simulated kubelet; how they are built,
and the default machine the values are worked out on, is in tests/support/spec.py.
"""

from __future__ import annotations

from exporter.model import DraDevice

from ..support.harness import Exporter, Node, small_profile
from ..support.spec import (
    C,
    put_pod,
)


async def test_dra_devices_deduplicated_by_driver_pool_device_with_share_id():
    drv = "gpu.example.com"

    def dra(pool, device, claim, share_id=None, cdi=()):
        return DraDevice(drv, pool, device, claim, "ns", share_id, tuple(cdi))

    async with Node(small_profile()) as node:
        d0 = dra("p1", "d0", "shared-claim", cdi=("x/gpu=d0", "x/gpu=d0"))  # repeated CDI name
        put_pod(node, "ns", "p",
                # d0 repeated in the same claim; d1 a consumable-capacity share
                C("c1", dra_devices=(d0, d0, dra("p1", "d1", "shared-claim", "s-1"))),
                C("c2", dra_devices=(d0, dra("p2", "d0", "other-claim"))),
                C("c3", dra_devices=(dra("p1", "d1", "third-claim", "s-2"),)))
        async with Exporter(node.settings()) as exporter:
            s = await exporter.ready()
    # distinct (driver, pool, device): p1 {d0, d1}, p2 {d0}
    assert s.by("podresources_dra_devices_allocated", "driver", "pool") == {
        (drv, "p1"): 2, (drv, "p2"): 1}
    info = {(d["container"], d["pool"], d["device"], d["claim"], d.get("share_id", "")): v
            for d, v in ((dict(k), v) for k, v in s.series("podresources_dra_device_info").items())}
    assert info == {("c1", "p1", "d0", "shared-claim", ""): 1,
                    ("c1", "p1", "d1", "shared-claim", "s-1"): 1,
                    ("c2", "p1", "d0", "shared-claim", ""): 1,
                    ("c2", "p2", "d0", "other-claim", ""): 1,
                    ("c3", "p1", "d1", "third-claim", "s-2"): 1}
    # DRA devices carry no NUMA information: no alignment series
    assert not s.series("podresources_container_numa_nodes", pod="p")
