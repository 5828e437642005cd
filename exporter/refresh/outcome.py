"""What the refresh attempts say about the kubelet: up or not, backing off or not, and for how
long; each change of state logged once.

Failures back off exponentially with full jitter (floored at the base delay, so never a tight
loop); the rate limit may push the delay to a minute, other errors never beyond ``--interval``.
"""

from __future__ import annotations

import logging
import random
import time

from ..backoff import BACKOFF_BASE_SECONDS, BACKOFF_CAP_SECONDS, backoff_delay
from ..exposition.health import Health
from ..issues import IssueKind
from ..kubelet import client as kubelet
from ..kubelet.client import KubeletClient, KubeletError
from ..kubelet.status import KubeletStatus


class Outcome:
    """Writes ``status`` (up, last success, back-off) after each attempt and returns the delay
    before the next one. ``log``: the refresh loop's logger."""

    def __init__(self, status: KubeletStatus, health: Health, client: KubeletClient,
                 interval: float, max_message_bytes: int, timeout: float, log: logging.Logger):
        self.status = status
        self.health = health
        self.client = client
        self.interval = interval
        self.max_message_bytes = max_message_bytes
        self.timeout = timeout
        self.log = log
        self.state = "starting"  # "ok", or the kind of the last failure
        self.last_error: KubeletError | None = None
        self._attempts = 0

    def succeeded(self) -> float:
        if self.state == kubelet.ErrorKind.RATE_LIMITED:
            self.log.info("back-off ended: the kubelet answered again")
        elif self.state == "starting":
            self.log.info("kubelet podresources API reached at %s (API %s)", self.client.target,
                          self.status.capabilities.api_version)
        elif self.state != "ok":
            self.log.info("kubelet podresources API reachable again")
        self.state = "ok"
        self._attempts = 0
        self.status.up = 1
        self.status.last_success = time.time()
        self.status.backoff_seconds = 0.0
        return self.interval

    def failed(self, error: KubeletError, rng: random.Random, logged: bool = False) -> float:
        """``logged``: the caller has said it already."""
        self.last_error = error
        self.status.up = 0
        self._attempts += 1
        kind = error.kind
        cap = BACKOFF_CAP_SECONDS if kind == kubelet.ErrorKind.RATE_LIMITED else max(
            self.interval, BACKOFF_BASE_SECONDS)
        delay = backoff_delay(self._attempts, cap, rng=rng)
        if kind == kubelet.ErrorKind.TOO_LARGE:
            self.health.count_issues({IssueKind.MESSAGE_TOO_LARGE: 1})
        if kind == kubelet.ErrorKind.INVALID_REPLY:
            self.health.count_issues({IssueKind.INVALID_REPLY: 1})
        if kind != self.state and not logged:
            self._log_failure(error, delay)
        self.state = kind
        self.status.backoff_seconds = delay
        return delay

    def _log_failure(self, error: KubeletError, delay: float) -> None:
        what = kubelet.describe(error, self.client.target, self.max_message_bytes, self.timeout)
        if error.kind == kubelet.ErrorKind.RATE_LIMITED:
            self.log.warning("%s; backing off (next try in %.1fs, up to %.0fs); serving the last "
                             "good snapshot", what, delay, BACKOFF_CAP_SECONDS)
        elif error.kind in (kubelet.ErrorKind.TOO_LARGE, kubelet.ErrorKind.INVALID_REPLY):
            self.log.error("%s", what)
        else:
            self.log.warning("%s; retrying, serving the last good snapshot", what)
