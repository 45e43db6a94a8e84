"""The inert-answer guard and the reach that decides where it applies (pure, no worker).

The guard is the layer that stops a completion from writing its own score inside the scoring
worker: whatever it lets through must be unable to run code in the evaluation it meets, and the
datasets' own reference answers must all pass it.
"""

import ast
import inspect
import re
import tokenize
import types

import pytest

from grpo_lab.rewards.scoring.guard import CALLABLE, EVAL, SYMPY, inert, inert_to_eval, inert_to_sympy
from grpo_lab.rewards.scoring.reach import entry_modes, scorer_modes

pytest.importorskip("reasoning_gym")
from reasoning_gym.factory import DATASETS  # noqa: E402
from sympy.parsing.sympy_parser import standard_transformations, stringify_expr  # noqa: E402

from grpo_lab.tasks import make_task  # noqa: E402

NAMED = {"spiral_matrix": EVAL, "string_insertion": EVAL, "binary_matrix": EVAL, "n_queens": EVAL,
         "countdown": SYMPY, "puzzle24": SYMPY, "polynomial_multiplication": SYMPY,
         "simple_integration": SYMPY, "intermediate_integration": SYMPY}
GUARDED = sorted(name for name in DATASETS if scorer_modes(name))

# Payloads of the kinds a completion used against the trainer, and the ways around a naive check.
HOSTILE = [
    "__import__('os').system('touch /tmp/x')", "open('/tmp/x', 'w').write('1')",
    "().__class__.__base__.__subclasses__()", "[c for c in ().__class__.__mro__]", "eval('1')",
    "exec('x = 1')", "compile('1', 'f', 'eval')", "lambda: 1", "(lambda: 0)()", "x.real", "a[0]", "[1][0]",
    "getattr(x, 'y')", "globals()", "vars()", "breakpoint()", "input()", "help()", "print(1)",
    "ｅｖａｌ('1')", "ｅｘｅｃ", "1; import os", "import os", "x = 1", "(x := 1)", "f(x) = 1",
    "{1: 2}", "{}", "f'{1}'", "__builtins__", "_x", "__import__", "x if 1 else 2", "not x",
    "sympify('x')", "S('x')", "Symbol('x')", "parse_expr('x')", "lambdify(x, x)", "preview(x)",
    "Function('f')(x)", "sin(x)(1)", "sin(x)[0]", "(x)(1)", "x(1)", "9(1)", "yield 1", "await x",
    "[x for x in y]", "{x for x in y}", "sin.__call__(x)", "x.__class__", "'abc'", "1 +\\\n__import__('os')",
    "__import__('os') \\\n", "  __import__('os')", "\t__import__('os')", "\n__import__('os')",
]


def test_the_nine_scorers_that_evaluate_answers_are_found_with_their_kind():
    for name, mode in NAMED.items():
        assert mode in scorer_modes(name), name


def test_every_scorer_whose_source_evaluates_is_guarded():
    """Independently of the bytecode reach: a ``score_answer`` (or a method it calls on self)
    whose source names eval, exec or sympy's parsers is guarded."""
    def source(cls):
        text = inspect.getsource(cls.score_answer)
        for name in set(re.findall(r"self\.(\w+)\(", text)):
            member = getattr(cls, name, None)
            if isinstance(member, types.FunctionType):
                text += inspect.getsource(member)
        return text

    pattern = re.compile(r"(?<![\w.])(eval|exec)\(|parse_expr\(|sympify\(|\bsp\.|\bsympy\.")
    found = {name for name, (cls, _) in DATASETS.items() if pattern.search(source(cls))}
    assert set(NAMED) <= found
    assert found <= set(GUARDED), found - set(GUARDED)


def test_an_entry_answers_to_its_source_datasets_scorer_too():
    entry = {"answer": "1", "metadata": {"source_dataset": "spiral_matrix"}}
    assert entry_modes("leg_counting", entry) == {EVAL}
    assert entry_modes("leg_counting", {"answer": "1", "metadata": {}}) == frozenset()


@pytest.mark.parametrize("dataset", GUARDED)
def test_reference_answers_of_every_level_pass_the_guard(dataset):
    task = make_task(f"rg:{dataset}", "natural", scoring="lenient")
    answers = []
    for level in range(task.levels):
        for index in range(0, 25 * 7919, 7919):
            try:
                answers.append(str(task._dataset(level)[index]["answer"]))
            except ValueError:  # countdown sometimes finds no expression for an index
                continue
    assert len(answers) >= 20
    refused = [a for a in answers if not inert(a, scorer_modes(dataset))]
    assert refused == []


