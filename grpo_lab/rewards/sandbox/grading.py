"""Trusted half of grading: split each test into what the candidate computes and what we judge.

A test is Python source ending in ``assert EXPR`` or a bare ``EXPR`` (statements before it are
setup, run beside the candidate). ``compile_test`` cuts EXPR into *holes*, the maximal
sub-expressions that touch a name the candidate could define (``f(3)``, ``sorted(g(x))[0]``),
and a *judge*, the rest of EXPR with each hole replaced by ``_h0``, ``_h1``, ...:

    assert set(pairs([1, 2])) == {(1, 2)}   ->   holes ["pairs([1, 2])"], judge "set(_h0) == {(1, 2)}"

The candidate's process evaluates only the holes and sends back their values as tagged JSON
of plain types (``encode`` in ``_zygote.py``); this module decodes them and evaluates the
judge here, over plain data, with a whitelist of builtins. Comparisons, ``not``, ``and`` and
``or`` are always judged here, never inside a hole, so an object whose ``__eq__`` is always
true, a replaced ``bool`` or a patched harness has nothing to act on: the candidate can only
send values, and it never sees the expected ones. Tests whose comparison the rule cannot lift
out of candidate code (a comparison inside a comprehension or lambda that calls the
candidate) are refused when the task loads, naming the test.
"""

from __future__ import annotations

import ast
import builtins
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# Names a judge may use: pure functions of plain data. Anything else belongs to the candidate.
_SAFE_BUILTINS = (
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
    "int", "isinstance", "len", "list", "max", "min", "range", "repr", "reversed", "round",
    "set", "sorted", "str", "sum", "tuple", "zip", "bytes", "complex",
)
_SAFE = {name: getattr(builtins, name) for name in _SAFE_BUILTINS} | {"math": math}
_JUDGED = (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Subscript,
           ast.Slice, ast.keyword, ast.IfExp)
# Arithmetic the judge may run on candidate values; ** << * could be made to take forever
# (a 4,000-digit exponent), so those stay inside a hole where the candidate's deadline applies.
_CHEAP_OPS = (ast.Add, ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.BitAnd, ast.BitOr, ast.BitXor)
_LOGIC = (ast.Compare, ast.BoolOp, ast.Not)


class BadTestError(ValueError):
    """A test this grader cannot split into candidate values and a trusted judgement."""


@dataclass(frozen=True)
class CompiledTest:
    setup: str  # statements run in the candidate's globals before the holes ("" if none)
    holes: tuple[str, ...]  # expressions the candidate's process evaluates
    judge: Any  # code object over _h0.. and _SAFE, evaluated here


def _bound_names(node: ast.AST) -> set[str]:
    """Names bound inside comprehensions and lambdas of ``node`` (their own variables)."""
    bound = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.comprehension):
            bound |= {n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name)}
        elif isinstance(sub, ast.Lambda):
            bound |= {a.arg for a in ast.walk(sub.args) if isinstance(a, ast.arg)}
    return bound


def _trusted(node: ast.AST) -> bool:
    """True when ``node`` reads no name the candidate could have defined."""
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    return names <= set(_SAFE) | _bound_names(node)


def _safe_call(node: ast.Call) -> bool:
    func = node.func
    if isinstance(func, ast.Name):
        return func.id in _SAFE
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "math"


class _Splitter(ast.NodeTransformer):
    def __init__(self) -> None:
        self.holes: list[str] = []

    def visit(self, node: ast.AST) -> ast.AST:
        if _trusted(node):
            return node
        judged = isinstance(node, _JUDGED) or (isinstance(node, ast.Call) and _safe_call(node)) or (
            isinstance(node, ast.BinOp) and isinstance(node.op, _CHEAP_OPS))
        if judged:
            return self.generic_visit(node)
        if any(isinstance(sub, _LOGIC) for sub in ast.walk(node)):
            raise BadTestError(
                f"the comparison in {ast.unparse(node)!r} runs inside candidate code; write the "
                "test as `assert candidate_call(...) == expected` (a comparison the grader can judge)")
        if isinstance(node, ast.GeneratorExp):  # a generator is not data; its items as a list are
            node = ast.ListComp(elt=node.elt, generators=node.generators)
        self.holes.append(ast.unparse(node))
        return ast.copy_location(ast.Name(id=f"_h{len(self.holes) - 1}", ctx=ast.Load()), node)


@lru_cache(maxsize=1 << 14)
def compile_test(test: str) -> CompiledTest:
    """Split one test (``assert EXPR`` or ``EXPR``, optionally after setup statements)."""
    try:
        body = ast.parse(test).body
    except SyntaxError as e:
        raise BadTestError(f"test is not valid Python ({e.msg}): {test!r}") from None
    if not body or not isinstance(body[-1], (ast.Assert, ast.Expr)):
        raise BadTestError(f"a test must end in `assert EXPR` or an expression: {test!r}")
    *setup, last = body
    expr = last.test if isinstance(last, ast.Assert) else last.value
    splitter = _Splitter()
    judge = ast.fix_missing_locations(ast.Expression(splitter.visit(expr)))
    setup_src = ast.unparse(ast.Module(body=setup, type_ignores=[])) if setup else ""
    return CompiledTest(setup_src, tuple(splitter.holes), compile(judge, "<judge>", "eval"))


class Undecodable(ValueError):
    """A value from the candidate that is not tagged JSON of plain types."""


def _reject_constant(name: str) -> None:
    raise Undecodable(f"bare {name} (non-finite floats travel tagged)")


def decode(value: Any, depth: int = 0) -> Any:
    """Tagged JSON -> Python value. Lists are JSON arrays; tuples, sets, frozensets, dicts,
    bytes, complex and non-finite floats are one-key objects; anything else is refused."""
    if depth > 100:
        raise Undecodable("nested too deep")
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [decode(v, depth + 1) for v in value]
    if kind is not dict or len(value) != 1:
        raise Undecodable(f"unexpected {kind.__name__}")
    (tag, body), = value.items()
    items = [decode(v, depth + 1) for v in body] if type(body) is list else None
    if tag in ("tuple", "set", "frozenset") and items is not None:
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "dict" and items is not None and all(type(p) is list and len(p) == 2 for p in items):
        return {_hashable(k): v for k, v in items}
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "float" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "complex" and items is not None and len(items) == 2:
        return complex(*items)
    raise Undecodable(f"unknown tag {tag!r}")


def _hashable(key: Any) -> Any:
    if type(key) is list:
        raise Undecodable("list as a dict key")
    return key


def parse_line(line: bytes) -> tuple[int, list | None]:
    """One result line ``[test_index, [value, ...]]`` -> (index, raw values or None)."""
    data = json.loads(line, parse_constant=_reject_constant)
    if type(data) is not list or len(data) != 2 or type(data[0]) is not int:
        raise Undecodable("result line must be [index, values]")
    return data[0], data[1] if type(data[1]) is list else None


def judge(test: CompiledTest, raw: list | None) -> bool:
    """Did the candidate's hole values pass the test? Any error in decoding or judging fails."""
    if raw is None or len(raw) != len(test.holes):
        return False
    try:
        env = dict(_SAFE, __builtins__={})
        env.update({f"_h{k}": decode(v) for k, v in enumerate(raw)})
        return bool(eval(test.judge, env))
    except Exception:
        return False
