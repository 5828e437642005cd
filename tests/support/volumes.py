"""A volume the kubelet fills from the API (Secret, ConfigMap, projected service-account token),
updated as the kubelet's atomic writer does it, for tests of files that change while read."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def update_volume(volume: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` the way the kubelet updates a Secret, ConfigMap or projected volume: a new
    timestamped directory, an atomic swap of the ``..data`` link, the old directory deleted;
    each name links through ``..data``, so a reader sees the old files or the new ones, never
    a mix."""
    volume.mkdir(exist_ok=True)
    old = os.readlink(volume / "..data") if (volume / "..data").is_symlink() else None
    fresh = Path(tempfile.mkdtemp(prefix="..20", dir=volume))
    for name, content in files.items():
        (fresh / name).write_bytes(content)
        if not (volume / name).is_symlink():
            (volume / name).symlink_to(Path("..data") / name)
    (volume / "..data_tmp").symlink_to(fresh.name)
    os.replace(volume / "..data_tmp", volume / "..data")
    if old:
        shutil.rmtree(volume / old)
