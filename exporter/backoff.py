"""Exponential back-off with full jitter, shared by the kubelet refresh loop and the
Kubernetes-API reflectors, so neither ever retries in a tight loop."""

from __future__ import annotations

import random

BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 60.0


def backoff_delay(attempt: int, cap: float, base: float = BACKOFF_BASE_SECONDS,
                  rng: random.Random | random.SystemRandom | None = None) -> float:
    """Exponential back-off with full jitter, floored at ``base``: attempt 1 -> [1, 2] s."""
    ceiling = min(cap, base * (2 ** attempt))
    return max(base, min(cap, (rng or random).uniform(0, ceiling)))
