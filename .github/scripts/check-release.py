"""Check that a release tag matches everything that carries the version, before anything is built.

    python .github/scripts/check-release.py v0.2.0

The tag must be v<version> where <version> is exporter.__version__, the chart's version and
appVersion, the image in the chart's artifacthub.io/images annotation, and a "## [<version>]"
section of CHANGELOG.md. Exits 1 naming every mismatch.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def problems(tag: str) -> list[str]:
    found = []
    match = re.fullmatch(r"v(\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)", tag)
    if not match:
        return [f"tag {tag!r} is not v<major>.<minor>.<patch>[-<pre-release>]"]
    version = match.group(1)
    source = (REPO / "exporter" / "__init__.py").read_text(encoding="utf-8")
    package = re.search(r'^__version__ = "([^"]+)"$', source, re.MULTILINE)
    if not package or package.group(1) != version:
        found.append(f"exporter/__init__.py has __version__ {package and package.group(1)}")
    chart = yaml.safe_load((REPO / "charts" / "podresources-exporter" / "Chart.yaml")
                           .read_text(encoding="utf-8"))
    for key in ("version", "appVersion"):
        if str(chart[key]) != version:
            found.append(f"Chart.yaml has {key} {chart[key]}")
    images = yaml.safe_load(chart["annotations"]["artifacthub.io/images"])
    if not all(image["image"].endswith(f":{version}") for image in images):
        found.append("Chart.yaml's artifacthub.io/images names another tag")
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    if not re.search(rf"^## \[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}$", changelog,
                     re.MULTILINE):
        found.append(f"CHANGELOG.md has no '## [{version}] - YYYY-MM-DD' section")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    found = problems(argv[0])
    for problem in found:
        print(f"{argv[0]}: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
