"""Which kubelet data issues the log reports: a kind when it appears, not every comeback.

Data issues are counted on every refresh (``podresources_data_issues_total``); the log is for
news. A kind is logged (one warning, with an example) when it appears; while it persists, and
when it comes and goes, it is logged again only at debug level, until it has been absent for
``quiet_seconds`` (an hour by default): then its return is news again. A kind that flaps on
every refresh so logs once, not once a refresh.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

QUIET_SECONDS = 3600.0


class IssueLog:
    """Logs the data issue kinds of each refresh to ``log`` as they come and go."""

    def __init__(self, log: logging.Logger, quiet_seconds: float = QUIET_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._quiet = quiet_seconds
        self._clock = clock
        self._present: set[str] = set()      # kinds in the last refresh
        self._seen_at: dict[str, float] = {}  # kind -> when it was last present

    def note(self, issues: Mapping[str, int], examples: Mapping[str, str]) -> None:
        """One refresh's issue counts by kind, with an example per kind."""
        now = self._clock()
        kinds = {kind for kind, count in issues.items() if count}
        for kind in sorted(kinds - self._present):
            if now - self._seen_at.get(kind, float("-inf")) > self._quiet:
                self._log.warning("kubelet data issue %s (%d this refresh), e.g. %s; the rest "
                                  "of the snapshot is exported", kind, issues[kind],
                                  examples.get(kind, ""))
            else:  # it comes and goes: counted every time, logged once
                self._log.debug("kubelet data issue %s is back (%d this refresh)", kind,
                                issues[kind])
        for kind in sorted(kinds & self._present):
            self._log.debug("kubelet data issue %s persists (%d this refresh)", kind,
                            issues[kind])
        for kind in kinds:
            self._seen_at[kind] = now
        self._present = kinds
