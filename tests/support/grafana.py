"""What Grafana does with a dashboard's queries before Prometheus sees them: the panels of a
model, ``$variable`` interpolation, multi-value variables as regular expressions, and reading
the answers back."""

from __future__ import annotations

import json
import math
import re

from .harness import REPO

DASHBOARD_DIR = REPO / "dashboards"
LABEL_VALUES = re.compile(r"^label_values\((?:(.*),\s*)?(\w+)\)$")


def dashboard(name: str) -> dict:
    """A committed dashboard's model, e.g. ``dashboard("numa-overview")``."""
    return json.loads((DASHBOARD_DIR / f"{name}.json").read_text(encoding="utf-8"))


def panels(model: dict) -> list[dict]:
    """Every panel that queries, inside rows too."""
    found = []
    for panel in model["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return [panel for panel in found if panel["type"] != "row"]


def substitute(text: str, values: dict[str, str]) -> str:
    """Grafana's interpolation of ``$name`` / ``${name}``; an unknown variable is an error."""
    def replace(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        assert name in values, f"undefined variable ${name} in {text!r}"
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", replace, text)


def regex_escape(value: str) -> str:
    """A value in a multi-value variable's regex, as Grafana writes it into a PromQL string:
    regex metacharacters escaped with a backslash, itself escaped for the string."""
    return re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", value)


def all_of(values: list[str]) -> str:
    """A multi-value variable at All without a custom all value: every value offered."""
    return "(" + "|".join(regex_escape(v) for v in values) + ")"


def has_finite_value(result: list[dict]) -> bool:
    samples = [s for series in result for s in series.get("values", [series.get("value")])]
    return any(math.isfinite(float(value)) for _, value in samples)


def by(result: list[dict], label: str) -> dict[str, float]:
    """An instant result as {value of ``label``: value}."""
    return {series["metric"].get(label, ""): float(series["value"][1]) for series in result}
