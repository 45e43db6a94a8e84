"""Third-party scorers, run on model answers outside the trainer: the scoring worker.

reasoning-gym's ``score_answer`` calls ``eval`` or ``sympy.parse_expr`` on the answer for some
datasets, and math-verify parses answers with sympy: run in the trainer, a completion could run
as Python there. Here every answer is scored in a fresh child of a sandboxed template that has
the scorer libraries imported (``worker.py``, ``launch.py``, ``_template.py``), and sends back
one float the trainer parses strictly. Before an answer goes to a scorer that evaluates it,
the trainer's guard (``guard.py``, ``reach.py``) scores it 0 unless it is inert, so code inside
the child cannot write its own "1.0" either.

``score_rg`` and ``math_verify_equal`` are the built-in scorers; ``score_calls`` runs a plugin
scorer (an importable ``module:function``) in the worker. ``worker_for`` shares one worker per
isolation within a process; ``check`` fails fast, before training, where it cannot run.
"""

from __future__ import annotations

import atexit
import collections
import hashlib

from grpo_lab.rewards.sandbox.recovery import ForkSafeLock
from grpo_lab.rewards.scoring import protocol
from grpo_lab.rewards.scoring.guard import inert
from grpo_lab.rewards.scoring.launch import ScoringError, check
from grpo_lab.rewards.scoring.reach import entry_modes
from grpo_lab.rewards.scoring.worker import ScoringWorker

__all__ = ["ScoringError", "ScoringWorker", "check", "math_verify_equal", "score_calls", "score_rg",
           "worker_for"]

_WORKERS: dict[str, ScoringWorker] = {}
_CACHE: collections.OrderedDict = collections.OrderedDict()  # (isolation, job digest) -> value
_CACHE_SIZE = 1 << 16
_LOCK = ForkSafeLock()  # _WORKERS and _CACHE, shared by the trainer's threads


def worker_for(isolation: str = "bwrap") -> ScoringWorker:
    """The process-wide scoring worker of this isolation, started on first use."""
    with _LOCK:
        if isolation not in _WORKERS:
            _WORKERS[isolation] = ScoringWorker(isolation)
        return _WORKERS[isolation]


@atexit.register
def _close_all() -> None:
    for worker in _WORKERS.values():
        worker.close()


def score_rg(dataset: str, configs: list[dict], entries: list[dict], answers: list[str | None],
             isolation: str = "bwrap") -> list[float]:
    """reasoning-gym's own score of each answer, in [0, 1]: ``score_answer(answer, entry)`` of
    ``create_dataset(dataset, **config)``, run in the worker. An answer that is not inert to
    the evaluation its entry's scorer may apply (``reach.entry_modes``) scores 0 unsent."""
    worker = worker_for(isolation)
    jobs: list[bytes | None] = []
    for config, entry, answer in zip(configs, entries, answers, strict=True):
        if not inert(answer, entry_modes(dataset, entry)):
            jobs.append(None)
            continue
        key = _key(dataset, config)
        worker.prepare("rg", key, (dataset, config))
        jobs.append(protocol.job("rg", key, entry, answer))
    return _scored(worker, jobs)


def math_verify_equal(targets: list[str], marks: list[str], isolation: str = "bwrap") -> list[bool]:
    """Per marked answer, does math-verify find it equal to its target (the answer read as
    LaTeX math first, then as text; the target likewise)."""
    worker = worker_for(isolation)
    return [value == 1.0 for value in
            _scored(worker, [protocol.job("math", str(t), str(m)) for t, m in zip(targets, marks, strict=True)])]


def score_calls(function: str, calls: list[tuple], isolation: str = "bwrap") -> list[float]:
    """``function(*args)`` for each args tuple, each in a fresh sandboxed child, as floats in
    [0, 1] (an error, a non-number or a timeout scores 0). ``function`` is ``module:name`` of
    a module importable from the environment's site-packages (the worker sees no project
    folder), for a plugin scorer that runs third-party parsers on model text."""
    module = function.partition(":")[0]
    worker = worker_for(isolation)
    worker.prepare("module", module, None)
    return _scored(worker, [protocol.job("call", function, tuple(args)) for args in calls])


def _scored(worker: ScoringWorker, jobs: list[bytes | None]) -> list[float]:
    """Each job's value (None: 0 unsent), from the cache where the same job was scored before:
    a scorer's value is a function of its job, so a batch scored once up front answers the
    single calls a grading policy makes after it."""
    keys = [None if job is None else (worker.isolation, hashlib.sha256(job).digest()) for job in jobs]
    jobs_of = {k: job for k, job in zip(keys, jobs) if k is not None}
    with _LOCK:
        values = {k: _CACHE[k] for k in jobs_of if k in _CACHE}
    todo = [k for k in jobs_of if k not in values]
    values.update(zip(todo, worker.score([jobs_of[k] for k in todo]) if todo else []))
    with _LOCK:
        for key in jobs_of:
            _CACHE[key] = values[key]
            _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return [0.0 if key is None else values[key] for key in keys]


def _key(dataset: str, config: dict) -> str:
    digest = hashlib.sha256(repr(sorted(config.items())).encode()).hexdigest()[:16]
    return f"rg:{dataset}:{digest}"
