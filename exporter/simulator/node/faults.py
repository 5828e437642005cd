"""The simulated kubelet's misbehaviour and bookkeeping: the kubelet's rate limiter, the fault
switches another process can flip (through :mod:`exporter.simulator.control`), and the record
of every call answered, for tests that count calls."""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

DEFAULT_QPS = 100.0
DEFAULT_BURST = 10


class TokenBucket:
    """``golang.org/x/time/rate``'s limiter as the kubelet uses it: ``Allow()`` or reject."""

    def __init__(self, rate: float = DEFAULT_QPS, burst: int = DEFAULT_BURST):
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.updated = time.monotonic()

    def allow(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.updated) * self.rate)
        self.updated = now
        if self.tokens >= 1:
            self.tokens -= 1
            return True
        return False


_METHOD_MODES = ("ok", "disabled", "unimplemented")
_CHOICES = {"get_allocatable": _METHOD_MODES, "get": _METHOD_MODES,
            "garbage": ("", "bytes", "inconsistent")}


@dataclass
class Faults:
    """Switches that make the simulated kubelet misbehave; change them at any time."""

    rate_limit_storm: bool = False  # a neighbour drains the quota: every call is rejected
    get_allocatable: str = "ok"  # "ok" | "disabled" | "unimplemented"
    get: str = "ok"  # "ok" | "disabled" | "unimplemented"
    v1: bool = True  # False: only v1alpha1 is served (v1 answers UNIMPLEMENTED)
    slow_seconds: float = 0.0  # delay before every reply
    oversize_bytes: int = 0  # pad List replies to at least this many bytes
    garbage: str = ""  # "" | "bytes" (undecodable replies) | "inconsistent" (hostile data)
    # a device resource whose plugin is disconnected: the kubelet marks its devices unhealthy,
    # so they leave GetAllocatableResources, while List keeps their assignments ("": none)
    plugin_disconnect: str = ""
    # the Pods API answers FAILED_PRECONDITION "Kubelet is initializing", as a kubelet does
    # until it has seen every pod source (just after a restart)
    pods_api_initializing: bool = False

    def update(self, changes: dict[str, Any]) -> None:
        """Apply ``{switch: value}``, all or nothing; ``ValueError`` names a bad one."""
        if not isinstance(changes, dict):
            raise ValueError("faults must be a JSON object of switches")
        values = {key: _fault_value(self, key, value) for key, value in changes.items()}
        for key, value in values.items():
            setattr(self, key, value)


def _fault_value(faults: Faults, key: str, value: Any) -> Any:
    if key not in Faults.__dataclass_fields__:
        raise ValueError(f"unknown fault {key!r}; switches: "
                         f"{', '.join(Faults.__dataclass_fields__)}")
    current = getattr(faults, key)
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{key} must be true or false, got {value!r}")
        return value
    if isinstance(current, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or value < 0:
            raise ValueError(f"{key} must be a non-negative number, got {value!r}")
        if isinstance(current, int) and value != int(value):
            raise ValueError(f"{key} must be a whole number, got {value!r}")
        return type(current)(value)
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    choices = _CHOICES.get(key)
    if choices is not None and value not in choices:
        raise ValueError(f"{key} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


@dataclass
class CallRecord:
    at: float  # time.monotonic()
    method: str  # e.g. "/v1.PodResourcesLister/List"
    code: str  # gRPC status name


@dataclass
class CallStats:
    """Every call the simulator answered, for assertions such as "at most N calls"."""

    records: list[CallRecord] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def add(self, method: str, code: str) -> None:
        self.records.append(CallRecord(time.monotonic(), method, code))

    def count(self, method: str | None = None, code: str | None = None,
              since: float | None = None, until: float | None = None) -> int:
        return sum(1 for r in self.records
                   if (method is None or r.method.endswith(method))
                   and (code is None or r.code == code)
                   and (since is None or r.at >= since)
                   and (until is None or r.at <= until))

    def by_code(self) -> dict[str, int]:
        return dict(Counter(f"{r.method} {r.code}" for r in self.records))


