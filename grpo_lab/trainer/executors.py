"""Cell executors: who trains a run, by its config's `trainer` (spec/config.py).

An executor is a function `train(cfg, out_dir, on_step=None, preempt=None, final_samples=None,
on_phase=None) -> Summary` that meets the run folder contract of grpo_lab/rundir.py (docs/executors.md). The
worker looks it up here by name; adding one is a new module and a line in EXECUTORS (and the
name in RunConfig.trainer's Literal), not a change to the worker or the driver. Modules load on
first use, so a sweep of grpo-lab runs never imports TRL.
"""

from __future__ import annotations

from importlib import import_module
from typing import Callable

EXECUTORS: dict[str, str] = {
    "grpo-lab": "grpo_lab.trainer.grpo:train",
    "trl": "grpo_lab.trainer.trl_executor:train",
}


def executor(name: str) -> Callable:
    """The train function of executor `name`."""
    if name not in EXECUTORS:
        raise ValueError(f"unknown trainer {name!r}; known: {', '.join(EXECUTORS)}")
    module, function = EXECUTORS[name].split(":")
    return getattr(import_module(module), function)
