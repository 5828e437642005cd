"""Named pod shapes for the fit answers: the ``--fit-shapes`` file and ``snapshot --shape``.

The file is YAML (JSON is YAML too), the chart renders it from the value ``fitShapes``::

    shapes:
      gpu-train: {cpu: 16, memory: 64Gi, hugepages-1Gi: 8Gi, nvidia.com/gpu: 2}
      dpdk-upf: {cpu: 6, hugepages-1Gi: 8Gi, intel.com/sriov_netdevice: 4}

Requests are exclusive requests in Kubernetes notation: ``cpu`` in whole CPUs (``8`` or
``8000m``; a fraction is never exclusive), ``memory`` and ``hugepages-<size>`` as quantities,
device resources (``vendor.example/name``) as whole devices. Anything else is an error that
names the shape and the resource. :class:`ShapeFile` re-reads the file when it changes; a bad
new version keeps the shapes in use and is logged once.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..podspec import is_extended_resource, parse_quantity
from .engine import CPU, Shape, is_memory_resource

log = logging.getLogger(__name__)

# a shape name becomes the value of the ``shape`` label
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
_HUGEPAGES = re.compile(r"^hugepages-(\d+)(Ki|Mi|Gi|Ti|Pi|Ei)$")
MAX_SHAPES = 100  # each shape adds series per NUMA node and resource
EXPECTED = "cpu, memory, hugepages-<size> or a device resource such as nvidia.com/gpu"


class ShapeError(ValueError):
    """A shape file or a ``--shape`` argument that cannot be used; the message is one line."""


def parse_request(shape: str, resource: object, value: object) -> tuple[str, int]:
    """One ``resource: quantity`` of shape ``shape``, checked: (resource, amount)."""
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
        if amount != int(amount):
            raise ShapeError(f"shape {shape}: cpu must be whole CPUs (a fraction is never "
                             f"exclusive), got {value!r}")
    elif is_memory_resource(resource):
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


def build_shape(name: object, requests: object) -> Shape:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ShapeError(f"bad shape name {name!r}: 1-63 letters, digits, '.', '_' or '-', "
                         "starting and ending with a letter or digit")
    if not isinstance(requests, Mapping) or not requests:
        raise ShapeError(f"shape {name}: expected a map of resource: quantity, got "
                         f"{requests!r}")
    return Shape(name, dict(parse_request(name, r, v) for r, v in requests.items()))


def parse_shapes(document: object) -> tuple[Shape, ...]:
    """The shapes of a loaded document ``{shapes: {name: {resource: quantity}}}``."""
    if not isinstance(document, Mapping) or set(document) != {"shapes"}:
        keys = sorted(map(str, document)) if isinstance(document, Mapping) else None
        raise ShapeError("expected a map with the single key 'shapes'"
                         + (f", got keys {keys}" if keys is not None else ""))
    shapes = document["shapes"]
    if not isinstance(shapes, Mapping) or not shapes:
        raise ShapeError("'shapes' must map at least one shape name to its requests")
    if len(shapes) > MAX_SHAPES:
        raise ShapeError(f"{len(shapes)} shapes; at most {MAX_SHAPES}")
    return tuple(build_shape(name, requests) for name, requests in shapes.items())


def parse_shape_argument(text: str, name: str = "request") -> Shape:
    """``cpu=8,nvidia.com/gpu=2,memory=64Gi`` (``snapshot --shape``)."""
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


def load_shapes(path: str | Path) -> tuple[Shape, ...]:
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


def _identity(path: Path) -> tuple[int, int, int, int] | None:
    """What changes when the file (or the ConfigMap symlink behind it) is replaced."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_ino, stat.st_dev, stat.st_mtime_ns, stat.st_size)


class ShapeFile:
    """The shapes of a ``--fit-shapes`` file, re-read when it changes.

    The first read happens in the constructor and raises :class:`ShapeError` (the command does
    not start). Later, :meth:`current` re-reads a changed file: a bad version keeps the shapes
    in use and logs once, until the file changes again.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._seen = _identity(self.path)
        self.shapes = load_shapes(self.path)
        self.reloads = 0

    def current(self) -> tuple[Shape, ...]:
        identity = _identity(self.path)
        if identity != self._seen:
            self._seen = identity
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
