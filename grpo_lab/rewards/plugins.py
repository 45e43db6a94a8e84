"""Reward functions from outside the package, with TRL's signature.

    def exact_match(prompts: list[str], completions: list[str], **columns) -> list[float | None]

``columns`` are per-completion lists, as TRL passes dataset columns: ``answer`` (the problem's
target), ``solution``, ``task``, ``uid``, ``difficulty``, and for problems from a ``data:`` file
every field of the row under its own name (None on rows without it). ``None`` means "not applicable to this
completion" (a math reward on a code problem): that completion gets 0 from this function and
is left out of its logged mean. A function is checked when the config loads (it imports, and
its signature takes two positional arguments and the columns), and each call is checked (one
value per completion, numbers or None); NaN is let through to the metrics, where the ``nan``
alarm stops the run (``trainer/alarms.py``).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

COLUMNS = ("answer", "solution", "task", "uid", "difficulty")


class RewardFunctionError(ValueError):
    """A reward function that broke its contract during a run."""


@dataclass(frozen=True)
class RewardFunction:
    key: str  # the config key it came from, named in errors: "reward.functions[1]"
    name: str  # metric name: reward/<name>
    path: str
    weight: float
    role: str  # main | shape
    fn: Callable[..., Any]


def configured(reward_cfg) -> list[RewardFunction]:
    """The config's reward functions (spec.sections.RewardConfig), loaded once per process; the
    task's own score (`task` in reward.functions) has fn None."""
    return _loaded(tuple((f.function, f.weight, f.label, f.role, f.is_task) for f in reward_cfg.plugin_functions()),
                   "reward.function" if reward_cfg.function else "reward.functions")


@lru_cache(maxsize=32)
def _loaded(specs: tuple, key: str) -> list[RewardFunction]:
    return [RewardFunction(key if key == "reward.function" else f"{key}[{i}]", label, path, w,
                           role, None if is_task else load_function(path))
            for i, (path, w, label, role, is_task) in enumerate(specs)]


def load_function(path: str) -> Callable[..., Any]:
    """The callable at ``module:name`` or ``file.py:name``, with its signature checked."""
    from grpo_lab.util.loading import load_object

    fn = load_object(path, "reward function")
    if not callable(fn):
        raise ValueError(f"reward function {path!r} is a {type(fn).__name__}, not a function")
    check_signature(path, fn)
    return fn


def check_signature(path: str, fn: Callable[..., Any]) -> None:
    """TRL's contract: f(prompts, completions, **columns). Columns a function names are checked
    at its first call, since a data file's fields are known only once it is read."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return  # builtins and C callables: checked by their first call
    kinds = inspect.Parameter
    positional = [p for p in params if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)]
    star = any(p.kind is kinds.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind is kinds.VAR_KEYWORD for p in params)
    problem = None
    if len(positional) < 2 and not star:
        problem = "takes fewer than two positional arguments"
    elif not var_kw:
        problem = "takes no **columns (TRL passes every column as a keyword)"
    if problem:
        raise ValueError(f"reward function {path!r} {problem}: expected TRL's signature "
                         f"f(prompts, completions, **columns) with columns {', '.join(COLUMNS)}; got {fn.__name__}"
                         f"{inspect.signature(fn)}")


def required_columns(fn: Callable[..., Any]) -> list[str]:
    """Keyword parameters after (prompts, completions) without a default: columns it must get."""
    try:
        params = list(inspect.signature(fn).parameters.values())[2:]
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in params if p.kind in kinds and p.default is p.empty]


def batch_columns(rows: list) -> tuple[list[str], dict[str, list]]:
    """(prompts, columns) for one completion per row (a tasks.base.Problem): the built-in COLUMNS,
    then every field a data row carries under its own name (None on rows without it)."""
    columns = {"answer": [p.target for p in rows], "solution": [p.solution for p in rows],
               "task": [p.task for p in rows], "uid": [p.uid for p in rows],
               "difficulty": [p.difficulty for p in rows]}
    for name in dict.fromkeys(k for p in rows for k in p.columns):
        columns.setdefault(name, [p.columns.get(name) for p in rows])
    return [p.prompt for p in rows], columns


def call(rf: RewardFunction, prompts: list[str], completions: list[str], columns: dict[str, list]) -> list[float]:
    """The function's values for a batch: floats, NaN where it returned None (not applicable).

    Raises RewardFunctionError on a missing column, a wrong length or a value that is not a
    number or None."""
    missing = [c for c in required_columns(rf.fn) if c not in columns]
    if missing:
        raise RewardFunctionError(f"{rf.key} ({rf.path}) needs column {missing[0]!r}; columns here: "
                                  f"{', '.join(columns)}")
    try:
        values = rf.fn(prompts, completions, **columns)
    except Exception as e:
        raise RewardFunctionError(f"{rf.key} ({rf.path}) raised {type(e).__name__}: {e}") from e
    try:
        values = list(values)
    except TypeError:
        raise RewardFunctionError(f"{rf.key} ({rf.path}) returned {type(values).__name__}, expected a list "
                                  f"of {len(completions)} floats or None") from None
    if len(values) != len(completions):
        raise RewardFunctionError(f"{rf.key} ({rf.path}) returned {len(values)} values for "
                                  f"{len(completions)} completions")
    out = []
    for i, v in enumerate(values):
        if v is None:
            out.append(None)
        elif hasattr(v, "__float__"):  # int, float, numpy and 0-d torch values
            out.append(float(v))
        else:
            raise RewardFunctionError(f"{rf.key} ({rf.path}) returned {v!r} at position {i}; expected a float or None")
    return out


def weighted(values: list[float | None], weight: float) -> list[float]:
    """weight * value, 0 where not applicable; NaN trains as 0 (its metric carries the NaN to the alarm)."""
    return [0.0 if v is None or math.isnan(v) else weight * v for v in values]
