"""What a sweep compares: contrasts of arm means within one (model, task).

A contrast is θ = Σ_a c_a·μ_a over the arms a of one cell, estimated by Σ_a c_a·ȳ_a, with
Σ_a c_a = 0 so that whatever moves every arm alike (the cell's level) cancels. The sweep makes two
kinds, over arm keys (spec.arm.arm_key: '+'-joined sorted trick names, BASELINE for none):

    effect of S        c: S +1, B −1                       θ = μ_S − μ_B
    interaction of C   c: C +1, each t∈C −1, B +(k−1)      θ = μ_C − Σ_{t∈C} μ_t + (k−1)·μ_B
                                                           (observed − additive, k = |C|)

One spelling of the weights serves both analyses: the `--decide` loop (analysis/decide.py) puts a
confidence sequence on each `Contrast`, the fixed-design report (analysis/interactions.py) a
t-interval on the same coefficients.
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_lab.spec.arm import BASELINE

# spec.arm.Arm's (model, task, key) as a plain tuple: how analyses index seeds, costs and β per arm
ArmId = tuple[str, str, str]

Coefs = tuple[tuple[str, float], ...]  # (arm key, c_a), the contrast's arm first


def effect_coefs(key: str, baseline: str = BASELINE) -> Coefs:
    """μ_key − μ_baseline."""
    return ((key, 1.0), (baseline, -1.0))


def interaction_coefs(key: str, baseline: str = BASELINE) -> Coefs:
    """μ_key − Σ_{t∈key} μ_t + (k−1)·μ_baseline for the combination `key` of k singles."""
    singles = key.split("+")
    return ((key, 1.0), *((s, -1.0) for s in singles), (baseline, len(singles) - 1.0))


@dataclass(frozen=True)
class Contrast:
    """Σ_a c_a·ȳ_a over the arms of one (model, task), Σ_a c_a = 0 (module docstring)."""

    model: str
    task: str
    kind: str  # "effect" | "interaction"
    target: str  # the arm key it is about
    coefs: Coefs

    @property
    def name(self) -> str:
        return f"{self.model}/{self.task}/{self.kind}:{self.target}"

    @property
    def span(self) -> tuple[float, float]:
        """Range of a paired difference Σ c_a y_a for scores y_a ∈ [0, 1]."""
        return (sum(c for _, c in self.coefs if c < 0), sum(c for _, c in self.coefs if c > 0))

    def arms(self) -> list[ArmId]:
        return [(self.model, self.task, k) for k, _ in self.coefs]


def contrasts(cells: dict[tuple[str, str], list[str]], baseline: str = BASELINE) -> list[Contrast]:
    """Every effect vs baseline and every interaction vs additive of the cells' arm keys, in a
    stable order: per (model, task) sorted, its effects by key, then its interactions by key (a
    combination only when all its singles ran). A cell without the baseline has none."""
    out = []
    for (model, task), keys in sorted(cells.items()):
        if baseline not in keys:
            continue
        for key in sorted(k for k in keys if k != baseline):
            out.append(Contrast(model, task, "effect", key, effect_coefs(key, baseline)))
        for key in sorted(k for k in keys if "+" in k):
            if all(s in keys for s in key.split("+")):
                out.append(Contrast(model, task, "interaction", key, interaction_coefs(key, baseline)))
    return out
