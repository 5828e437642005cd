"""What the refresh loop is told: one plain record, filled from the flags by the CLI and by hand
by the test harness."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..accounting import DEFAULT_CPU_DRIVERS
from ..exposition.rendering import RenderOptions
from ..kubelet import client as kubelet
from ..podsapi import DEFAULT_SOCKET as PODS_API_SOCKET


@dataclass
class Settings:
    """What the refresh loop needs to know; the CLI fills it from flags."""

    socket: str = kubelet.DEFAULT_SOCKET
    sysfs_root: str = "/sys"
    interval: float = 10.0
    allocatable_interval: float = 60.0
    watch_path: str | None = None
    max_refresh_rate: float = 1.0
    max_message_bytes: int = kubelet.DEFAULT_MAX_MESSAGE_BYTES
    timeout: float = kubelet.DEFAULT_TIMEOUT_SECONDS
    node_name: str = ""
    kube_api: bool = False
    # pod context from the kubelet's Pods API, when its socket exists
    pods_api: bool = True
    pods_api_socket: str = PODS_API_SOCKET
    render: RenderOptions = field(default_factory=RenderOptions)
    # the DRA drivers whose devices are exclusive CPUs (dra-driver-cpu's dra.cpu)
    dra_cpu_drivers: frozenset[str] = DEFAULT_CPU_DRIVERS
    # the fit answers (SPEC section 7)
    fit_shapes: str | None = None
    full_pcpus_only: bool = False
    kubelet_config: str | None = None
    topology_manager_policy: str | None = None
    topology_manager_scope: str | None = None
