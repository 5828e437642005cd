"""Every panel of every dashboard as Grafana sends it (variables resolved through Prometheus as
Grafana resolves them), a whole refresh of each dashboard, and every rule as a ruler evaluates
it; each query goes to every fleet in turn, round after round."""

from __future__ import annotations

import concurrent.futures
import json
import re
import statistics
import time
from pathlib import Path

import yaml

from . import RULES, STEP, VIEW
from .tsdb import Prometheus

CONCURRENCY = 6  # Grafana's concurrent queries per dashboard refresh

LABEL_VALUES = re.compile(r"^label_values\((?:(.*),\s*)?(\w+)\)$")


def substitute(text: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)",
                  lambda m: values.get(m.group(1) or m.group(2), m.group(0)), text)


def regex_escape(value: str) -> str:
    """As Grafana writes a multi-value variable's value into a PromQL string."""
    return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\\\1", value)


def natural(value: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", value)]


def variables(prometheus: Prometheus, model: dict, end: int, one_node: bool,
              rate_interval: str) -> dict[str, str]:
    """The dashboard's variables as Grafana resolves them: the defaults, or one node."""
    values = {"__rate_interval": rate_interval, "__range": "1h"}
    for variable in model["templating"]["list"]:
        name = variable["name"]
        if variable["type"] == "datasource":
            values[name] = "prometheus"
            continue
        if variable["type"] == "custom":
            values[name] = variable["current"]["value"]
            continue
        match = LABEL_VALUES.match(variable["query"])
        selector, label = match.groups()
        params = {"start": end - VIEW, "end": end}
        if selector:
            params["match[]"] = substitute(selector, values)
        _, answer = prometheus.query(f"/api/v1/label/{label}/values", **params)
        offered = sorted(answer.get("data") or [], key=natural)
        if variable.get("multi") and not (one_node and name == "node"):
            if variable.get("allValue"):
                values[name] = variable["allValue"]
            else:
                values[name] = "(" + "|".join(regex_escape(v) for v in offered) + ")"
        else:
            values[name] = offered[0] if offered else ""
    return values


def panels(model: dict) -> list[dict]:
    found = []
    for panel in model["panels"]:
        found += [panel, *panel.get("panels", [])]
    return [panel for panel in found if panel["type"] != "row"]


def send(prometheus: Prometheus, expr: str, instant: bool, end: int) -> tuple[float, dict]:
    if instant:
        return prometheus.query("/api/v1/query", query=expr, time=end, stats="1")
    return prometheus.query("/api/v1/query_range", query=expr, start=end - VIEW, end=end,
                            step=STEP, stats="1")


def measure(servers: dict[int, Prometheus], expr: str, instant: bool, end: int,
            repeat: int) -> dict[int, dict]:
    """The query on every fleet, ``repeat`` rounds, the fleets in turn within a round (so that
    whatever else the machine does weighs on every fleet alike); per fleet the fastest round
    (what the query costs: other work on the machine only ever adds time), and the median."""
    times: dict[int, list[float]] = {size: [] for size in servers}
    answers: dict[int, dict] = {}
    for _ in range(repeat):
        for size, prometheus in servers.items():
            seconds, answers[size] = send(prometheus, expr, instant, end)
            times[size].append(seconds)
        if max(t[-1] for t in times.values()) > 5:  # one run of a slow query is enough
            break
    results = {}
    for size, answer in answers.items():
        result = {"seconds": min(times[size]), "median_seconds": statistics.median(times[size])}
        if answer.get("status") == "success":
            result["series"] = len(answer["data"]["result"])
            stats = answer["data"].get("stats", {}).get("samples", {})
            result["samples"] = stats.get("totalQueryableSamples")
        else:
            result["error"] = answer.get("error", "")[:120]
        results[size] = result
    return results


def refresh(prometheus: Prometheus, jobs: list[tuple[str, bool]], end: int) -> float:
    """Every target of a dashboard, CONCURRENCY at a time, as Grafana refreshes it."""
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(lambda job: send(prometheus, job[0], job[1], end), jobs))
    return time.perf_counter() - started


def time_dashboard(servers: dict[int, Prometheus], path: Path, end: int, repeat: int,
                   rate_interval: str) -> dict[int, dict]:
    model = json.loads(path.read_text())
    out: dict[int, dict] = {size: {"panels": {}, "refresh": {}} for size in servers}
    for variant in ("default", "one_node"):
        values = {size: variables(prometheus, model, end, variant == "one_node", rate_interval)
                  for size, prometheus in servers.items()}
        jobs: dict[int, list] = {size: [] for size in servers}
        for panel in panels(model):
            title = substitute(panel["title"], next(iter(values.values())))
            for target in panel["targets"]:
                key = f"{title} [{target['refId']}]" if len(panel["targets"]) > 1 else title
                instant = bool(target.get("instant"))
                exprs = {size: substitute(target["expr"], values[size]) for size in servers}
                for size in servers:
                    jobs[size].append((exprs[size], instant))
                for size, entry in measure_each(servers, exprs, instant, end, repeat).items():
                    out[size]["panels"].setdefault(key, {})[variant] = entry
        times: dict[int, list[float]] = {size: [] for size in servers}
        for _ in range(repeat):
            for size, prometheus in servers.items():
                times[size].append(refresh(prometheus, jobs[size], end))
            if max(t[-1] for t in times.values()) > 20:
                break
        for size in servers:
            out[size]["refresh"][variant] = min(times[size])
    return out


def measure_each(servers: dict[int, Prometheus], exprs: dict[int, str], instant: bool,
                 end: int, repeat: int) -> dict[int, dict]:
    """measure(), where the variables may have resolved differently per fleet."""
    if len(set(exprs.values())) == 1:
        return measure(servers, next(iter(exprs.values())), instant, end, repeat)
    return {size: measure({size: servers[size]}, expr, instant, end, repeat)[size]
            for size, expr in exprs.items()}


def time_rules(servers: dict[int, Prometheus], end: int, repeat: int) -> dict[int, dict]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    out: dict[int, dict] = {size: {} for size in servers}
    for group in groups:
        timed = {size: {} for size in servers}
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            for size, entry in measure(servers, rule["expr"], True, end, repeat).items():
                timed[size][name] = entry
        for size in servers:
            out[size][group["name"]] = {
                "rules": timed[size], "seconds": sum(r["seconds"] for r in timed[size].values())}
    return out
