"""The log of kubelet data issues: news once, not on every comeback of a flapping kind."""

from __future__ import annotations

import logging

from exporter.refresh.issuelog import IssueLog

LOG = logging.getLogger("exporter.refresh.loop")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "exporter.refresh.loop" and r.levelno >= logging.WARNING]


def test_a_data_issue_kind_that_flaps_is_logged_once(caplog):
    caplog.set_level(logging.DEBUG, logger="exporter.refresh.loop")
    clock = Clock()
    issues = IssueLog(LOG, clock=clock)
    example = {"unknown_cpu": "CPU 99 is not in sysfs", "duplicate_entry": "pod ns/p twice"}
    for _ in range(5):  # present, gone, present, gone, ... one refresh every 10 s
        issues.note({"unknown_cpu": 2}, example)
        clock.now += 10
        issues.note({}, example)
        clock.now += 10
    assert warnings(caplog) == [
        "kubelet data issue unknown_cpu (2 this refresh), e.g. CPU 99 is not in sysfs; the rest "
        "of the snapshot is exported"]
    assert sum("unknown_cpu is back" in r.getMessage() for r in caplog.records) == 4
    issues.note({"unknown_cpu": 1, "duplicate_entry": 3}, example)  # another kind is news
    assert warnings(caplog)[1:] == [
        "kubelet data issue duplicate_entry (3 this refresh), e.g. pod ns/p twice; the rest of "
        "the snapshot is exported"]


def test_a_kind_back_after_an_hour_without_it_is_news_again(caplog):
    caplog.set_level(logging.INFO, logger="exporter.refresh.loop")
    clock = Clock()
    issues = IssueLog(LOG, clock=clock)
    issues.note({"unknown_cpu": 1}, {})
    clock.now += 3599
    issues.note({}, {})           # gone, last seen 3599 s ago ...
    issues.note({"unknown_cpu": 1}, {})
    assert len(warnings(caplog)) == 1
    issues.note({}, {})
    clock.now += 3601             # ... and now gone for more than an hour
    issues.note({"unknown_cpu": 1}, {})
    assert len(warnings(caplog)) == 2
    issues.note({"unknown_cpu": 0}, {})  # a zero count is no issue
    assert len(warnings(caplog)) == 2