def test_the_datasets_alternative_formats_pass_and_keep_their_partial_credit_path():
    """The list forms the eval scorers pay 0.1 or 0.5 for are literals: inert."""
    for answer in ["[4, 6, 7, 3]", "['E', 'A', 'C']", "[[1, 0], [0, 1]]", "[['_', 'Q'], ['Q', '_']]",
                   "(1, -2, 3.5)", "-0x1f", "0b101", "True", "None", "EACADDDB", "b'x'"]:
        assert inert_to_eval(answer), answer
    for answer in ["-6*x**3 + 2*x + C", "(3 + 5) * (6 / 2)", "-4*(-2*x - 8)**(3/2)/3 + C", "x!",
                   "3*Integral(x**3*cos(3*x), x) + C", "log(x) + atan(x) - asin(x/2) + sqrt(x) + exp(-x)",
                   "94*4 - 61 - 6", "2 ** 10 == 1024", "[1, 2]"]:
        assert inert_to_sympy(answer), answer


@pytest.mark.parametrize("payload", HOSTILE)
def test_code_capable_answers_are_refused_by_both_guards(payload):
    assert not inert(payload, frozenset({SYMPY})), payload
    if _eval_runs_code(payload):
        assert not inert(payload, frozenset({EVAL})), payload


def test_the_eval_guard_lets_a_name_through_only_alone():
    """A name inside a display would be a lookup of the scorer's variables; a bare name is a
    string_insertion answer (the worker's eval reads literals only, so it reads nothing)."""
    for text in ["[oracle_answer]", "(entry, 1)", "-x", "{answer: 1}", "[1, x]"]:
        assert not inert_to_eval(text), text
    for text in ["EACADDDB", " ABCD", "[-1, 'a', (2.5, None)]"]:
        assert inert_to_eval(text), text


CORPUS = HOSTILE + ["*a", ")32 - 4 - 03(*24", "(1 +", "'abc", "1 2 3", "_ Q _ _\nQ _ _ _", "x**2", "sin(x)", "[1, [2, (3,)]]", "-5", "abc", "a b",
                    "x!", "3!!", "0.[3]", "1e5", "x, y", "(x)", "[x]", "x == y", "~x", "x ^ y", "x << 2", "1j",
                    "Max(x, 1)", "max(x, 1)", "Integral(x, x)", "Rational(1, 2)", "", " ", "\\frac{1}{2}"]


@pytest.mark.parametrize("text", CORPUS)
def test_what_the_eval_guard_lets_through_compiles_to_no_call_attribute_or_subscript(text):
    if not inert_to_eval(text):
        return
    for variant in (text, text.lstrip(" \t"), text.strip()):
        try:
            tree = ast.parse(variant, mode="eval")
        except SyntaxError:
            continue
        kinds = {type(node) for node in ast.walk(tree)}
        assert not kinds & {ast.Call, ast.Attribute, ast.Subscript, ast.BinOp, ast.Lambda, ast.NamedExpr}, text


@pytest.mark.parametrize("text", CORPUS)
def test_what_the_sympy_guard_lets_through_calls_only_math_functions_once_transformed(text):
    """sympy rewrites the tokens before its eval (names become Symbol(...), numbers Integer(...));
    the code it would evaluate calls only those constructors and the guard's functions."""
    if not inert_to_sympy(text):
        return
    namespace: dict = {}
    exec("from sympy import *", namespace)  # parse_expr's own global names (not evaluating the text)
    try:
        code = stringify_expr(text.strip(), {}, namespace, standard_transformations)
        tree = ast.parse(code, mode="eval")
    except (SyntaxError, TypeError, ValueError, tokenize.TokenError):
        return  # sympy would refuse it before evaluating anything
    constructors = {"Symbol", "Integer", "Float", "Rational", "factorial", "factorial2"}
    for node in ast.walk(tree):
        assert not isinstance(node, (ast.Attribute, ast.Subscript, ast.Lambda, ast.NamedExpr)), text
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name) and node.func.id in constructors | CALLABLE, (text, code)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert node.value.isidentifier() or re.fullmatch(r"[0-9.e+-]+", node.value), (text, code)


def _eval_runs_code(text: str) -> bool:
    """Would ``eval`` (or a stripped copy) compile ``text`` to anything but a literal display?"""
    for variant in (text, text.lstrip(" \t"), text.strip()):
        try:
            tree = ast.parse(variant, mode="eval")
        except (SyntaxError, ValueError):
            continue
        if any(not isinstance(n, (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Load))
               for n in ast.walk(tree)):
            return True
    return False


def test_the_sympy_guard_refuses_what_would_run_to_its_deadline():
    """Power towers and large exponents or factorials pass no honest reference (the test over
    every level's references above) and would each hold a child until its deadline."""
    for text in ["9**9**9**3", "2**(10**10)", "2**99999", "x**2**2", "2**exp(9**9)", "1000!", "(9*9)!",
                 "2**1e9", "2**0x7fffffff"]:
        assert not inert_to_sympy(text), text
    for text in ["x**2 + 3*x**(3/2)", "(x+1)**-2", "e**(2*x)", "5!", "x!", "2**sqrt(2)", "9**9"]:
        assert inert_to_sympy(text), text
