"""What the dashboards and rules cost on the Prometheus side, for fleets of nodes
(``python -m benchmarks.fleet --help``: ``__main__``).

The modules: ``node`` (one node's /metrics from the real simulator and exporter, series per
node and churn), ``tsdb`` (the fleet's samples, the block promtool makes of them, the recording
rules backfilled, the Prometheus serving it), ``grafana`` (every panel and rule timed as Grafana
and a ruler send them), ``report`` (the tables, extrapolated), ``__main__`` (the command).
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DASHBOARD_DIR = REPO / "dashboards"
RULES = DASHBOARD_DIR / "rules" / "podresources-exporter.rules.yaml"
STEP = 30  # Grafana's step for a 1-hour view on a typical panel width
VIEW = 3600


def http(url: str, data: dict | None = None, timeout: float = 180) -> bytes:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}
                                     if body else {})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # 127.0.0.1 only
        return response.read()
