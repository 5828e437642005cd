"""The fleet benchmark's tables, extrapolated linearly to the fleet of interest."""

from __future__ import annotations


def extrapolate(points: list[tuple[int, float]], target: int) -> float:
    """Linear in the number of nodes from the two largest fleets (never below the largest)."""
    (n1, t1), (n2, t2) = sorted(points)[-2:]
    return t2 + max(0.0, (t2 - t1) / (n2 - n1)) * (target - n2)


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def cell(entry: dict) -> str:
    text = ms(entry["seconds"])
    if "error" in entry:
        return f"error after {text}"
    return f"{text} ({entry['series']})"


SUMMARY = (
    ("Kubelet call latency (p99)", "exporter-health", "Kubelet call latency (p99)", "default"),
    ("GPU memory used by pod", "numa-overview", "GPU memory used by pod", "default"),
    ("Data issues by kind", "exporter-health", "Data issues by kind", "default"),
)


def report(results: dict, target: int) -> str:
    sizes = sorted(results["fleets"], key=int)
    lines = []
    head = ("| nodes (series) | " + " | ".join(title for title, *_ in SUMMARY)
            + " | slowest panel, defaults | slowest panel, one node | slowest rule group | "
            "exporter-health refresh, defaults / one node |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    series_points: dict[str, list] = {}

    def row_for(size: str) -> list[float]:
        fleet = results["fleets"][size]
        values = []
        for _, dashboard, panel, variant in SUMMARY:
            values.append(fleet["dashboards"][dashboard]["panels"][panel][variant]["seconds"])
        for variant in ("default", "one_node"):
            values.append(max(p[variant]["seconds"] for d in fleet["dashboards"].values()
                              for p in d["panels"].values()))
        values.append(max(g["seconds"] for g in fleet["rules"].values()))
        health = fleet["dashboards"]["exporter-health"]["refresh"]
        values += [health["default"], health["one_node"]]
        return values

    for size in sizes:
        fleet = results["fleets"][size]
        values = row_for(size)
        for index, value in enumerate(values):
            series_points.setdefault(index, []).append((int(size), value))
        lines.append(f"| {int(size):,} ({fleet['facts']['series'] / 1000:.0f} k) | "
                     + " | ".join(ms(v) for v in values[:-2])
                     + f" | {ms(values[-2])} / {ms(values[-1])} |")
    if len(sizes) >= 2:
        extra = [extrapolate(series_points[i], target) for i in sorted(series_points)]
        lines.append(f"| {target:,}, extrapolated | " + " | ".join(ms(v) for v in extra[:-2])
                     + f" | {ms(extra[-2])} / {ms(extra[-1])} |")
    lines.append("")
    # per panel
    head = ("| dashboard / panel | " + " | ".join(f"{int(s):,}: defaults / one node"
                                                  for s in sizes)
            + f" | {target:,} extrapolated, defaults / one node |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    largest = results["fleets"][sizes[-1]]
    for dashboard, timing in largest["dashboards"].items():
        for panel in timing["panels"]:
            cells, points = [], {"default": [], "one_node": []}
            for size in sizes:
                entry = results["fleets"][size]["dashboards"][dashboard]["panels"][panel]
                cells.append(f"{cell(entry['default'])} / {cell(entry['one_node'])}")
                for variant in points:
                    points[variant].append((int(size), entry[variant]["seconds"]))
            extra = (" / ".join(ms(extrapolate(points[v], target)) for v in points)
                     if len(sizes) >= 2 else "")
            lines.append(f"| {dashboard} / {panel} | " + " | ".join(cells) + f" | {extra} |")
        cells, points = [], {"default": [], "one_node": []}
        for size in sizes:
            refresh = results["fleets"][size]["dashboards"][dashboard]["refresh"]
            cells.append(f"{ms(refresh['default'])} / {ms(refresh['one_node'])}")
            for variant in points:
                points[variant].append((int(size), refresh[variant]))
        extra = (" / ".join(ms(extrapolate(points[v], target)) for v in points)
                 if len(sizes) >= 2 else "")
        lines.append(f"| **{dashboard}: whole refresh** | " + " | ".join(cells) + f" | {extra} |")
    lines.append("")
    head = ("| rule group / rule | " + " | ".join(f"{int(s):,}" for s in sizes)
            + f" | {target:,} extrapolated |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for group, timing in largest["rules"].items():
        for name in [*timing["rules"], None]:
            points, cells = [], []
            for size in sizes:
                group_timing = results["fleets"][size]["rules"][group]
                entry = group_timing["rules"][name] if name else {
                    "seconds": group_timing["seconds"], "series": None}
                points.append((int(size), entry["seconds"]))
                cells.append(cell(entry) if name else f"**{ms(entry['seconds'])}**")
            extra = ms(extrapolate(points, target)) if len(sizes) >= 2 else ""
            label = f"{group} / {name}" if name else f"**{group}: whole group**"
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {extra} |")
    return "\n".join(lines)


def series_report(costs: dict) -> str:
    lines = ["| profile | pods | series per node: node / workload (device info) / health = total"
             " | --no-device-info | --no-workload-metrics | both | series ended + begun per pod "
             "replaced |", "|---|---:|---|---:|---:|---:|---|"]
    for profile, entry in costs.items():
        d = entry["default"]
        lines.append(
            f"| {profile} | {d['pods']} | {d.get('node', 0)} / {d.get('workload', 0)} "
            f"({d['device_info']}) / {d.get('health', 0)} = {d['total']} | "
            f"{entry['--no-device-info']['total']} | {entry['--no-workload-metrics']['total']} | "
            f"{entry['both']['total']} | {d['churn']['ended_per_pod']:.1f} + "
            f"{d['churn']['began_per_pod']:.1f} |")
    return "\n".join(lines)
