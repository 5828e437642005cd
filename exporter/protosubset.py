"""Cut Kubernetes' ``generated.proto`` files down to the messages and fields the exporter reads.

The kubelet's Pods API sends each pod as a Kubernetes-protobuf-encoded ``v1.Pod``. The real
``k8s.io/api/core/v1/generated.proto`` describes some 250 messages, and its compiled Python
module adds about 2.4 MiB to the exporter's resident memory once imported; the exporter reads
about twenty fields. :func:`subset` keeps exactly the messages and fields named in ``KEEP``, each
field with its type, label, number and comment as the real file has them, so the subset decodes
the same bytes (the fields left out are skipped as unknown ones). It is run by
``python -m exporter.protogen``, from the real files under ``protos/k8s.io/``, never by hand.

The files are simple enough to cut mechanically: top-level ``message`` blocks whose bodies are
fields (``optional``/``repeated``/``map<...>``) and comments only. Anything else in a block, a
kept field that is missing, or a kept field whose message type is not kept, is an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Message (full name) -> the fields kept, by name. Each message type a kept field refers to
# must be kept too.
KEEP: dict[str, tuple[str, ...]] = {
    "k8s.io.api.core.v1.Pod": ("metadata", "spec", "status"),
    "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta": ("name", "namespace", "uid"),
    "k8s.io.api.core.v1.PodSpec": ("initContainers", "containers", "nodeName", "overhead",
                                   "resources"),
    "k8s.io.api.core.v1.Container": ("name", "resources", "restartPolicy"),
    "k8s.io.api.core.v1.ResourceRequirements": ("limits", "requests"),
    "k8s.io.apimachinery.pkg.api.resource.Quantity": ("string",),
    "k8s.io.api.core.v1.PodStatus": ("phase", "message", "reason", "qosClass",
                                     "extendedResourceClaimStatus"),
    "k8s.io.api.core.v1.PodExtendedResourceClaimStatus": ("requestMappings",
                                                          "resourceClaimName"),
    "k8s.io.api.core.v1.ContainerExtendedResourceRequest": ("containerName", "resourceName",
                                                            "requestName"),
}

_FIELD = re.compile(r"^\s*(?:(optional|repeated) ([\w.]+)|map<\s*\w+\s*,\s*([\w.]+)\s*>) "
                    r"(\w+) = (\d+);$")
_SCALARS = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
            "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"}


class SubsetError(Exception):
    """The source does not look as expected, or ``KEEP`` names what is not there."""


@dataclass
class _Message:
    name: str
    comment: list[str]
    fields: dict[str, tuple[list[str], str, str]] = field(default_factory=dict)
    # field name -> (its comment lines, its line, its value type as written)


@dataclass
class ProtoFile:
    """One parsed ``generated.proto``: its preamble lines and its messages."""

    package: str
    syntax: str
    options: list[str]
    imports: list[str]
    messages: dict[str, _Message]


def parse(text: str) -> ProtoFile:
    package = syntax = ""
    options: list[str] = []
    imports: list[str] = []
    messages: dict[str, _Message] = {}
    comment: list[str] = []
    current: _Message | None = None
    in_block = False  # inside a /* ... */ comment (the licence header)
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if in_block or stripped.startswith("/*"):
            in_block = not stripped.endswith("*/")
            continue
        if stripped.startswith("//"):
            comment.append(line)
            continue
        if current is not None:
            if stripped == "}":
                messages[current.name] = current
                current, comment = None, []
            elif stripped:
                match = _FIELD.match(line)
                if not match:
                    raise SubsetError(f"line {number}: not a field: {stripped!r}")
                value_type = match.group(2) or match.group(3)
                current.fields[match.group(4)] = (comment, line, value_type)
                comment = []
            else:
                comment = []
            continue
        if stripped.startswith("message ") and stripped.endswith("{"):
            current = _Message(stripped.split()[1], comment)
        elif stripped.startswith("package "):
            package = stripped[len("package "):].rstrip(";").strip()
        elif stripped.startswith("syntax "):
            syntax = stripped
        elif stripped.startswith("option "):
            options.append(stripped)
        elif stripped.startswith("import "):
            imports.append(stripped.split('"')[1])
        elif stripped:
            raise SubsetError(f"line {number}: unexpected {stripped!r}")
        comment = []
    if current is not None:
        raise SubsetError(f"message {current.name} is not closed")
    return ProtoFile(package, syntax, options, imports, messages)


def _full_name(value_type: str, package: str) -> str | None:
    """The message a field's type names (None for a scalar)."""
    if value_type in _SCALARS:
        return None
    return value_type[1:] if value_type.startswith(".") else f"{package}.{value_type}"


def subset(files: dict[str, str], rename_import: dict[str, str], header: dict[str, str],
           keep: dict[str, tuple[str, ...]] = KEEP) -> dict[str, str]:
    """The subset of each file (by import path, e.g. ``k8s.io/api/core/v1/generated.proto``):
    the messages of ``keep`` defined in it, in the file's order, with only the fields named,
    importing only what those fields need; ``rename_import`` maps each import path to the path
    its subset is imported as; ``header`` gives each file's opening comment (its origin)."""
    parsed = {path: parse(text) for path, text in files.items()}
    defined = {f"{proto.package}.{name}": path for path, proto in parsed.items()
               for name in proto.messages}
    missing = sorted(set(keep) - set(defined))
    if missing:
        raise SubsetError(f"not in the sources: {', '.join(missing)}")
    out: dict[str, str] = {}
    for path, proto in parsed.items():
        lines = [f"// {line}" if line else "//" for line in header[path].splitlines()]
        lines += ["", proto.syntax, "", f"package {proto.package};"]
        body: list[str] = []
        needed: set[str] = set()
        for name, message in proto.messages.items():
            full = f"{proto.package}.{name}"
            if full not in keep:
                continue
            body += ["", *message.comment, f"message {name} {{"]
            for wanted in keep[full]:
                if wanted not in message.fields:
                    raise SubsetError(f"{full} has no field {wanted}")
                comment, line, value_type = message.fields[wanted]
                target = _full_name(value_type, proto.package)
                if target is not None:
                    if target not in keep:
                        raise SubsetError(f"{full}.{wanted} is a {target}, which is not kept")
                    needed.add(defined[target])
                body += [*comment, line, ""]
            if body[-1] == "":
                body.pop()
            body.append("}")
        imports = [f'import "{rename_import[i]}";' for i in proto.imports if i in needed - {path}]
        lines += ["", *imports] if imports else []
        lines += ["", *proto.options, *body, ""]
        out[path] = "\n".join(lines)
    return out
