"""Files the exporter re-reads when they change: ``--fit-shapes``, ``--kubelet-config``,
``--web-config-file`` and its TLS files, the kubelet's state files under ``--watch-path``.

A change is noticed by a stat call, not by reading: cheap enough for every refresh, request or
connection. The identity covers a file rewritten in place and a file replaced (a ConfigMap or
Secret volume swaps its ``..data`` symlink, an editor renames over it).
"""

from __future__ import annotations

import os
from pathlib import Path

Identity = tuple[int, int, int, int]  # (device, inode, modification time in ns, size)


def file_identity(path: str | Path | None) -> Identity | None:
    """What changes when the file is rewritten or replaced; None when it is absent."""
    try:
        info = os.stat(path) if path is not None else None
    except (OSError, ValueError):
        return None
    return (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size) if info else None


class FileStamp:
    """The identities of some files as last seen; :meth:`changed` says whether any changed
    since (and takes the new ones as seen)."""

    def __init__(self, *paths: str | Path | None):
        self.paths = paths
        self._seen = self._now()

    def _now(self) -> tuple[Identity | None, ...]:
        return tuple(file_identity(path) for path in self.paths)

    def changed(self) -> bool:
        now = self._now()
        if now == self._seen:
            return False
        self._seen = now
        return True
