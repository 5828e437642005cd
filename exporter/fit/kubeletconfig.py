"""The kubelet's configuration file (``--kubelet-config``), read for the fit answers.

The kubelet's ``KubeletConfiguration`` (``kubelet.config.k8s.io/v1beta1``, usually
``/var/lib/kubelet/config.yaml``) says which Topology Manager policy and scope decide admission
and whether the CPU manager's ``full-pcpus-only`` option is on. Fields the file leaves out take
the kubelet's defaults (policy ``none``, scope ``container``, CPU manager ``none``, memory
manager ``None``), as the kubelet itself applies them. Command-line flags of the kubelet that
override the file are not visible here; the docs say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import FileStamp

UNKNOWN = "unknown"
FULL_PCPUS_ONLY = "full-pcpus-only"
KIND = "KubeletConfiguration"


class KubeletConfigError(ValueError):
    """The file cannot be read as a KubeletConfiguration; the message is one line."""


@dataclass(frozen=True)
class KubeletConfig:
    """What the fit answers need of the kubelet's configuration; ``unknown`` when not read."""

    topology_manager_policy: str = UNKNOWN
    topology_manager_scope: str = UNKNOWN
    cpu_manager_policy: str = UNKNOWN
    memory_manager_policy: str = UNKNOWN
    full_pcpus_only: bool = False

    def labels(self) -> tuple[str, str, str, str]:
        """Label values of ``podresources_kubelet_config_info``, in catalog order."""
        return (self.topology_manager_policy, self.topology_manager_scope,
                self.cpu_manager_policy, self.memory_manager_policy)


def _text(config: dict[str, Any], key: str, default: str) -> str:
    value = config.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise KubeletConfigError(f"{key} must be a string, got {value!r}")
    return value


def parse_kubelet_config(document: object) -> KubeletConfig:
    """A loaded KubeletConfiguration document, with the kubelet's defaults for what it omits."""
    if not isinstance(document, dict):
        raise KubeletConfigError("not a KubeletConfiguration (expected a YAML map)")
    kind = document.get("kind")
    if kind is not None and kind != KIND:
        raise KubeletConfigError(f"kind is {kind!r}, expected {KIND}")
    options = document.get("cpuManagerPolicyOptions") or {}
    if not isinstance(options, dict):
        raise KubeletConfigError("cpuManagerPolicyOptions must be a map")
    full = str(options.get(FULL_PCPUS_ONLY, "false")).strip().lower()
    if full not in ("true", "false"):
        raise KubeletConfigError(f"cpuManagerPolicyOptions.{FULL_PCPUS_ONLY} must be true or "
                                 f"false, got {options.get(FULL_PCPUS_ONLY)!r}")
    return KubeletConfig(
        topology_manager_policy=_text(document, "topologyManagerPolicy", "none"),
        topology_manager_scope=_text(document, "topologyManagerScope", "container"),
        cpu_manager_policy=_text(document, "cpuManagerPolicy", "none"),
        memory_manager_policy=_text(document, "memoryManagerPolicy", "None"),
        full_pcpus_only=full == "true",
    )


def load_kubelet_config(path: str | Path) -> KubeletConfig:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise KubeletConfigError(
            f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None
    import yaml  # only with --kubelet-config

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise KubeletConfigError(f"{path}: not valid YAML ({getattr(error, 'problem', '')})") \
            from None
    try:
        return parse_kubelet_config(document)
    except KubeletConfigError as error:
        raise KubeletConfigError(f"{path}: {error}") from None


class KubeletConfigFile:
    """The file, re-read when it changes (a kubelet reconfigured and restarted); a bad new
    version keeps the last good reading."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._stamp = FileStamp(self.path)
        self.config = load_kubelet_config(self.path)
        self.problem: str | None = None

    def current(self) -> KubeletConfig:
        if self._stamp.changed():
            try:
                self.config = load_kubelet_config(self.path)
                self.problem = None
            except KubeletConfigError as error:
                self.problem = str(error)
        return self.config
