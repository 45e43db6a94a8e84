"""What a screened sweep of a plan (`sweep --screen`, execution/screen.py) will spend, before any
compute: a range, since which arms the screening drops depends on the data.

A screened cell is the same run as an unscreened one, paused at each rung and resumed from its own
checkpoint, so no step is paid twice; each resume is one more attempt, which pays a run's fixed
cost again (process start, model and checkpoint load: the estimate's `fixed` phase, measured by the
registry's calibration, 0 on a FLOPs-only estimate). Per (model label, task), with R decision rungs,
f_r = rung r's step / full steps, and each cell's estimate E_c of which F_c fixed:

    kept      the arm no screening can drop: E_c + R·F_c (paused at every rung, resumed R times)
    most      nothing dropped: Σ_c E_c + R·F_c
    at rung r every arm that can be dropped is dropped at r (1-based): its cells pay
              f_r·(E_c − F_c) + r·F_c (started once, resumed r − 1 times), the kept arm's as above
    least     the same at the first rung (a later drop pays more steps and more resumes)

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

    resumes: float = 0.0  # device-hours of the R resumes of every cell, inside `most`

    @property
    def least(self) -> float:
        return self.rungs[0].hours

    def to_dict(self) -> dict:
        """The `screening` key of `plan --json`."""
        return {"full_steps": self.full, "arms": self.arms, "droppable_arms": self.droppable,
                "most": {"gpu_hours": self.most, "cost": self.most * self.price, "resumes_gpu_hours": self.resumes},
                "least": {"gpu_hours": self.least, "cost": self.least * self.price},
                "rungs": [{"rung": r.rung, "step": r.step, "fraction": r.fraction, "gpu_hours": r.hours,
                           "cost": r.hours * self.price} for r in self.rungs],
                "note": DATA_NOTE}

    def describe(self, unit: str) -> list[str]:
        """The lines `plan --screen` and `sweep --screen` print under the plan."""
        fractions = ", ".join(f"{r.fraction:g}" for r in self.rungs)
        if not self.droppable:
            return [f"--screen (rungs {fractions} of {self.full} steps): {fmt_hours(self.most)} {unit}, the full plan "
                    f"with {fmt_hours(self.resumes)} for its resumes: no arm can be dropped (each model and task has only the arm screening keeps)"]
        lines = [f"--screen (rungs {fractions} of {self.full} steps): {fmt_hours(self.least)} to "
                 f"{fmt_hours(self.most)} {unit}, cost ~{self.least * self.price:,.2f} to ~{self.most * self.price:,.2f}",
                 f"  most {fmt_hours(self.most)}: nothing dropped, the full plan and {fmt_hours(self.resumes)} for "
                 f"{len(self.rungs)} resume(s) per run (a screened run resumes its own checkpoint at each rung: no "
                 "step is paid twice, but each resume pays the run's fixed start-up again)"]
        for r in self.rungs:
            lines.append(f"  dropped at rung {r.rung} (step {r.step}): {fmt_hours(r.hours)} {unit}, cost "
                         f"~{r.hours * self.price:,.2f}, when {self.droppable} of {self.arms} arms stop there (all "
                         "but the baseline of each model and task, or its cheapest arm where it has none)")
        lines.append(f"  least {fmt_hours(self.least)}: those arms dropped at the first rung; {DATA_NOTE}")
        return lines


DATA_NOTE = ("what a screening saves depends on the data: the plan cannot know which arms will be dropped, "
             "so the sweep spends anywhere in this range")


def arm_hours(plan: Plan) -> dict[tuple[str, str], dict[str, tuple[float, float]]]:
    """(model label, task) -> arm key -> the arm's (estimated, fixed) device-hours over its seeds."""
    out: dict[tuple[str, str], dict[str, tuple[float, float]]] = defaultdict(lambda: defaultdict(lambda: (0.0, 0.0)))
    for cell, estimate in zip(plan.cells, plan.estimates):
        total, fixed = out[cell.model, cell.task][arm_key(cell.tricks)]
        out[cell.model, cell.task][arm_key(cell.tricks)] = (total + estimate.total,
                                                           fixed + estimate.phases.get("fixed", 0.0))
    return out


def kept_arm(arms: dict[str, tuple[float, float]]) -> str:
    """The arm no screening drops in the cheapest case: the baseline, else the cheapest arm."""
    return BASELINE if BASELINE in arms else min(arms, key=lambda key: (arms[key][0], key))


def screening_spend(plan: Plan, steps: list[int]) -> ScreeningSpend:
    """The range of the module docstring. steps: the decision rungs' steps then the full length,
    as analysis/screening.rung_steps gives them."""
    *rungs, full = steps
    if not rungs or full <= 0:
        raise ValueError(f"screening steps {steps}: at least one rung before the full length")
    groups = arm_hours(plan)
    kept = [arms[kept_arm(arms)] for arms in groups.values()]
    dropped = [hours for arms in groups.values() for key, hours in arms.items() if key != kept_arm(arms)]
    n = len(rungs)
    kept_hours = sum(total + n * fixed for total, fixed in kept)
    spends = tuple(RungSpend(r, step, step / full, kept_hours + sum(step / full * (total - fixed) + r * fixed
                                                                    for total, fixed in dropped))
                   for r, step in enumerate(rungs, start=1))
    resumes = n * sum(fixed for arms in groups.values() for _, fixed in arms.values())
    return ScreeningSpend(full=full, most=plan.total + resumes, rungs=spends, droppable=len(dropped),
                          arms=sum(len(a) for a in groups.values()), price=plan.price, resumes=resumes)
