"""Scrape targets other than the exporter, serving what the real ones serve: dcgm-exporter's
GPU series (with the label sets of its current and older releases), a kubelet's own /metrics,
and the exporter's two histograms with hand-picked bucket counts."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web


@dataclass(frozen=True)
class DcgmRelease:
    """What a dcgm-exporter release's default install names, as its release notes and source
    say (docs/dashboards.md cites them): the node label (``Hostname`` until 4.8.2, ``hostname``
    from 4.8.3, NVIDIA/dcgm-exporter#655), the driver-version label and the default counters'
    names for GPU utilization and framebuffer memory: before 4.9 the legacy ones (percent, MiB),
    from 4.9 DCGM 4.7's canonical ones (ratio 0 to 1, bytes), with the capacity added."""

    version: str
    hostname_label: str
    driver_label: str
    canonical: bool  # DCGM 4.7's names and base units (4.9 and later)

    def gauges(self, utilization: dict[str, float], used_mib: dict[str, float],
               total_mib: float) -> list[tuple[str, str, dict[str, float]]]:
        """(metric, help, value per UUID) of the counters the dashboards read, in the release's
        own units, from utilization in percent and memory in MiB."""
        free = {uuid: total_mib - used for uuid, used in used_mib.items()}
        if not self.canonical:
            return [("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", utilization),
                    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", free),
                    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", used_mib)]
        mib = 1048576
        return [("DCGM_FI_DEV_GPU_UTIL_RATIO", "GPU utilization (ratio).",
                 {uuid: value / 100 for uuid, value in utilization.items()}),
                ("DCGM_FI_DEV_FB_FREE_BYTES", "Framebuffer memory free (in bytes).",
                 {uuid: value * mib for uuid, value in free.items()}),
                ("DCGM_FI_DEV_FB_USED_BYTES", "Framebuffer memory used (in bytes).",
                 {uuid: value * mib for uuid, value in used_mib.items()}),
                ("DCGM_FI_DEV_FB_CAPACITY_BYTES", "Framebuffer memory capacity (in bytes).",
                 dict.fromkeys(used_mib, total_mib * mib))]


# The releases the tests serve: 4.7.0 (tag 4.4.2-4.7.0) still writes Hostname; 4.8.4 is the last
# with the legacy names; 4.10.0 is current (4.9.0's names; 4.10 renamed only profiling fields).
DCGM_4_7 = DcgmRelease("4.7.0", "Hostname", "DCGM_FI_DRIVER_VERSION", canonical=False)
DCGM_4_8 = DcgmRelease("4.8.4", "hostname", "DCGM_FI_DRIVER_VERSION", canonical=False)
DCGM_4_10 = DcgmRelease("4.10.0", "hostname", "DCGM_FI_SYSTEM_DRIVER_VERSION", canonical=True)


@dataclass(frozen=True)
class Holder:
    """The pod dcgm-exporter attributes a GPU to (DCGM_EXPORTER_KUBERNETES=true, the GPU
    operator's default), and, for a GPU NVIDIA's DRA driver prepared for a claim, the claim and
    the DRA device (pool, device): dcgm-exporter's DRA path (KUBERNETES_ENABLE_DRA, 4.8.3 and
    later) puts those on the GPU's series as dra_* labels."""

    namespace: str
    pod: str
    container: str
    claim: str = ""
    pool: str = ""
    device: str = ""


class StaticTarget:
    """An HTTP /metrics target on 127.0.0.1 serving ``body()`` in the text format."""

    def body(self) -> str:
        raise NotImplementedError

    async def metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.body().encode(),  # as client_golang labels it
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def __aenter__(self):
        app = web.Application()
        app.router.add_get("/metrics", self.metrics)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        await self.runner.cleanup()


class DcgmTarget(StaticTarget):
    """dcgm-exporter on one node: GPU utilization and framebuffer memory used and free per GPU
    (and from 4.9 the capacity), under the given release's names and units, labelled as it
    labels them: gpu, UUID, pci_bus_id, device (nvidia<index>, in the order given), modelName,
    its node label (the node's name, from NODE_NAME), its driver-version label, and the
    holder's namespace, pod and container, with the dra_* labels on a GPU held through a DRA
    claim. Values are given in percent and MiB whatever the release."""

    FRAMEBUFFER_MIB = 81559  # an 80 GB H100

    def __init__(self, hostname: str, utilization: dict[str, float], used: dict[str, float],
                 release: DcgmRelease = DCGM_4_10, holders: dict[str, Holder] | None = None):
        self.hostname = hostname
        self.utilization = utilization
        self.used = used
        self.release = release
        self.holders = holders or {}

    def labels(self, index: int, uuid: str) -> str:
        labels = [f'gpu="{index}"', f'UUID="{uuid}"',
                  f'pci_bus_id="00000000:{0x18 + index:02X}:00.0"', f'device="nvidia{index}"',
                  'modelName="NVIDIA H100 80GB HBM3"',
                  f'{self.release.hostname_label}="{self.hostname}"',
                  f'{self.release.driver_label}="580.95.05"']
        holder = self.holders.get(uuid)
        if holder:
            labels += [f'container="{holder.container}"', f'namespace="{holder.namespace}"',
                       f'pod="{holder.pod}"']
            if holder.claim:
                labels += [f'dra_claim_name="{holder.claim}"',
                           f'dra_claim_namespace="{holder.namespace}"',
                           'dra_driver_name="gpu.nvidia.com"', f'dra_pool_name="{holder.pool}"',
                           f'dra_device_name="{holder.device}"']
        return ",".join(labels)

    def body(self) -> str:
        lines = []
        index = {uuid: i for i, uuid in enumerate(self.utilization)}
        for metric, help_text, values in self.release.gauges(self.utilization, self.used,
                                                             self.FRAMEBUFFER_MIB):
            lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
            lines += [f"{metric}{{{self.labels(index[uuid], uuid)}}} {value!r}"
                      for uuid, value in values.items()]
        return "\n".join(lines) + "\n"


class KubeletTarget(StaticTarget):
    """The kubelet's own /metrics as kubernetes-mixin's kubelet job scrapes it: the node's name
    and the CPU manager's exclusive CPUs per NUMA node (kubelet_cpu_manager_allocation_per_numa,
    a gauge labelled numa_node)."""

    def __init__(self, node: str, allocated: dict[str, int]):
        self.node = node
        self.allocated = allocated

    def body(self) -> str:
        lines = ["# HELP kubelet_node_name The node's name. The count is always 1.",
                 "# TYPE kubelet_node_name gauge", f'kubelet_node_name{{node="{self.node}"}} 1',
                 "# HELP kubelet_cpu_manager_allocation_per_numa Number of CPUs allocated per "
                 "NUMA node", "# TYPE kubelet_cpu_manager_allocation_per_numa gauge"]
        lines += [f'kubelet_cpu_manager_allocation_per_numa{{numa_node="{numa}"}} {count}'
                  for numa, count in self.allocated.items()]
        return "\n".join(lines) + "\n"


class HistogramTarget(StaticTarget):
    """The exporter's two histograms, with the exporter's bucket bounds, growing by a fixed
    number of observations at every scrape: of every 100, ``FAST`` within 10 ms and the rest
    within 25 ms. Whatever the scrape times, every rate keeps those proportions, so quantiles
    are known by hand: p50 = 0.005 + 0.005 * 50/50 = 0.01 s (the 50th of 100 is the last of
    the (5 ms, 10 ms] bucket); p99 = 0.01 + 0.015 * (99 - 50)/50 = 0.0247 s."""

    FAST = 50
    REFRESH_BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
    CALL_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
    P50, P99 = 0.01, 0.0247

    def __init__(self) -> None:
        self.scrapes = 0

    def histogram(self, name: str, bounds: tuple[float, ...], labels: str) -> list[str]:
        total = 100 * self.scrapes
        lines = []
        for bound in (*bounds, float("inf")):
            count = 0 if bound < 0.01 else self.FAST * self.scrapes if bound < 0.025 else total
            le = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'{name}_bucket{{{labels}{"," if labels else ""}le="{le}"}} {count}')
        braces = f"{{{labels}}}" if labels else ""
        return [*lines, f"{name}_count{braces} {total}", f"{name}_sum{braces} {0.015 * total}"]

    def body(self) -> str:
        self.scrapes += 1
        lines = ["# HELP podresources_refresh_duration_seconds Duration of one refresh.",
                 "# TYPE podresources_refresh_duration_seconds histogram"]
        lines += self.histogram("podresources_refresh_duration_seconds", self.REFRESH_BOUNDS, "")
        lines += ["# HELP podresources_api_request_duration_seconds Duration of calls to the "
                  "kubelet podresources API.",
                  "# TYPE podresources_api_request_duration_seconds histogram"]
        lines += self.histogram("podresources_api_request_duration_seconds", self.CALL_BOUNDS,
                                'method="List"')
        return "\n".join(lines) + "\n"
