"""Write the dashboards' JSON and the rules, for Prometheus, the Helm chart and the mixin.

    python -m dashboards.generate           # (re)write every generated file
    python -m dashboards.generate --check   # exit 1, naming the files, if any is out of date

``dashboards/*.json`` are pretty-printed for review; the chart gets minified copies (one ConfigMap
per dashboard, well under the 1 MiB ConfigMap and 256 KiB last-applied-annotation limits, and
the same JSON in grafana-operator's GrafanaDashboard), because Helm reads files only from inside
the chart directory. The same dashboards as Perses dashboards (``perses.py``):
``dashboards/perses/*.json`` are PersesDashboard resources for ``kubectl apply``, the chart's
``files/perses/*.json`` their ``spec.config``, which its PersesDashboard template wraps. The
rules (``rules.py``) become the plain rule file
``dashboards/rules/podresources-exporter.rules.yaml``, the chart's ``templates/_rules.tpl``
(with the per-alert part of ``values.schema.json``) and the mixin's ``mixin/rules.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import cluster, health, overview, perses, rule_files, rules

REPO = Path(__file__).resolve().parent.parent
DASHBOARD_DIR = REPO / "dashboards"
RULES = DASHBOARD_DIR / "rules" / "podresources-exporter.rules.yaml"
CHART = REPO / "charts" / "podresources-exporter"
CHART_FILES = CHART / "files"
CHART_DASHBOARDS = CHART_FILES / "dashboards"
CHART_PERSES = CHART_FILES / "perses"
PERSES_DIR = DASHBOARD_DIR / "perses"
CHART_RULES_TEMPLATE = CHART / "templates" / "_rules.tpl"
CHART_SCHEMA = CHART / "values.schema.json"
MIXIN = REPO / "mixin"
MIXIN_RULES = MIXIN / "rules.json"
MIXIN_DASHBOARDS = MIXIN / "dashboards"

DASHBOARDS = {
    "numa-overview": overview,
    "cluster-topology-fit": cluster,
    "exporter-health": health,
}
# Where generated files live; anything else matching these patterns is stale.
GENERATED = ((DASHBOARD_DIR, "*.json"), (CHART_DASHBOARDS, "*.json"), (MIXIN_DASHBOARDS, "*.json"),
             (PERSES_DIR, "*.json"), (CHART_PERSES, "*.json"))


def outputs() -> dict[Path, str]:
    """Every generated file and its content."""
    files: dict[Path, str] = {}
    for name, module in DASHBOARDS.items():
        model = module.build()
        files[DASHBOARD_DIR / f"{name}.json"] = json.dumps(
            model, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        minified = json.dumps(model, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        files[CHART_DASHBOARDS / f"{name}.json"] = minified
        files[MIXIN_DASHBOARDS / f"{name}.json"] = minified
        files[PERSES_DIR / f"{name}.json"] = json.dumps(
            perses.resource(model["uid"], model), indent=2, ensure_ascii=False) + "\n"
        files[CHART_PERSES / f"{name}.json"] = json.dumps(
            perses.dashboard_spec(model), separators=(",", ":"), ensure_ascii=False)
    files[RULES] = rule_files.plain_rule_file()
    files[CHART_RULES_TEMPLATE] = rule_files.chart_template()
    files[MIXIN_RULES] = rule_files.mixin_rules()
    files[CHART_SCHEMA] = schema_with_alerts()
    return files


def schema_with_alerts() -> str:
    """values.schema.json with prometheusRule.alerts describing exactly the rules' alerts."""
    schema = json.loads(CHART_SCHEMA.read_text(encoding="utf-8"))
    properties = schema["properties"]["prometheusRule"]["properties"]
    properties["alerts"] = rule_files.schema_alerts()
    properties["disabled"]["items"] = {"type": "string", "enum": list(rules.ALERT_NAMES)}
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def stale(files: dict[Path, str]) -> list[Path]:
    """Generated files that differ from the code, are missing, or are left over."""
    found = {path for directory, pattern in GENERATED for path in directory.glob(pattern)}
    differing = [path for path, content in files.items()
                 if not path.exists() or path.read_text(encoding="utf-8") != content]
    return sorted(differing + [path for path in found if path not in files])


def write(files: dict[Path, str]) -> None:
    for directory, pattern in GENERATED:
        for path in directory.glob(pattern):
            if path not in files:
                path.unlink()
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.generate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="do not write; fail if a generated file is out of date")
    args = parser.parse_args(argv)
    files = outputs()
    if args.check:
        out_of_date = stale(files)
        for path in out_of_date:
            print(f"out of date: {path.relative_to(REPO)}", file=sys.stderr)
        if out_of_date:
            print("run: python -m dashboards.generate", file=sys.stderr)
        return 1 if out_of_date else 0
    write(files)
    for path in files:
        print(path.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
