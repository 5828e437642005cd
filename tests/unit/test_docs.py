"""The documents a user reads hold together, read from the files:

- every relative link in README.md, CONTRIBUTING.md, CHANGELOG.md, SECURITY.md, docs/ and the
  chart's README names a file that exists, and an anchor names a heading of it (GitHub's ids);
- README.md stays a front page (at most 300 lines; the detail lives in docs/);
- every flag of the command line is documented, in docs/configuration.md or, for the
  simulator's own, docs/simulator.md;
- CHANGELOG.md has Keep a Changelog's shape: ``## [Unreleased]`` first, then ``## [X.Y.Z] -
  YYYY-MM-DD`` sections, their changes grouped under Added, Changed, Deprecated, Removed, Fixed
  and Security, one line per change.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md",
                    REPO / "SECURITY.md", REPO / "charts" / "podresources-exporter" / "README.md",
                    *(REPO / "docs").glob("*.md")])

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"(`+).+?\1", re.DOTALL)
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^\[[^\]]+\]:\s*(\S+)",
                   re.MULTILINE)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_HTML_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")


def prose(text: str) -> str:
    """The text without fenced blocks and code spans, where brackets are not links."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    found: set[str] = set(_HTML_ID.findall(text))
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    return [a or b for a, b in _LINK.findall(prose(path.read_text(encoding="utf-8")))]


def test_the_reader_finds_links_and_headings_as_github_does(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("See [a](docs/a.md#x-y) and `[not](a link)`.\n```\n[no](b.md)\n```\n"
                    "[ref]: https://example.com\n\n## A `b`\n\n## A b\n")
    assert links(page) == ["docs/a.md#x-y", "https://example.com"]
    assert anchors(page) == {"a-b", "a-b-1"}
    assert slug("The node map: `/numa` and `snapshot --format svg|html`") == (
        "the-node-map-numa-and-snapshot---format-svghtml")
    assert slug("The kubelet's local Pods API (KEP-4188)") == "the-kubelets-local-pods-api-kep-4188"
    assert slug("3. Since when: the `PodsAPI` feature gate") == (
        "3-since-when-the-podsapi-feature-gate")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_names_a_file_and_heading_that_exist(document):
    broken = []
    for target in links(document):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (document.parent / file_part).resolve() if file_part else document
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(REPO)}")
    assert broken == []


def test_the_readme_is_a_front_page():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail to docs/"
    for heading in ("## Quick start", "## Deploy", "## What it exports", "## Documentation"):
        assert heading in lines
    assert "bash tests/run.sh" in lines  # the test command CI runs (.ci/run)


def test_every_flag_is_documented():
    from exporter.cli import FLAGS

    documented = ((REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
                  + (REPO / "docs" / "simulator.md").read_text(encoding="utf-8"))
    missing = sorted({flag.name for flag in FLAGS
                      if not re.search(rf"`{re.escape(flag.name)}[` ]", documented)})
    assert missing == []


SECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
RELEASE = re.compile(r"## \[(Unreleased|\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)\]( - \d{4}-\d{2}-\d{2})?")


def changelog_problems(text: str) -> list[str]:
    """What keeps a changelog from Keep a Changelog's shape, one line per change."""
    found = []
    releases = []
    section = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            match = RELEASE.fullmatch(line)
            if not match or (match.group(1) == "Unreleased") == bool(match.group(2)):
                found.append(f"line {number}: not '## [Unreleased]' or '## [X.Y.Z] - YYYY-MM-DD'")
            releases.append(match.group(1) if match else line)
            section = None
        elif line.startswith("### "):
            section = line[4:]
            if not releases or section not in SECTIONS:
                found.append(f"line {number}: {line!r} is not one of {', '.join(SECTIONS)}")
        elif releases and line.startswith("[") and "]: " in line:
            continue  # the link references at the bottom
        elif releases and line.strip() and (not line.startswith("- ") or section is None):
            found.append(f"line {number}: a change is one line '- ...' under a ### section")
    if not releases or releases[0] != "Unreleased":
        found.append("the first section is not '## [Unreleased]'")
    return found


def test_the_changelog_checker_finds_what_breaks_the_form():
    good = ("# Changelog\n\nIntro.\n\n## [Unreleased]\n\n### Added\n\n- A flag.\n\n"
            "## [0.1.0] - 2026-12-01\n\n### Fixed\n\n- A crash.\n\n"
            "[Unreleased]: https://example.com\n")
    assert changelog_problems(good) == []
    assert changelog_problems(good.replace("- A flag.\n", "- A flag that\n  wraps.\n")) == [
        "line 10: a change is one line '- ...' under a ### section"]
    assert changelog_problems(good.replace("### Added", "### New")) == [
        "line 7: '### New' is not one of Added, Changed, Deprecated, Removed, Fixed, Security"]
    assert changelog_problems(good.replace(" - 2026-12-01", "")) == [
        "line 11: not '## [Unreleased]' or '## [X.Y.Z] - YYYY-MM-DD'"]


def test_the_changelog_keeps_a_changelogs_form():
    assert changelog_problems((REPO / "CHANGELOG.md").read_text(encoding="utf-8")) == []
