"""Loading what a user names by path: ``pkg.module:Name`` or ``path/to/file.py:Name`` (tasks,
reward functions). A file is imported once per process under a name derived from its path."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from grpo_lab.util.yamlio import suggest


def load_object(path: str, what: str = "object") -> Any:
    """``pkg.module:Name`` or ``path/to/file.py:Name``; a one-line ValueError when it cannot load."""
    if path.count(":") != 1 or not all(path.split(":")):
        raise ValueError(f"{what} {path!r}: expected 'module:name' or 'file.py:name'")
    module_name, attr = path.split(":")
    try:
        module = _import(module_name)
    except ModuleNotFoundError as e:
        raise ValueError(f"{what} {path!r}: no module named {e.name!r} (is it installed or on PYTHONPATH?)") from None
    except FileNotFoundError:
        raise ValueError(f"{what} {path!r}: no file {module_name!r}") from None
    except Exception as e:  # a plugin that fails to import: its own error, on one line
        raise ValueError(f"{what} {path!r}: importing it failed: {type(e).__name__}: {e}") from None
    if not hasattr(module, attr):
        public = [n for n in vars(module) if not n.startswith("_")]
        raise ValueError(f"{what} {path!r}: module {module_name!r} has no {attr!r}{suggest(attr, public)}")
    return getattr(module, attr)


def _import(module_name: str):
    if not module_name.endswith(".py"):
        return importlib.import_module(module_name)
    file = Path(module_name).resolve()
    if not file.is_file():
        raise FileNotFoundError(module_name)
    key = f"grpo_lab_plugin_{hashlib.sha1(str(file).encode()).hexdigest()[:10]}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[key]
            raise
    return sys.modules[key]
