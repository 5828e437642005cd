"""Named pod shapes for the fit answers: the ``--fit-shapes`` file and ``snapshot --shape``.

The file is YAML (JSON is YAML too), the chart renders it from the value ``fitShapes``::

    shapes:
      gpu-train: {cpu: 16, memory: 64Gi, hugepages-1Gi: 8Gi, nvidia.com/gpu: 2}
      upf:
        initContainers:
          - {cpu: 2, memory: 1Gi}                  # a regular init container
          - {cpu: 1, memory: 256Mi, sidecar: true} # restartable init container (sidecar)
        containers:
          - {cpu: 8, memory: 16Gi, intel.com/sriov_vf: 2}
          - {cpu: 500m, memory: 1Gi}               # not whole CPUs: the shared pool
      batch: {qos: Burstable, containers: [{cpu: 4, nvidia.com/gpu: 1}]}

A flat map is a one-container pod. Requests are in Kubernetes notation: ``cpu`` (``8``,
``500m``), ``memory`` and ``hugepages-<size>`` as quantities, device resources
(``vendor.example/name``) as whole devices; ``qos`` is ``Guaranteed`` (the default: requests
equal limits), ``Burstable`` or ``BestEffort``. A container may carry a ``name``; an init
container ``sidecar: true``. Anything else is an error naming the shape and the resource.
:class:`ShapeFile` re-reads the file when it changes; a bad new version keeps the shapes in use
and is logged once.
"""

from __future__ import annotations

import functools
import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..files import FileStamp
from ..podspec import is_extended_resource, parse_quantity
from .kubelet.podshape import (
    BEST_EFFORT,
    CPU,
    GUARANTEED,
    QOS_CLASSES,
    ContainerShape,
    PodShape,
    is_memory_resource,
)

log = logging.getLogger(__name__)

Shape = PodShape  # a named shape is a pod

# a shape name becomes the value of the ``shape`` label
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
_HUGEPAGES = re.compile(r"^hugepages-(\d+)(Ki|Mi|Gi|Ti|Pi|Ei)$")
MAX_SHAPES = 100  # each shape adds series per NUMA node and resource
MAX_CONTAINERS = 32
EXPECTED = "cpu, memory, hugepages-<size> or a device resource such as nvidia.com/gpu"
_STRUCTURE = ("containers", "initContainers", "qos")


class ShapeName(str):
    """``snapshot --shape NAME``: a shape of ``--fit-shapes``, looked up once it is read."""


class ShapeError(ValueError):
    """A shape file or a ``--shape`` argument that cannot be used; the message is one line."""


