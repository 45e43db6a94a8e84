"""What a screened sweep of a plan (`sweep --screen`, execution/screen.py) will spend, before any
compute: a range, since which arms the screening drops depends on the data.

A screened cell is the same run as an unscreened one, paused at each rung and resumed from its own
checkpoint, so no step is paid twice. Per (model label, task), with f_r = rung step / full steps and
E_c each cell's estimate:

    most      nothing dropped: Σ_c E_c, the plan's total
    at rung r every arm that can be dropped is dropped at r: its cells pay f_r·E_c, the kept arm's E_c
    least     the same at the first rung

The kept arm is the baseline (analysis/screening.py never drops it; when it reads best, every other
arm can go); without a baseline arm, the best arm must survive, and the least keeps the cheapest.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grpo_lab.spec.arm import BASELINE, arm_key
from grpo_lab.spec.budget import fmt_hours

if TYPE_CHECKING:
    from grpo_lab.spec.plan import Plan


@dataclass(frozen=True)
class RungSpend:
    rung: int  # 1-based, as the sweep's rung lines count them
    step: int
    fraction: float  # step / full steps
    hours: float  # the sweep's device-hours when every droppable arm is dropped here


@dataclass(frozen=True)
class ScreeningSpend:
    """A screened sweep's spend in device-hours: `most` (nothing dropped) down to `least` (every
    droppable arm dropped at the first rung), and per rung the spend when they are dropped there."""

    full: int  # steps of every cell
    most: float
    rungs: tuple[RungSpend, ...]
    droppable: int  # arms that can be dropped, over all (model, task)
    arms: int
    price: float  # per device-hour

    @property
    def least(self) -> float:
        return self.rungs[0].hours

    def to_dict(self) -> dict:
        """The `screening` key of `plan --json`."""
        return {"full_steps": self.full, "arms": self.arms, "droppable_arms": self.droppable,
                "most": {"gpu_hours": self.most, "cost": self.most * self.price},
                "least": {"gpu_hours": self.least, "cost": self.least * self.price},
                "rungs": [{"rung": r.rung, "step": r.step, "fraction": r.fraction, "gpu_hours": r.hours,
                           "cost": r.hours * self.price} for r in self.rungs],
                "note": DATA_NOTE}

    def describe(self, unit: str) -> list[str]:
        """The lines `plan --screen` and `sweep --screen` print under the plan."""
        fractions = ", ".join(f"{r.fraction:g}" for r in self.rungs)
        if not self.droppable:
            return [f"--screen (rungs {fractions} of {self.full} steps): {fmt_hours(self.most)} {unit}, the full plan: "
                    "no arm can be dropped (each model and task has only the arm screening keeps)"]
        lines = [f"--screen (rungs {fractions} of {self.full} steps): {fmt_hours(self.least)} to "
                 f"{fmt_hours(self.most)} {unit}, cost ~{self.least * self.price:,.2f} to ~{self.most * self.price:,.2f}",
                 f"  most {fmt_hours(self.most)}: nothing dropped, the full plan (a screened run resumes its own "
                 "checkpoint at each rung: no step is paid twice)"]
        for r in self.rungs:
            lines.append(f"  dropped at rung {r.rung} (step {r.step}): {fmt_hours(r.hours)} {unit}, cost "
                         f"~{r.hours * self.price:,.2f}, when {self.droppable} of {self.arms} arms stop there (all "
                         "but the baseline of each model and task, or its cheapest arm where it has none)")
        lines.append(f"  least {fmt_hours(self.least)}: those arms dropped at the first rung; {DATA_NOTE}")
        return lines


DATA_NOTE = ("what a screening saves depends on the data: the plan cannot know which arms will be dropped, "
             "so the sweep spends anywhere in this range")


def arm_hours(plan: Plan) -> dict[tuple[str, str], dict[str, float]]:
    """(model label, task) -> arm key -> the arm's estimated device-hours over its seeds."""
    out: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for cell, estimate in zip(plan.cells, plan.estimates):
        out[cell.model, cell.task][arm_key(cell.tricks)] += estimate.total
    return out


def kept_arm(arms: dict[str, float]) -> str:
    """The arm no screening drops in the cheapest case: the baseline, else the cheapest arm."""
    return BASELINE if BASELINE in arms else min(arms, key=lambda key: (arms[key], key))


def screening_spend(plan: Plan, steps: list[int]) -> ScreeningSpend:
    """The range of the module docstring. steps: the decision rungs' steps then the full length,
    as analysis/screening.rung_steps gives them."""
    *rungs, full = steps
    if not rungs or full <= 0:
        raise ValueError(f"screening steps {steps}: at least one rung before the full length")
    groups = arm_hours(plan)
    kept = sum(arms[kept_arm(arms)] for arms in groups.values())
    dropped = plan.total - kept
    spends = tuple(RungSpend(i + 1, step, step / full, kept + dropped * step / full) for i, step in enumerate(rungs))
    return ScreeningSpend(full=full, most=plan.total, rungs=spends, droppable=sum(len(a) - 1 for a in groups.values()),
                          arms=sum(len(a) for a in groups.values()), price=plan.price)
