"""Files that another process may read while they are written: run-folder JSON, checkpoints,
reports. One writer, `atomic_write`: a reader sees the old file or the new one, never half of
one, and a kill or a failed write leaves no temp file behind."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable


def atomic_write(path: Path, payload: bytes | Callable[[BinaryIO], None], durable: bool = False) -> None:
    """Write `payload` (bytes, or a function that writes to the open file) to a temp file in
    `path`'s folder and rename it over `path`. durable: fsync before the rename, so a machine
    crash keeps the old file or the whole new one (reports, checkpoints); a heartbeat need not."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide a shared file from its readers
        with os.fdopen(fd, "wb") as handle:
            if callable(payload):
                payload(handle)
            else:
                handle.write(payload)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, data: dict) -> None:
    """Atomic: a reader never sees half a file, a kill never leaves one."""
    atomic_write(path, json.dumps(data).encode())


def read_json(path: Path) -> dict | None:
    """The file's JSON, or None when it is missing or half-written by a writer that is not atomic."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
