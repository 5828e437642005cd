"""Fixtures the integration tests share."""

from __future__ import annotations

import pytest

from exporter.kubeapi import reflector


@pytest.fixture
def quick_backoff(monkeypatch):
    """Back-off delays of 1 to 2 s, so recovery tests do not wait a minute."""
    monkeypatch.setattr(reflector, "BACKOFF_CAP_SECONDS", 2.0)
