"""Which of reasoning-gym's scorers may evaluate an answer: a static reach over their bytecode.

From a dataset class's ``score_answer``, follow every function it can name: its globals, the
attributes it loads (on ``self``, on a reasoning-gym module or class), the modules it imports,
its closures and nested functions, through every function and class defined in reasoning-gym.
The scorer is ``eval``-capable if that reaches Python's ``eval``, ``exec`` or ``compile``, and
``sympy``-capable if it reaches anything of sympy (``parse_expr`` and ``sympify`` evaluate
strings; any sympy function sympifies a string argument). An over-approximation: a name counts
if it is loaded, whatever it is applied to, so a scorer that evaluates only its own data is
guarded too (its honest answers pass the guard, which the tests check for every such dataset).
"""

from __future__ import annotations

import builtins
import dis
import functools
import sys
import types

from grpo_lab.rewards.scoring.guard import EVAL, SYMPY

_CODE_RUNNERS = (builtins.eval, builtins.exec, builtins.compile)
_LOADS = {"LOAD_GLOBAL", "LOAD_NAME"}
_ATTRS = {"LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM", "STORE_ATTR"}
_HOME = "reasoning_gym"


@functools.lru_cache(maxsize=None)
def scorer_modes(dataset: str) -> frozenset[str]:
    """The evaluations reasoning-gym's ``dataset`` scorer may apply to an answer."""
    from reasoning_gym.factory import DATASETS

    return modes_of(DATASETS[dataset][0])


def entry_modes(dataset: str, entry: dict) -> frozenset[str]:
    """The evaluations an answer to ``entry`` may meet: its dataset's scorer and, for an entry
    a composite dataset took from another, that one's too."""
    from reasoning_gym.factory import DATASETS

    source = (entry.get("metadata") or {}).get("source_dataset") if isinstance(entry, dict) else None
    extra = scorer_modes(source) if isinstance(source, str) and source in DATASETS else frozenset()
    return scorer_modes(dataset) | extra


def modes_of(cls: type) -> frozenset[str]:
    found: set[str] = set()
    seen: set = set()
    work: list = [cls.__dict__.get("score_answer") or getattr(cls, "score_answer")]
    while work:
        fn = _function(work.pop())
        if fn is None or fn.__code__ in seen:
            continue
        seen.add(fn.__code__)
        names, attrs, imports = _scan(fn.__code__)
        cells = [c.cell_contents for c in fn.__closure__ or () if _has_contents(c)]
        named = [fn.__globals__.get(n, getattr(builtins, n, None)) for n in names]
        named += [getattr(cls, a, None) for a in attrs] + [sys.modules.get(m) for m in imports]
        found.update(SYMPY for m in imports if _is_sympy_name(m))
        for obj in named + cells:
            _visit(obj, attrs, found, work)
    return frozenset(found)


def _function(obj):
    if isinstance(obj, (classmethod, staticmethod)):
        obj = obj.__func__
    elif isinstance(obj, property):
        obj = obj.fget
    elif isinstance(obj, types.MethodType):
        obj = obj.__func__
    return obj if isinstance(obj, types.FunctionType) else None


def _visit(obj, attrs: set[str], found: set[str], work: list) -> None:
    if any(obj is runner for runner in _CODE_RUNNERS):
        found.add(EVAL)
    elif _is_sympy(obj):
        found.add(SYMPY)
    elif isinstance(obj, types.ModuleType) and obj.__name__.startswith(_HOME):
        for attr in attrs:
            member = getattr(obj, attr, None)
            if not isinstance(member, types.ModuleType):
                _visit(member, attrs, found, work)
    elif isinstance(obj, type) and obj.__module__.startswith(_HOME):
        work.extend(vars(obj).get(a) for a in [*attrs, "__init__", "__new__", "__post_init__"])
    elif _function(obj) is not None and _function(obj).__module__.startswith(_HOME):
        work.append(obj)


def _is_sympy(obj) -> bool:
    name = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(type(obj), "__module__", "")
    if not isinstance(obj, types.ModuleType) and callable(obj):
        name = getattr(obj, "__module__", None) or name
    return isinstance(name, str) and _is_sympy_name(name)


def _is_sympy_name(module: str) -> bool:
    return module == "sympy" or module.startswith("sympy.")


def _scan(code: types.CodeType) -> tuple[set[str], set[str], set[str]]:
    """(global names, attribute names, imported modules) of ``code`` and the code nested in it."""
    names, attrs, imports = set(), set(), set()
    stack = [code]
    while stack:
        current = stack.pop()
        for ins in dis.get_instructions(current):
            if ins.opname in _LOADS:
                names.add(ins.argval)
            elif ins.opname in _ATTRS:
                attrs.add(ins.argval)
            elif ins.opname == "IMPORT_NAME":
                imports.add(ins.argval)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names, attrs, imports


def _has_contents(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True
