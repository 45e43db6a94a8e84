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
send values, and it never sees the expected ones.

What the judge does to a candidate value costs at most about the value's size (at most
``wire.MAX_OUTPUT`` bytes): decoding is linear (``values``: no deep nesting, no set or dict
keys crowded on one hash, no int beyond 4300 digits); arithmetic runs through typed operators
(``%`` on numbers only, so a candidate string is never a format; ``+`` of numbers or of two
sequences of one type); the builtins whose cost a value could choose refuse sizes beyond a
fixed bound (``range``, ``bytes``, ``sum``, ``round``) or build under ``values``' rules
(``set``, ``frozenset``, ``dict``, ``int``); ``math`` offers only functions of a number's
value. ``verdicts`` judges one program's messages under a CPU budget of its own.

Refused when the task loads, naming the test: a comparison the rule cannot lift out of
candidate code (inside a comprehension or lambda that calls the candidate); a comparison
whose expected side is computed beside the candidate (a setup variable such as
``EXPECTED = 120; assert f(5) == EXPECTED``, which the candidate can rebind); ``%`` formatting
of a string; a ``math`` function outside the judge's set.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from grpo_lab.rewards.sandbox.values import CHECKED, Undecodable, decode, parse_line

__all__ = ["BadTestError", "CompiledTest", "Undecodable", "compile_test", "decode", "judge", "judge_values",
           "parse_line", "verdicts"]

_MAX_ITEMS = 1 << 20  # the largest range or bytes a judge builds
_MAX_DIGITS = 1000  # round()'s digits: 10**n is computed
JUDGE_CPU_S = 0.1  # one program's parsing and judging; an honest program's takes well under 1 ms


def _range(*args):
    made = range(*args)
    if len(made) > _MAX_ITEMS:
        raise ValueError("range too long to judge")
    return made


def _bytes(*args):
    if args and isinstance(args[0], int):
        raise TypeError("bytes(n) is not judged")
    return bytes(*args)


def _sum(items, start=0):
    items = list(items)
    if not all(isinstance(v, (int, float, complex)) for v in [start, *items]):
        raise TypeError("sum() is judged on numbers only")  # sum of lists is quadratic
    return sum(items, start)


def _round(number, ndigits=None):
    if ndigits is not None and abs(ndigits) > _MAX_DIGITS:
        raise ValueError("round() digits out of range")
    return round(number, ndigits)


_MATH_NAMES = ("isclose", "sqrt", "floor", "ceil", "fabs", "trunc", "isnan", "isinf", "isfinite",
               "copysign", "exp", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
               "atan", "atan2", "hypot", "degrees", "radians", "fsum", "gcd", "isqrt",
               "pi", "e", "tau", "inf", "nan")
# Names a judge may use: pure functions of plain data. Anything else belongs to the candidate.
_SAFE_BUILTINS = (
    "abs", "all", "any", "bool", "divmod", "enumerate", "filter", "float", "isinstance", "len", "list",
    "max", "min", "repr", "reversed", "sorted", "str", "tuple", "zip", "complex",
)
# set, frozenset, dict and int build from candidate values under values' cost rules
_SAFE = {name: getattr(builtins, name) for name in _SAFE_BUILTINS} | CHECKED | {
    "range": _range, "bytes": _bytes, "sum": _sum, "round": _round,
    "math": type("math", (), {name: staticmethod(getattr(math, name)) if callable(getattr(math, name))
                              else getattr(math, name) for name in _MATH_NAMES})}

_NUMBER = (int, float, complex)  # bool is an int
_SEQUENCE = (str, bytes, list, tuple)
_SETS = (set, frozenset)


def _same_sequence(a, b) -> bool:
    return any(isinstance(a, t) and isinstance(b, t) for t in _SEQUENCE)


def _typed(op, allowed):
    def run(a, b):
        if not allowed(a, b):
            raise TypeError(f"{op.__name__} of {type(a).__name__} and {type(b).__name__} is not judged")
        return op(a, b)
    return run


def _numbers(a, b) -> bool:
    return isinstance(a, _NUMBER) and isinstance(b, _NUMBER)


def _ints_or_sets(a, b) -> bool:
    return (isinstance(a, int) and isinstance(b, int)) or (isinstance(a, _SETS) and isinstance(b, _SETS))


# Arithmetic the judge may run on candidate values, each typed so that its cost is linear in
# the values' size; ** << * could be made to take forever (a 4,000-digit exponent), so those
# stay inside a hole where the candidate's deadline applies.
_OPERATORS = {
    ast.Add: _typed(operator.add, lambda a, b: _numbers(a, b) or _same_sequence(a, b)),
    ast.Sub: _typed(operator.sub, lambda a, b: _numbers(a, b) or (isinstance(a, _SETS) and isinstance(b, _SETS))),
    ast.Div: _typed(operator.truediv, _numbers),
    ast.FloorDiv: _typed(operator.floordiv, _numbers),
    ast.Mod: _typed(operator.mod, _numbers),
    ast.BitAnd: _typed(operator.and_, _ints_or_sets),
    ast.BitOr: _typed(operator.or_, _ints_or_sets),
    ast.BitXor: _typed(operator.xor, _ints_or_sets),
}
_OPERATOR_NAMES = {kind: f"_op_{kind.__name__}" for kind in _OPERATORS}
_JUDGE_ENV = _SAFE | {_OPERATOR_NAMES[kind]: fn for kind, fn in _OPERATORS.items()}
_JUDGED = (ast.Compare, ast.BoolOp, ast.UnaryOp, ast.Tuple, ast.List, ast.Set, ast.Dict, ast.Subscript,
           ast.Slice, ast.keyword, ast.IfExp)
