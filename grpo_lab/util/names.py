"""Names that become folder and file names: a sweep, a study, a report.

A name the user writes in a matrix (``name:``) or on the command line (``--name``) ends up as
``reports/<name>/``, ``experiments/tuned/<name>.yaml`` and an MLflow experiment, so it must stay one
plain path component: ``name: "../../x"`` must never write two folders up. The rule is an
allowlist, not a list of bad characters, so a separator, ``..``, a control character or a
character of another script that looks like a dot cannot slip through.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_LENGTH = 128
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]*")


def name_problem(value: str) -> str | None:
    """Why ``value`` cannot be a name (one clause, with a suggested fix), or None when it can."""
    if not isinstance(value, str) or not value:
        return "a name must be a non-empty string"
    if len(value) > MAX_LENGTH:
        return f"a name has at most {MAX_LENGTH} characters (got {len(value)})"
    if _NAME_RE.fullmatch(value):
        return None
    fixed = re.sub(r"[^A-Za-z0-9._+=@-]+", "_", value).lstrip("._-+=@") or "sweep"
    return (f"{value!r} is not a plain name: use letters, digits and . _ - + = @, starting with a letter or "
            f"digit (no '/', '..' or control characters), e.g. {fixed!r}")


def check_name(value: str, what: str = "name") -> str:
    """``value`` when it is a plain name; ValueError naming ``what`` otherwise."""
    problem = name_problem(value)
    if problem:
        raise ValueError(f"{what}: {problem}")
    return value


def inside(root: Path, name: str, what: str = "name") -> Path:
    """``root / name`` for a plain ``name``, checked to resolve inside ``root``."""
    path = Path(root) / check_name(name, what)
    if not path.resolve().is_relative_to(Path(root).resolve()):
        raise ValueError(f"{what}: {name!r} leads outside {root}")
    return path
