"""Why a run taught nothing: the first cause its metrics show, in words a user can act on.

GRPO learns only from groups whose rewards differ. A run on a new prompt set that ends where it
began has one of a few causes, each visible in metrics.jsonl: no completion met the format, every
group was all-wrong (the model cannot read the prompts, or they are too hard) or all-right, almost
no sample moved the policy, or the signal was there and the run was too short. `diagnose` names
the first that holds; `grpo-lab run` prints it and the report shows it per model and task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

NO_GAIN = 0.02  # a run whose eval pass@1 rose less than this "taught nothing"
EQUAL_GROUPS = 0.95  # share of groups with one reward across all samples: no signal
FEW_EFFECTIVE = 0.10  # share of samples that moved the policy, below which the signal was too thin
SOLVED_NEVER, SOLVED_ALWAYS = 0.05, 0.95  # mean task reward (in [0, 1]) of all-wrong and all-right groups


@dataclass(frozen=True)
class Diagnosis:
    cause: str  # what the metrics show, with the numbers
    advice: str  # what to change

    def line(self) -> str:
        return f"taught nothing: {self.cause}; {self.advice}"


def diagnose(gain: float | None, steps: list[dict], effective_samples: int | None,
             compact_only: bool = False) -> Diagnosis | None:
    """The run's cause of no learning, or None when it logged no step or gained at least NO_GAIN
    eval pass@1. A run with no signal at all (no completion met the format, every group scored
    alike) is diagnosed whatever its eval did: with no policy gradient, a change of a small eval
    is noise.

    gain: final minus base eval pass@1 (Summary.delta_pass_at_1); steps: metrics.jsonl rows
    (reward/mean, reward/zero_std_frac, format/ok_frac, samples/total); compact_only: the model
    reads only the compact register (the tiny model), so a prompt in another form is noise to it.
    """
    if not steps:
        return None
    fmt, equal, reward = (_mean(steps, k) for k in ("format/ok_frac", "reward/zero_std_frac", "reward/mean"))
    reading = ("the tiny model reads only compact prompts like '3+4=' (see `grpo-lab tasks`): use a compact "
               "task or another model" if compact_only else "check the prompt format the model expects "
               "(its chat template) and the samples in completions.jsonl; a chat model that never writes the answer "
               "marks learns them from a solved example before each prompt (prompt_shots: 1)")
    if fmt is not None and fmt == 0.0:
        return Diagnosis("no completion met the task's answer format in any step", reading)
    if equal is not None and equal >= 1.0 and reward is not None:
        return _equal_groups(equal, reward, reading)
    if gain is not None and gain >= NO_GAIN:
        return None
    if equal is not None and equal >= EQUAL_GROUPS and reward is not None:
        return _equal_groups(equal, reward, reading)
    samples = sum(int(s.get("samples/total") or 0) for s in steps)
    if effective_samples is not None and samples and effective_samples / samples < FEW_EFFECTIVE:
        return Diagnosis(f"only {effective_samples} of {samples} samples ({effective_samples / samples:.0%}) moved "
                         "the policy", "raise the group size (sampling.group_size) or the sampling temperature")
    return Diagnosis(f"rewards varied ({1 - (equal or 0.0):.0%} of groups) but eval pass@1 moved "
                     f"{_signed(gain)} in {len(steps)} steps", "train longer, or raise optim.lr")


def _equal_groups(equal: float, reward: float, reading: str) -> Diagnosis:
    """Groups that scored alike: all wrong (mean reward near 0), all right (near 1), or each one or the other."""
    said = f"{equal:.0%} of groups scored the same on every sample (mean reward {reward:.2f})"
    if reward <= SOLVED_NEVER:
        return Diagnosis(f"{said}: it almost never solved a training problem, so GRPO had no signal",
                         f"{reading}; or start easier (difficulty: 0) or add a partial-credit reward")
    if reward >= SOLVED_ALWAYS:
        return Diagnosis(f"{said}: it already solved them, so GRPO had no signal", "train on harder problems")
    return Diagnosis(f"{said}: each problem was solved by every sample or by none, so GRPO had no signal",
                     "mix difficulties (curriculum), raise the group size or the sampling temperature")


def _mean(steps: list[dict], key: str) -> float | None:
    values = [float(s[key]) for s in steps if isinstance(s.get(key), (int, float)) and math.isfinite(s[key])]
    return sum(values) / len(values) if values else None


def _signed(gain: float | None) -> str:
    return "unknown" if gain is None else f"{gain:+.3f}"


def diagnose_run(folder) -> Diagnosis | None:
    """`diagnose` of a run folder that holds a summary (None without one)."""
    from grpo_lab.rundir import RunDir
    from grpo_lab.spec.model_cards import load_card
    from grpo_lab.util.yamlio import ConfigError

    run = RunDir(folder)
    summary = run.summary()
    if summary is None:
        return None
    try:
        compact = load_card(summary.model).kind == "tiny" if summary.model else False
    except (ConfigError, OSError):  # a model given by a path that is gone
        compact = False
    return diagnose(summary.delta_pass_at_1, run.metrics(), summary.effective_samples, compact)
