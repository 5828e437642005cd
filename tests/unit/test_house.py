"""The house rules of exporter/ that a reader relies on, read from the source:

- each package's docstring is its map: every module and subpackage named, and nothing named
  that does not exist. A map entry is a bullet (``- `` or ``* ``), or a ``;``-separated part of
  one, whose head is one or more names in double backquotes (``name``, a subpackage ``name/``)
  or ``:mod:`.name``` before ``: `` or `` — ``;
- no module over 550 lines and no class over 340 (split at a seam, never cut to a number);
- the public classes and functions defined at module level have names unique across
  exporter/, so that a name says which thing it is;
- tests/conftest.py's table of which tests to run for a change names only test files that
  exist.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXPORTER = REPO / "exporter"
GENERATED = {"_proto"}  # generated code (python -m exporter.protogen): no map of its own

MAX_MODULE_LINES = 550
MAX_CLASS_LINES = 340

_NAME = r"(?:``(?P<n1>[A-Za-z_][A-Za-z0-9_]*/?)``|:mod:`[~.]*(?P<n2>[A-Za-z_][A-Za-z0-9_.]*)`)"
_HEAD = re.compile(rf"^\s*{_NAME}(?:\s*(?:,|\+|and)\s*{_NAME})*\s*$".replace("(?P<n1>", "(?:")
                   .replace("(?P<n2>", "(?:"))
_TOKEN = re.compile(_NAME)


def packages() -> list[Path]:
    return sorted(p.parent for p in EXPORTER.rglob("__init__.py")
                  if not GENERATED & set(p.relative_to(EXPORTER).parts))


def members(package: Path) -> set[str]:
    """The modules (``name``) and subpackages (``name/``) of a package."""
    found = {p.stem for p in package.glob("*.py") if not p.stem.startswith("__")}
    found |= {f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").exists()}
    return found


def map_entries(docstring: str) -> set[str]:
    """The names a package docstring's map gives (see the module docstring)."""
    bullets: list[str] = []
    for line in docstring.splitlines():
        stripped = line.strip()
        if stripped.startswith(("- ", "* ")):
            bullets.append(stripped[2:])
        elif bullets and line.startswith("  ") and stripped:
            bullets[-1] += " " + stripped
        else:
            bullets.append("")  # a paragraph ends a bullet
    entries: set[str] = set()
    for bullet in bullets:
        for part in bullet.split(";"):
            head = re.split(r": | — ", part, maxsplit=1)[0]
            if head != part and _HEAD.match(head):
                for match in _TOKEN.finditer(head):
                    name = match.group("n1") or match.group("n2")
                    entries.add(name.rpartition(".")[2] if "." in name else name)
    return entries


def normalised(names: set[str], package: Path) -> set[str]:
    """``name`` names a subpackage as well as a module."""
    return {f"{n}/" if not n.endswith("/") and (package / n / "__init__.py").exists() else n
            for n in names}


@pytest.mark.parametrize("package", packages(), ids=lambda p: str(p.relative_to(REPO)))
def test_each_package_docstring_maps_every_module_and_only_those(package):
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    named = normalised(map_entries(docstring), package)
    have = members(package)
    assert sorted(have - named) == [], "missing from the map"
    assert sorted(named - have) == [], "named in the map, not in the package"


def test_the_map_reader_reads_the_forms_the_maps_use():
    assert map_entries("""Intro naming ``client``: not a bullet.

- ``a``: one; ``b``: two, with ``not_a_module`` inside;
- ``c``, ``d/`` and ``e``: three
  continued, ``f``: not a head;
* :mod:`.g` — seven
- the rest, here:
""") == {"a", "b", "c", "d/", "e", "g"}


def _sources() -> list[Path]:
    return sorted(p for p in EXPORTER.rglob("*.py")
                  if not GENERATED & set(p.relative_to(EXPORTER).parts))


def test_no_module_is_over_the_size_a_reader_takes_in():
    long = {str(p.relative_to(REPO)): n for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_class_is_over_the_size_a_reader_takes_in():
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                size = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if size > MAX_CLASS_LINES:
                    long[f"{path.relative_to(REPO)}:{node.name}"] = size
    assert long == {}


# Names several modules define on purpose: each command's entry point, and the wrappers of
# commands/demo.py around the simulator's functions of the same name (they turn its errors into
# usage errors).
SHARED_NAMES = {"main", "load_profile", "simulate"}


def test_public_classes_and_functions_have_names_unique_across_the_package():
    where: dict[str, list[str]] = {}
    for path in _sources():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and not node.name.startswith("_") and node.name not in SHARED_NAMES:
                where.setdefault(node.name, []).append(str(path.relative_to(REPO)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}


def test_the_change_table_names_only_test_files_that_exist():
    """tests/conftest.py's table of which tests to run for a change."""
    table = ast.get_docstring(ast.parse((REPO / "tests" / "conftest.py").read_text())) or ""
    named = set(re.findall(r"\b(test_[a-z0-9_*]+\.py)\b", table))
    files = [p.name for p in (REPO / "tests").rglob("test_*.py")]
    assert named and sorted(n for n in named if not fnmatch.filter(files, n)) == []
