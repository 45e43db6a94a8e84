"""Run-folder files that another process may read while they are written."""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_json(path: Path, data: dict) -> None:
    """Atomic: a reader never sees half a file, a kill never leaves one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def read_json(path: Path) -> dict | None:
    """The file's JSON, or None when it is missing or half-written by a writer that is not atomic."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
