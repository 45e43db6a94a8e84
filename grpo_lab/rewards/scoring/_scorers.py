"""The third-party scorers, as the scoring worker runs them: imported by its template, called
in a fresh child per answer. Runs only inside the worker (``_template.py``); its jobs come from
the trainer (``jobs.py``), so they are trusted data, while the answer inside each is not.

Jobs (tuples, pickled by the trainer):

    ("rg", key, entry, answer)          reasoning-gym's ``score_answer`` of the dataset prepared as ``key``
    ("math", target, marked)            math-verify: the marked answer (as LaTeX math, else as
                                        text) against the target; 1.0 when equal
    ("call", "module:function", args)   a plugin scorer: ``function(*args)``, its module prepared first

``run`` turns whatever happens into one float in [0, 1]: an exception, a non-number or NaN
scores 0, a number outside [0, 1] is clamped (as the trainer always did with reasoning-gym's).
"""

import ast
import importlib
import logging
import math
import sys

try:
    import reasoning_gym.factory as _reasoning_gym
except ImportError:  # the worker still serves the scorers that are installed
    _reasoning_gym = None
try:
    import math_verify as _math_verify
except ImportError:
    _math_verify = None
# It warns on every call made without its own SIGALRM timeouts; the worker's deadline bounds them.
logging.getLogger("math_verify").setLevel(logging.ERROR)

_DATASETS = {}
_WARM_ENTRIES = 8


def prepare(kind, key, spec):
    """Build what later jobs name by ``key``: ``("rg", key, (dataset, kwargs))`` builds a
    dataset and scores its first entries' own answers and near misses, so the imports and
    caches a score needs are in place before any child forks; ``("module", name, None)``
    imports a module."""
    if kind == "rg":
        if _reasoning_gym is None:
            raise ModuleNotFoundError("reasoning_gym is not importable in the scoring worker")
        name, kwargs = spec
        dataset = _reasoning_gym.create_dataset(name, **kwargs)
        for index in range(_WARM_ENTRIES):
            try:
                entry = dataset[index]
            except ValueError:  # some generators give up on an index
                continue
            dataset.score_answer(str(entry["answer"]), entry)
            dataset.score_answer(str(entry["answer"])[:-1], entry)
        _DATASETS[key] = dataset
    elif kind == "module":
        importlib.import_module(key)
    else:
        raise ValueError(f"unknown scorer kind {kind!r}")


# Answers of the common shapes: parsing them once in the template teaches latex2sympy's ANTLR
# parser (its prediction cache) and fills sympy's caches, which every child inherits; a child
# that had to learn them scored a first answer about 10x slower than a warm process.
_WARM_MATH = (
    (r"\frac{1}{2}", "0.5"), (r"\{1, 2\}", r"\{2, 1\}"), ("3", "The answer is 3"), (r"2\sqrt{2}", r"\sqrt{8}"),
    ("(1,2]", "(1, 2]"), (r"\pi", "3.14"), ("x^2+2x+1", "(x+1)^2"), (r"-\frac{3}{4}", "-0.75"), ("10\%", "10%"),
    (r"\dfrac{\sqrt{3}}{2}", r"\frac{\sqrt3}{2}"), (r"\infty", r"\infty"), ("e^{2}", "e^2"), ("2^{10}", "1024"),
    (r"\sin(\pi/6)", r"\frac{1}{2}"), (r"\log_2 8", "3"), (r"3 \times 10^{3}", "3000"), ("x = 3", "3"),
    (r"5\text{ cm}", "5 cm"), (r"\binom{5}{2}", "10"), ("[0, 1)", r"\left[0, 1\right)"), ("a/b", r"\frac{a}{b}"),
    (r"90^\circ", "90"), ("3+2i", "2i+3"), (r"x \le 2", r"x \leq 2"), ("1,2", "2, 1"), (r"\text{(B)}", "B"))


def warm_up():
    """Take the lazy imports and first-call caches of math-verify now, in the template."""
    if _math_verify is not None:
        for target, answer in _WARM_MATH:
            _math(target, answer)


def run(job):
    try:
        value = float(_score(job))
    except BaseException:  # a scorer failing on model text: no credit
        return 0.0
    if not math.isfinite(value):
        return 0.0
    return min(max(value, 0.0), 1.0)


def _score(job):
    kind = job[0]
    if kind == "rg":
        _, key, entry, answer = job
        _literal_eval_only(answer)
        return _DATASETS[key].score_answer(answer, entry)
    if kind == "math":
        return _math(*job[1:])
    if kind == "call":
        _, function, args = job
        module, _, name = function.partition(":")
        target = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        return target(*args)
    raise ValueError(f"unknown job {kind!r}")


def _literal_eval_only(answer):
    """In this child (one job, then gone): reasoning-gym's modules resolve ``eval`` to one that
    reads ``answer``'s text as a literal only (lists and strings of the answer's parts, which is
    all their scorers want of it), so a name in an answer never reads a scorer's variable such
    as ``oracle_answer``; the scorers' evals of their own data (bitwise_arithmetic's problem)
    run as before."""
    def literal_eval_of_answers(source, globals=None, locals=None):
        if isinstance(source, str) and isinstance(answer, str) and source.strip() == answer.strip():
            return ast.literal_eval(source)
        return eval(source, globals, locals)

    for name, module in list(sys.modules.items()):
        if name.partition(".")[0] == "reasoning_gym" and module is not None:
            module.__dict__["eval"] = literal_eval_of_answers


def _math(target, marked):
    """1.0 when math-verify finds ``marked`` equal to ``target``: read as LaTeX math first, then
    as text. Unbounded here: the worker's deadline bounds it."""
    parse, verify = _math_verify.parse, _math_verify.verify
    answer = parse(f"${marked}$", parsing_timeout=None) or parse(marked, parsing_timeout=None)
    if not answer:
        return 0.0
    gold = parse(f"${target}$", parsing_timeout=None) or parse(target, parsing_timeout=None)
    return 1.0 if verify(gold, answer, timeout_seconds=None) else 0.0
