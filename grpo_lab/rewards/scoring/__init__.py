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
import hashlib

from grpo_lab.rewards.scoring import protocol
from grpo_lab.rewards.scoring.guard import inert
from grpo_lab.rewards.scoring.launch import ScoringError, check
from grpo_lab.rewards.scoring.reach import scorer_modes
from grpo_lab.rewards.scoring.worker import ScoringWorker

__all__ = ["ScoringError", "ScoringWorker", "check", "math_verify_equal", "score_calls", "score_rg",
           "worker_for"]

_WORKERS: dict[str, ScoringWorker] = {}


def worker_for(isolation: str = "bwrap") -> ScoringWorker:
    """The process-wide scoring worker of this isolation, started on first use."""
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
    the evaluation its entry's scorer may apply (``reach.scorer_modes``) scores 0 unsent."""
    worker = worker_for(isolation)
    jobs: list[bytes | None] = []
    for config, entry, answer in zip(configs, entries, answers, strict=True):
        source = (entry.get("metadata") or {}).get("source_dataset", dataset)
        if not inert(answer, scorer_modes(source) | scorer_modes(dataset)):
            jobs.append(None)
            continue
        key = _key(dataset, config)
        worker.prepare("rg", key, (dataset, config))
        jobs.append(protocol.job("rg", key, entry, answer))
    return _scored(worker, jobs)


def math_verify_equal(targets: list[str], tagged: list[str | None], completions: list[str],
                      isolation: str = "bwrap") -> list[bool]:
    """Per completion, does math-verify find its answer equal to the target: the tagged answer
    parsed as LaTeX, else the whole completion."""
    worker = worker_for(isolation)
    jobs = [protocol.job("math", str(t), a, c) for t, a, c in zip(targets, tagged, completions, strict=True)]
    return [value == 1.0 for value in _scored(worker, jobs)]


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
    sent = [job for job in jobs if job is not None]
    values = iter(worker.score(sent) if sent else [])
    return [0.0 if job is None else next(values) for job in jobs]


def _key(dataset: str, config: dict) -> str:
    digest = hashlib.sha256(repr(sorted(config.items())).encode()).hexdigest()[:16]
    return f"rg:{dataset}:{digest}"
