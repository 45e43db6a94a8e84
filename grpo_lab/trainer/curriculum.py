"""Which problems a step trains on: uniform mix, adaptive sampling, or two stages.

Arms are (task, difficulty) pairs. Every group is task-homogeneous by construction: one group
is G samples of one problem. Adaptive sampling up-weights arms whose recent mean reward is below
the threshold and down-weights those above it, smoothly (weight boost**x, x in [-1, 1] the
arm's distance below the threshold relative to it); two-stage switches to the uniform mix after
`switch_frac` of the steps, so the final task mix is not skewed. With `retire_at` set, a problem
whose group reached that mean reward is not drawn again (ScaleRL's no-positive-resampling).
"""

from __future__ import annotations

import random
from collections import deque

from grpo_lab.tasks.base import Problem


MODES = {  # curriculum.mode -> how step `step` of `total` samples
    "uniform": lambda step, total, cfg: "uniform",
    "adaptive": lambda step, total, cfg: "adaptive",
    "two_stage": lambda step, total, cfg: "adaptive" if step < cfg.switch_frac * total else "uniform",
}


def solved(problems: list[Problem], group_means: list[float], retire_at: float | None) -> set[str]:
    """uids of the problems whose group's mean reward (the pass rate, for 0/1 rewards) is >= retire_at.

    ScaleRL's no-positive-resampling: such a prompt gives (nearly) zero-variance groups from then on,
    so sampling it again spends rollouts on no gradient. retire_at None retires nothing.
    problems and group_means are parallel, one entry per group.
    """
    if retire_at is None:
        return set()
    return {p.uid for p, r in zip(problems, group_means) if r >= retire_at}


def live(pool: list[Problem], retired: set[str]) -> list[Problem]:
    """The pool without its retired problems; the whole pool once every one is retired, so an arm
    never runs dry (a finite pool can be exhausted, ScaleRL's data set was not)."""
    return [p for p in pool if p.uid not in retired] or pool


class Curriculum:
    def __init__(self, tasks: list, cfg, total_steps: int, seed: int, difficulty: int | None, pool_size: int):
        self.cfg, self.total = cfg, total_steps
        self.rng = random.Random(seed)
        levels = lambda t: [difficulty] if difficulty is not None else list(range(t.levels))
        self.arms = [(t.name, d) for t in tasks for d in levels(t)]
        self.pools: dict[tuple, list[Problem]] = {
            (t.name, d): t.problems("train", pool_size, seed=seed, difficulty=d) for t in tasks for d in levels(t)
        }
        self.recent = {arm: deque(maxlen=cfg.window) for arm in self.arms}
        self.retired: set[str] = set()

    def mode_at(self, step: int) -> str:
        """'uniform' or 'adaptive': how this step samples."""
        return MODES[self.cfg.mode](step, self.total, self.cfg)

    def weights(self, step: int) -> dict[tuple, float]:
        if self.mode_at(step) == "uniform":
            return {arm: 1.0 for arm in self.arms}
        out = {}
        for arm, hist in self.recent.items():
            if not hist:
                out[arm] = 1.0
            else:  # boost ** ((threshold - mean) / threshold), kept within [1/boost, boost]
                mean = sum(hist) / len(hist)
                x = max(-1.0, min(1.0, (self.cfg.threshold - mean) / max(self.cfg.threshold, 1e-9)))
                out[arm] = self.cfg.boost ** x
        return out

    def sample(self, step: int, n: int) -> list[Problem]:
        w = self.weights(step)
        arms = self.rng.choices(self.arms, weights=[w[a] for a in self.arms], k=n)
        return [self.rng.choice(live(self.pools[arm], self.retired)) for arm in arms]

    def retire(self, problems: list[Problem], group_means: list[float]) -> None:
        """Retire the problems these groups solved (cfg.retire_at); called on every sampled group,
        dynamic sampling's dropped ones too, since an all-correct group is the one it drops."""
        self.retired |= solved(problems, group_means, self.cfg.retire_at)

    def observe(self, problems: list[Problem], group_means: list[float]) -> None:
        """Record each group's mean reward under its arm (one value per arm per step)."""
        by_arm: dict[tuple, list[float]] = {}
        for p, r in zip(problems, group_means):
            by_arm.setdefault((p.task, p.difficulty), []).append(r)
        for arm, values in by_arm.items():
            if arm in self.recent:
                self.recent[arm].append(sum(values) / len(values))

    def metrics(self, step: int) -> dict[str, float]:
        w = self.weights(step)
        total = sum(w.values())
        # the retired count only where retiring is on, so other runs' metric sets stay as they were
        retired = {"curriculum/retired": float(len(self.retired))} if self.cfg.retire_at is not None else {}
        return {**{f"curriculum/p_{t}_{d}": v / total for (t, d), v in w.items()}, **retired}

    def state_dict(self) -> dict:
        return {"rng": self.rng.getstate(), "recent": {f"{t}|{d}": list(h) for (t, d), h in self.recent.items()},
                "retired": sorted(self.retired)}

    def load_state_dict(self, state: dict) -> None:
        self.rng.setstate(state["rng"])
        for key, values in state["recent"].items():
            t, d = key.split("|")
            self.recent[(t, int(d))].extend(values)
        self.retired = set(state.get("retired", []))  # absent in checkpoints from before retiring
