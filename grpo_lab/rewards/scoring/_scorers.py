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

import importlib
import logging
import math

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


def prepare(kind, key, spec):
    """Build what later jobs name by ``key``: ``("rg", key, (dataset, kwargs))`` builds a
    dataset and scores its first entry's own answer once, so every import and cache a score
    needs is in place before any child forks; ``("module", name, None)`` imports a module."""
    if kind == "rg":
        if _reasoning_gym is None:
            raise ModuleNotFoundError("reasoning_gym is not importable in the scoring worker")
        name, kwargs = spec
        dataset = _reasoning_gym.create_dataset(name, **kwargs)
        entry = dataset[0]
        dataset.score_answer(str(entry["answer"]), entry)
        _DATASETS[key] = dataset
    elif kind == "module":
        importlib.import_module(key)
    else:
        raise ValueError(f"unknown scorer kind {kind!r}")


def warm_up():
    """Take the lazy imports and first-call caches of math-verify now, in the template."""
    if _math_verify is not None:
        _math(r"\frac{1}{2}", "0.5")
        _math(r"\{1, 2\}", r"\{2, 1\}")
        _math("3", "The answer is 3")


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


def _math(target, marked):
    """1.0 when math-verify finds ``marked`` equal to ``target``: read as LaTeX math first, then
    as text. Unbounded here: the worker's deadline bounds it."""
    parse, verify = _math_verify.parse, _math_verify.verify
    answer = parse(f"${marked}$", parsing_timeout=None) or parse(marked, parsing_timeout=None)
    if not answer:
        return 0.0
    gold = parse(f"${target}$", parsing_timeout=None) or parse(target, parsing_timeout=None)
    return 1.0 if verify(gold, answer, timeout_seconds=None) else 0.0
