"""The layers of exporter/ (exporter/__init__.py maps them; docs/how-it-works.md): who may
import whom, and no import circle, read from the source (every import, also those inside
functions and under TYPE_CHECKING).
benchmarks/ is held to no circle as well."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# layer -> the layers it must not import (a layer is a package of exporter/ or a top module)
FORBIDDEN = {
    "kubelet": {"exposition", "refresh", "web", "fit", "kubeapi", "podsapi", "commands",
                "simulator"},
    "fit": {"kubeapi", "podsapi", "refresh", "web", "commands", "simulator"},
    "exposition": {"refresh", "web", "fit", "kubeapi", "podsapi", "commands", "simulator"},
    "web": {"refresh", "fit", "kubeapi", "podsapi", "commands", "simulator"},
    "refresh": {"web", "commands", "simulator"},
    "kubeapi": {"refresh", "web", "fit", "podsapi", "commands", "simulator"},
    # the Pods API's pods become the records the Kubernetes-API view keeps (kubeapi.records)
    "podsapi": {"refresh", "web", "fit", "exposition", "commands", "simulator", "nodemap"},
    # the simulator admits through the fit engine's rules; fit never imports the simulator
    "simulator": {"kubeapi", "podsapi", "refresh", "web", "exposition", "commands"},
    # the node map: drawn from what a refresh has, by whoever serves or prints it
    "nodemap": {"kubelet", "refresh", "web", "kubeapi", "podsapi", "commands", "simulator",
                "exposition"},
}
# the core vocabulary: these import nothing of ours but what is listed
ONLY = {
    "model": set(),
    "issues": {"model"},
    "catalog": {"model"},
    "podspec": {"model"},
    "podcontext": {"podspec", "model"},
    "accounting": {"model", "issues"},
}

# fit's own layers: the mirror of the kubelet's code (fit/kubelet/) imports nothing else of
# ours, so that it reads like the Go it follows and can be checked against it alone; the state
# kept between refreshes (fit/state/) only the mirror and the core vocabulary; the answers and
# their rendering (the rest of fit/) anything fit may.
WITHIN = {
    # podspec: effective_requests (resourcehelper.PodRequests), which pod context sums with too
    "exporter.fit.kubelet": ("exporter.fit.kubelet", "exporter.podspec"),
    "exporter.fit.state": ("exporter.fit.state", "exporter.fit.kubelet", "exporter.model",
                           "exporter.podcontext", "exporter.podspec", "exporter.topology"),
}


def modules(root: str) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under ``root`` (a package)."""
    found = {}
    for path in sorted((REPO / root).rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``name`` imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets |= imported(node, package)
    resolved = set()
    for target in targets:
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            resolved.add(target)
    return resolved


def imported(node: ast.AST, package: str) -> set[str]:
    """The absolute names an import statement in ``package`` names (none for another node)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = package
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    module = ".".join(p for p in (base if node.level else "", node.module or "") if p)
    return {module} | {f"{module}.{alias.name}" for alias in node.names}


def graph(root: str) -> dict[str, set[str]]:
    known = modules(root)
    return {name: imports(name, path, known) for name, path in known.items()}


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


EXPORTER = graph("exporter")


def test_the_graph_is_read():
    assert "exporter.refresh.loop" in EXPORTER
    assert "exporter.kubelet.reader" in EXPORTER["exporter.refresh.loop"]


@pytest.mark.parametrize("source", sorted(FORBIDDEN))
def test_a_layer_imports_only_the_layers_below_it(source):
    wrong = sorted((module, target) for module, targets in EXPORTER.items()
                   if layer(module) == source for target in targets
                   if layer(target) in FORBIDDEN[source])
    assert wrong == []


@pytest.mark.parametrize("source", sorted(ONLY))
def test_the_core_vocabulary_imports_only_the_core(source):
    wrong = sorted((module, target) for module, targets in EXPORTER.items()
                   if layer(module) == source for target in targets
                   if layer(target) not in ONLY[source] | {source, "_proto"})
    assert wrong == []


@pytest.mark.parametrize("package", sorted(WITHIN))
def test_the_kubelet_mirror_and_the_kept_state_import_only_what_they_may(package):
    allowed = WITHIN[package]
    wrong = sorted((module, target) for module, targets in EXPORTER.items()
                   if module == package or module.startswith(package + ".")
                   for target in targets
                   if not any(target == a or target.startswith(a + ".") for a in allowed))
    assert wrong == []


def test_no_import_circle_between_modules():
    assert circles(EXPORTER) == []


def test_no_import_circle_between_layers():
    layers: dict[str, set[str]] = {}
    for module, targets in EXPORTER.items():
        layers.setdefault(layer(module), set()).update(
            layer(t) for t in targets if layer(t) != layer(module))
    assert circles(layers) == []


def test_no_import_circle_in_the_benchmarks():
    assert circles(graph("benchmarks")) == []


# What a default run (serve, no flag beyond the defaults) imports when it starts: the modules
# its entry points import at module level, and theirs. YAML and bcrypt (files and the web
# configuration), the Kubernetes-API view (--kube-api), its optional official client, the
# simulator, and the Pods API's client and v1.Pod schema (loaded only where its socket exists)
# are imported inside the functions that need them. The fit engine is imported when the refresh
# loop is built (the fit view is on by default): not by these modules themselves.
DEFAULT_ENTRY = ("exporter.cli", "exporter.commands.serve", "exporter.refresh.loop",
                 "exporter.web.server")
NOT_BY_DEFAULT = ("exporter.fit", "exporter.kubeapi", "exporter.simulator",
                  "exporter.web.webconfig", "exporter.web.basicauth", "yaml", "bcrypt",
                  "kubernetes", "exporter.podsapi.client", "exporter.podsapi.decode",
                  "exporter._proto.k8s", "exporter._proto.pods",
                  "google.protobuf.descriptor_pb2", "prometheus_client")


def eager_imports(path: Path) -> set[str]:
    """Absolute names of what a module imports when it is loaded: module-level imports, not
    those inside functions or under ``if TYPE_CHECKING:``."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    else:
        package = package.removesuffix(".__init__")
    names: set[str] = set()

    def walk(statements: list[ast.stmt]) -> None:
        for node in statements:
            names.update(imported(node, package))
            if isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                walk(node.body)

    walk(ast.parse(path.read_text(encoding="utf-8")).body)
    return names


def eager_closure(entries: tuple[str, ...]) -> set[str]:
    """Every module loading ``entries`` loads, following module-level imports."""
    known = modules("exporter")
    loaded: set[str] = set()
    pending = list(entries)
    while pending:
        name = pending.pop()
        if name in loaded:
            continue
        loaded.add(name)
        parts = name.split(".")
        parents = {".".join(parts[:n]) for n in range(1, len(parts))}  # packages load first
        for target in eager_imports(known[name]) | (parents & known.keys()):
            while target and target.startswith("exporter") and target not in known:
                target = target.rpartition(".")[0]
            if target in known:
                pending.append(target)
            else:
                loaded.add(target)
    return loaded


def test_a_default_run_imports_no_optional_part():
    loaded = eager_closure(DEFAULT_ENTRY)
    assert "exporter.kubelet.decode" in loaded and "grpc" in loaded  # the walk reaches far
    assert sorted(n for n in loaded if n.startswith(NOT_BY_DEFAULT)) == []


def test_the_fit_answers_and_the_view_render_without_prometheus_client():
    """The fit view is built on every run (it answers the free capacity per NUMA node without
    shapes): it, the fit engine and the Kubernetes-API view write their sections themselves."""
    loaded = eager_closure(("exporter.fit.fitview", "exporter.kubeapi.view"))
    assert "exporter.fit.replay" in loaded and "exporter.exposition.textformat" in loaded
    assert sorted(n for n in loaded if n.startswith("prometheus_client")) == []
