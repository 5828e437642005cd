"""The log of kubelet data issues: news once, not on every comeback of a flapping kind."""

from __future__ import annotations

import logging
from collections import Counter

from exporter import refresh
from exporter.accounting import Accounting
from exporter.model import KubeletSnapshot, Topology
from exporter.refresh import Refresher, Settings


def _result(**issues: int) -> Accounting:
    return Accounting(api_version="v1", data_issues=Counter(issues),
                      issue_examples={kind: f"an example of {kind}" for kind in issues})


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "exporter.refresh" and r.levelno >= logging.WARNING]


async def test_a_data_issue_kind_that_flaps_is_logged_once(caplog, tmp_path):
    caplog.set_level(logging.DEBUG, logger="exporter.refresh")
    refresher = Refresher(Settings(socket=str(tmp_path / "kubelet.sock")),
                          topology=Topology.from_nodes([]))
    snapshot = KubeletSnapshot((), None)
    try:
        for _ in range(5):  # present, gone, present, gone, ...
            refresher._publish(snapshot, _result(unknown_cpu=2), 0)
            refresher._publish(snapshot, _result(), 0)
        assert _warnings(caplog) == [
            "kubelet data issue unknown_cpu (2 this refresh), e.g. an example of unknown_cpu; "
            "the rest of the snapshot is exported"]
        # every occurrence is still counted
        assert refresher.health.data_issues.labels("unknown_cpu")._value.get() == 10
        # another kind is news
        refresher._publish(snapshot, _result(unknown_cpu=1, duplicate_entry=1), 0)
        assert len(_warnings(caplog)) == 2 and "duplicate_entry" in _warnings(caplog)[1]
    finally:
        await refresher.client.close()


async def test_a_kind_back_after_a_quiet_period_is_news_again(caplog, tmp_path, monkeypatch):
    caplog.set_level(logging.INFO, logger="exporter.refresh")
    monkeypatch.setattr(refresh, "ISSUE_QUIET_SECONDS", 0.0)
    refresher = Refresher(Settings(socket=str(tmp_path / "kubelet.sock")),
                          topology=Topology.from_nodes([]))
    snapshot = KubeletSnapshot((), None)
    try:
        for _ in range(3):
            refresher._publish(snapshot, _result(unknown_cpu=1), 0)
            refresher._publish(snapshot, _result(), 0)
        assert len(_warnings(caplog)) == 3
    finally:
        await refresher.client.close()