_CHEAP_OPS = tuple(_OPERATORS)
_LOGIC = (ast.Compare, ast.BoolOp, ast.Not)


class BadTestError(ValueError):
    """A test this grader cannot split into candidate values and a trusted judgement."""


@dataclass(frozen=True)
class CompiledTest:
    setup: str  # statements run in the candidate's globals before the holes ("" if none)
    holes: tuple[str, ...]  # expressions the candidate's process evaluates
    judge: Any  # code object over _h0.., _SAFE and the typed operators, evaluated here


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
        if judged and isinstance(node, ast.BinOp):  # a typed operator: see _OPERATORS
            if isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr)):
                raise BadTestError(f"{ast.unparse(node)!r} formats candidate values with %; compare "
                                   "the value itself (the judge does not format strings)")
            self.generic_visit(node)
            call = ast.Call(func=ast.Name(id=_OPERATOR_NAMES[type(node.op)], ctx=ast.Load()),
                            args=[node.left, node.right], keywords=[])
            return ast.copy_location(call, node)
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


def _setup_names(setup: list[ast.stmt]) -> set[str]:
    """Names the setup statements bind (assignments, imports, definitions)."""
    names = set()
    for node in ast.walk(ast.Module(body=setup, type_ignores=[])):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def _check_expected_sides(expr: ast.AST, setup_names: set[str], test: str) -> None:
    """Refuse a comparison none of whose sides is built from literals, where a side is a
    value computed beside the candidate rather than by calling it: a setup variable, a
    setup import, an undefined name. The candidate's code runs first and could rebind it."""
    known = set(_SAFE) | _bound_names(expr)
    for node in ast.walk(expr):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        free_names = [{n.id for n in ast.walk(side) if isinstance(n, ast.Name)} - known for side in sides]
        if any(not free for free in free_names):
            continue
        for side, free in zip(sides, free_names):
            if free <= setup_names or not any(isinstance(n, ast.Call) for n in ast.walk(side)):
                raise BadTestError(
                    f"the expected side {ast.unparse(side)!r} of {ast.unparse(node)!r} is computed beside "
                    f"the candidate (setup code or a bare name), which the candidate can rebind; write the "
                    f"expected value as a literal: {test!r}")


def _check_math(expr: ast.AST, test: str) -> None:
    for node in ast.walk(expr):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "math" \
                and node.attr not in _MATH_NAMES:
            raise BadTestError(f"math.{node.attr} is not one of the judge's math functions "
                               f"({', '.join(_MATH_NAMES)}): {test!r}")


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
    _check_math(expr, test)
    _check_expected_sides(expr, _setup_names(setup), test)
    splitter = _Splitter()
    judge = ast.fix_missing_locations(ast.Expression(splitter.visit(expr)))
    setup_src = ast.unparse(ast.Module(body=setup, type_ignores=[])) if setup else ""
    return CompiledTest(setup_src, tuple(splitter.holes), compile(judge, "<judge>", "eval"))


def judge(test: CompiledTest, raw: list | None) -> bool:
    """Did the candidate's hole values, as loaded JSON (tagged, see ``values``), pass the
    test? Any error in decoding or judging fails."""
    try:
        held = None if raw is None else [decode(v) for v in raw]
    except (ValueError, TypeError, RecursionError):
        return False
    return judge_values(test, held)


def judge_values(test: CompiledTest, held: list | None) -> bool:
    """Did the candidate's decoded hole values pass the test? Any error in judging fails."""
    if held is None or len(held) != len(test.holes):
        return False
    try:
        env = dict(_JUDGE_ENV, __builtins__={})
        env.update({f"_h{k}": v for k, v in enumerate(held)})
        return bool(eval(test.judge, env))
    except Exception:
        return False


def verdicts(tests: tuple[CompiledTest, ...] | list[CompiledTest], output: bytes,
             budget_s: float = JUDGE_CPU_S) -> list[bool]:
    """Which tests a program passed, from its result messages (one per line; the first per
    test counts). Parsing and judging one program share ``budget_s`` of this thread's CPU
    time: once it is spent, the program's remaining tests fail. Each step costs about its
    message's size (``values``); the budget bounds the sum whatever a step costs."""
    deadline = time.thread_time() + budget_s
    lines: dict[int, list | None] = {}
    for line in output.split(b"\n"):
        if time.thread_time() > deadline:
            break
        try:
            index, held = parse_line(line)
        except (ValueError, RecursionError):
            continue
        lines.setdefault(index, held)
    return [index in lines and time.thread_time() <= deadline and judge_values(test, lines[index])
            for index, test in enumerate(tests)]