def parse_request(shape: str, resource: object, value: object) -> tuple[str, int]:
    """One ``resource: quantity`` of shape ``shape``, checked: (resource, amount); ``cpu`` in
    millicores."""
    if not isinstance(resource, str) or not resource:
        raise ShapeError(f"shape {shape}: resource names must be strings, got {resource!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ShapeError(f"shape {shape}: {resource} must be a quantity, got {value!r}")
    try:
        amount = parse_quantity(value)
    except ValueError:
        raise ShapeError(f"shape {shape}: {resource}: not a Kubernetes quantity: "
                         f"{value!r}") from None
    if not math.isfinite(amount) or amount <= 0:
        raise ShapeError(f"shape {shape}: {resource} must be more than 0, got {value!r}")
    if resource == CPU:
        millis = amount * 1000
        if millis != int(millis):
            raise ShapeError(f"shape {shape}: cpu must be whole millicores, got {value!r}")
        return resource, int(millis)
    if is_memory_resource(resource):
        if resource != "memory" and not _HUGEPAGES.match(resource):
            raise ShapeError(f"shape {shape}: unknown resource {resource!r} (hugepages are "
                             "named like hugepages-2Mi or hugepages-1Gi)")
        if amount != int(amount):
            raise ShapeError(f"shape {shape}: {resource} must be whole bytes, got {value!r}")
    elif is_extended_resource(resource):
        if amount != int(amount):
            raise ShapeError(f"shape {shape}: {resource} must be whole devices, got {value!r}")
    else:
        raise ShapeError(f"shape {shape}: unknown resource {resource!r} (expected {EXPECTED})")
    return resource, int(amount)


def _container(shape: str, spec: object, default_name: str, init: bool) -> ContainerShape:
    if not isinstance(spec, Mapping) or not spec:
        raise ShapeError(f"shape {shape}: a container must be a map of resource: quantity, got "
                         f"{spec!r}")
    name = spec.get("name", default_name)
    if not isinstance(name, str) or not _NAME.match(name):
        raise ShapeError(f"shape {shape}: bad container name {name!r}")
    sidecar = spec.get("sidecar", False)
    if not isinstance(sidecar, bool):
        raise ShapeError(f"shape {shape}: sidecar must be true or false, got {sidecar!r}")
    if sidecar and not init:
        raise ShapeError(f"shape {shape}: sidecar: true belongs to an init container")
    requests = dict(parse_request(shape, r, v) for r, v in spec.items()
                    if r not in ("name", "sidecar"))
    if not requests:
        raise ShapeError(f"shape {shape}: container {name} requests nothing")
    return ContainerShape(name, requests, sidecar)


def _containers(shape: str, items: object, key: str, prefix: str) -> tuple[ContainerShape, ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise ShapeError(f"shape {shape}: {key} must be a list of containers")
    if len(items) > MAX_CONTAINERS:
        raise ShapeError(f"shape {shape}: {len(items)} {key}; at most {MAX_CONTAINERS}")
    found = tuple(_container(shape, item, f"{prefix}-{i}", key == "initContainers")
                  for i, item in enumerate(items))
    names = [c.name for c in found]
    if len(set(names)) != len(names):
        raise ShapeError(f"shape {shape}: container names must differ, got {names}")
    return found


def build_shape(name: object, spec: object) -> PodShape:
    """A flat map (one container) or ``{qos, initContainers, containers}``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ShapeError(f"bad shape name {name!r}: 1-63 letters, digits, '.', '_' or '-', "
                         "starting and ending with a letter or digit")
    if not isinstance(spec, Mapping) or not spec:
        raise ShapeError(f"shape {name}: expected a map of resource: quantity, got {spec!r}")
    qos = spec.get("qos", GUARANTEED)
    if qos not in QOS_CLASSES:
        raise ShapeError(f"shape {name}: qos must be one of {', '.join(QOS_CLASSES)}, got "
                         f"{qos!r}")
    if "containers" in spec or "initContainers" in spec:
        extra = sorted(str(k) for k in spec if k not in _STRUCTURE)
        if extra:
            raise ShapeError(f"shape {name}: {extra[0]!r} beside containers (put requests in a "
                             "container)")
        containers = _containers(name, spec.get("containers"), "containers", "container")
        if not containers:
            raise ShapeError(f"shape {name}: containers must list at least one container")
        inits = _containers(name, spec.get("initContainers"), "initContainers", "init")
        if {c.name for c in containers} & {c.name for c in inits}:
            raise ShapeError(f"shape {name}: an init container and a container share a name")
    else:
        flat = {k: v for k, v in spec.items() if k != "qos"}
        if not flat:
            raise ShapeError(f"shape {name}: requests nothing")
        containers = (_container(name, flat, "main", False),)
        inits = ()
    if qos == BEST_EFFORT and any(CPU in c.requests or "memory" in c.requests
                                  for c in containers + inits):
        raise ShapeError(f"shape {name}: a BestEffort pod requests no cpu or memory")
    return PodShape(name, containers, inits, qos)


def parse_shapes(document: object) -> tuple[PodShape, ...]:
    """The shapes of a loaded document ``{shapes: {name: shape}}``."""
    if not isinstance(document, Mapping) or set(document) != {"shapes"}:
        keys = sorted(map(str, document)) if isinstance(document, Mapping) else None
        raise ShapeError("expected a map with the single key 'shapes'"
                         + (f", got keys {keys}" if keys is not None else ""))
    shapes = document["shapes"]
    if not isinstance(shapes, Mapping) or not shapes:
        raise ShapeError("'shapes' must map at least one shape name to its requests")
    if len(shapes) > MAX_SHAPES:
        raise ShapeError(f"{len(shapes)} shapes; at most {MAX_SHAPES}")
    return tuple(build_shape(name, spec) for name, spec in shapes.items())


def parse_shape_argument(text: str, name: str = "request") -> PodShape:
    """``cpu=8,nvidia.com/gpu=2,memory=64Gi`` (``snapshot --shape``): one container."""
    requests: dict[str, str] = {}
    for part in text.split(","):
        resource, sep, value = part.strip().partition("=")
        if not sep or not resource.strip() or not value.strip():
            raise ShapeError(f"expected RESOURCE=QUANTITY[,RESOURCE=QUANTITY...], got {text!r}")
        if resource.strip() in requests:
            raise ShapeError(f"{resource.strip()} given twice in {text!r}")
        requests[resource.strip()] = value.strip()
    return build_shape(name, requests)


def _mapping(loader: Any, node: Any) -> dict[Any, Any]:
    """A YAML mapping, refusing a key given twice (YAML would keep the last silently)."""
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node)
        if key in mapping:
            raise ShapeError(f"{key!r} given twice (line {key_node.start_mark.line + 1})")
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


@functools.cache
def _unique_key_loader() -> Any:
    """A SafeLoader that refuses a key given twice; YAML is imported only with --fit-shapes."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
    return UniqueKeyLoader


def load_shapes(path: str | Path) -> tuple[PodShape, ...]:
    """Read and check a shape file; :class:`ShapeError` with a one-line reason otherwise."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ShapeError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") \
            from None
    import yaml

    try:
        document = yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or "not valid YAML"
        raise ShapeError(f"{path}: {problem}{where}") from None
    try:
        return parse_shapes(document)
    except ShapeError as error:
        raise ShapeError(f"{path}: {error}") from None


class ShapeFile:
    """The shapes of a ``--fit-shapes`` file, re-read when it changes.

    The first read happens in the constructor and raises :class:`ShapeError` (the command does
    not start). Later, :meth:`current` re-reads a changed file: a bad version keeps the shapes
    in use and logs once, until the file changes again.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._stamp = FileStamp(self.path)
        self.shapes = load_shapes(self.path)
        self.reloads = 0

    def current(self) -> tuple[PodShape, ...]:
        if self._stamp.changed():
            try:
                shapes = load_shapes(self.path)
            except ShapeError as error:
                log.warning("keeping the %d fit shapes in use: %s", len(self.shapes), error)
            else:
                if shapes != self.shapes:
                    log.info("fit shapes re-read from %s: %s", self.path,
                             ", ".join(s.name for s in shapes))
                self.shapes = shapes
                self.reloads += 1
        return self.shapes
