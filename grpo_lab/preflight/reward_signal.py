"""Reward-signal statistics over fixed samples (docs/study.md "Budget tiers": score 1,000 fixed samples
with every reward component, look at variance and outliers). Pure functions of [N, G] tensors.

Outliers are counted two ways. Tukey fences (beyond 1.5 x IQR from the quartiles) are reported
only: on a sparse 0/1 reward the IQR is 0 and every success lies outside them. The flag uses
|z| > 4, which a Gaussian exceeds once in ~16,000 draws, and only on components with more than
two distinct values: a rare value of a 0/1 reward is the signal, not noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch

from grpo_lab.preflight.checks import Check

QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
TUKEY_K = 1.5
EXTREME_Z = 4.0
EXTREME_SHARE_RED = 0.01  # 1% of samples beyond |z| > 4 is ~160x what a Gaussian gives
ZERO_VAR_YELLOW = 0.5  # half the groups give no gradient: half the sampling is wasted
ZERO_VAR_RED = 0.9  # nine groups in ten give no gradient: there is almost nothing to learn from
EPS = 1e-12

# main: the reward normalised in-group; task: the task reward alone (listed apart when shaping is
# folded into main); shape: a shaping term; mask: format_ok when bad format is masked out.
Role = Literal["main", "task", "shape", "mask"]


@dataclass(frozen=True)
class Component:
    role: Role
    values: torch.Tensor  # [N groups, G samples]


def component_stats(values: torch.Tensor) -> dict[str, float]:
    """Mean, std, quantiles, zero-variance group share, outlier counts of one [N, G] component."""
    flat = values.double().flatten()
    mean, std = flat.mean(), flat.std(unbiased=False)
    q = torch.quantile(flat, torch.tensor(QUANTILES, dtype=torch.float64))
    iqr = q[3] - q[1]
    tukey = (flat < q[1] - TUKEY_K * iqr) | (flat > q[3] + TUKEY_K * iqr)
    z = (flat - mean) / std if std > EPS else torch.zeros_like(flat)
    spread = values.double().amax(dim=1) - values.double().amin(dim=1)
    return {
        "n": flat.numel(),
        "mean": float(mean),
        "std": float(std),
        **{f"q{round(p * 100):02d}": float(v) for p, v in zip(QUANTILES, q)},
        "zero_var_share": float((spread <= EPS).double().mean()),
        "tukey_outliers": int(tukey.sum()),
        "extreme_outliers": int((z.abs() > EXTREME_Z).sum()),
        "distinct": int(torch.unique(flat).numel()),
    }


def reward_checks(components: Mapping[str, Component], stats: Mapping[str, Mapping[str, float]]) -> list[Check]:
    """Verdicts for every component's statistics (`stats[name]` = component_stats of it)."""
    main = stats["main"]
    task_std = stats["task"]["std"] if "task" in stats else main["std"]
    checks = [_zero_var_check(main)]
    for name, comp in components.items():
        s = stats[name]
        checks.append(_spread_check(name, comp.role, s, task_std))
        if s["distinct"] > 2:
            checks.append(_outlier_check(name, s))
    return checks


def _spread_check(name: str, role: Role, s: Mapping[str, float], task_std: float) -> Check:
    value = f"std {s['std']:.4g}, mean {s['mean']:.4g}"
    if role in ("main", "task"):
        red = s["std"] <= EPS
        return Check(f"reward/{name}: variance", value, "std > 0", "red" if red else "green",
                     "constant reward: every advantage is zero, nothing is learned" if red else "")
    if role == "mask":
        red = s["mean"] <= EPS
        return Check(f"reward/{name}: format mask", f"{s['mean']:.1%} well-formed", "> 0% well-formed",
                     "red" if red else "green", "every sample is masked out of the loss" if red else "")
    if s["std"] <= EPS:
        return Check(f"reward/{name}: variance", value, "std > 0", "yellow",
                     "the term never varies on base-model samples: it shifts rewards but steers nothing")
    red = s["std"] > task_std
    return Check(f"reward/{name}: vs task std", value, f"std <= task std {task_std:.4g}",
                 "red" if red else "green",
                 "a shaping term outweighs the task reward (STUDY: format bonus in the main reward)" if red else "")


def _outlier_check(name: str, s: Mapping[str, float]) -> Check:
    share = s["extreme_outliers"] / max(s["n"], 1)
    verdict = "red" if share > EXTREME_SHARE_RED else "yellow" if s["extreme_outliers"] else "green"
    note = "" if verdict == "green" else "a few extreme samples will dominate z-scored advantages"
    return Check(f"reward/{name}: outliers", f"{s['extreme_outliers']} at |z|>{EXTREME_Z:g} "
                 f"({share:.1%}); {s['tukey_outliers']} beyond 1.5xIQR",
                 f"<= {EXTREME_SHARE_RED:.0%} at |z|>{EXTREME_Z:g}", verdict, note)


def _zero_var_check(main: Mapping[str, float]) -> Check:
    share = main["zero_var_share"]
    verdict = "red" if share >= ZERO_VAR_RED else "yellow" if share > ZERO_VAR_YELLOW else "green"
    note = "" if verdict == "green" else "groups whose G rewards are equal give zero advantage"
    return Check("reward/main: zero-variance groups", f"{share:.1%}",
                 f"<= {ZERO_VAR_YELLOW:.0%} (red >= {ZERO_VAR_RED:.0%})", verdict, note)
