"""Preflight: check a config's reward signal, group diversity and environment before training.

`preflight(cfg)` samples the base model as the run would at step 0 and returns verdicts; any red
verdict means the run would waste its compute (a constant reward, a shaping term that drowns the
task reward, groups that repeat one answer). `sweep` calls it once per (model, task).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from grpo_lab.util.environment import environment
from grpo_lab.preflight.checks import Check
from grpo_lab.preflight.diversity import (
    diversity_checks,
    diversity_summary,
    group_diversity,
)
from grpo_lab.preflight.env_checks import environment_checks
from grpo_lab.preflight.reward_signal import Component, component_stats, reward_checks
from grpo_lab.preflight.sampling import (
    DIVERSITY_SEED,
    PREFLIGHT_SEED,
    Sampled,
    build,
    fixed_problems,
    sample,
)
from grpo_lab.spec.config import RunConfig
from grpo_lab.trainer.scoring import component_tensor


@dataclass
class PreflightResult:
    target: str  # "model / task"
    checks: list[Check]
    stats: dict[str, Any] = field(default_factory=dict)  # setup, reward components, diversity, env

    @property
    def red(self) -> bool:
        return any(c.verdict == "red" for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "red": self.red, "checks": [c.to_dict() for c in self.checks],
                "stats": self.stats}


def components(cfg: RunConfig, sampled: Sampled) -> dict[str, Component]:
    """Every reward component the config uses: the in-group normalised reward, the task reward
    apart when shaping is folded into it, the format mask, each shaping term, and each configured
    reward function (fn_<name>; a main one counts as task reward, a shape one as shaping)."""
    sc = sampled.scored
    out = {"main": Component("main", sc.main)}
    if cfg.reward.shape_mode == "in_main" and sampled.terms:
        out["task"] = Component("task", sc.raw)
    if cfg.reward.format == "mask":
        out["format_ok"] = Component("mask", sc.format_ok.float())
    out.update({name: Component("shape", v) for name, v in sampled.terms.items()})
    for f in cfg.reward.plugin_functions():
        role = "task" if f.role == "main" else "shape"
        out[f"fn_{f.label}"] = Component(role, component_tensor(sc.components, f.label))
    return out


def preflight(cfg: RunConfig, *, samples: int = 1000, diversity_prompts: int = 20,
              pin: dict[str, Any] | None = None) -> PreflightResult:
    """Score `samples` completions (ceil(samples / G) fixed prompts x G) with every reward
    component, sample G completions for `diversity_prompts` other prompts, compare the
    environment with `pin`; return the verdicts and the statistics behind them."""
    t0 = time.perf_counter()
    s = build(cfg)
    G = cfg.sampling.group_size
    signal = sample(s, fixed_problems(s, math.ceil(samples / G), PREFLIGHT_SEED), G, PREFLIGHT_SEED)
    comps = components(cfg, signal)
    stats = {name: component_stats(c.values) for name, c in comps.items()}
    div = sample(s, fixed_problems(s, diversity_prompts, DIVERSITY_SEED), G, DIVERSITY_SEED)
    groups = group_diversity([p.prompt for p in div.problems], div.scored.answers, div.scored.texts)
    summary = diversity_summary(groups, stats["main"]["zero_var_share"])
    env = environment()
    checks = reward_checks(comps, stats) + diversity_checks(summary) + environment_checks(env, pin)
    setup = {"samples": signal.scored.main.numel(), "G": G, "temperature": s.temperature,
             "top_p": cfg.sampling.top_p, "max_new_tokens": cfg.sampling.max_new_tokens,
             "seed": PREFLIGHT_SEED, "run_id": cfg.run_id(), "seconds": time.perf_counter() - t0}
    return PreflightResult(f"{cfg.model} / {'+'.join(cfg.tasks)}", checks, {
        "setup": setup, "reward": stats, "diversity": {**summary, "groups_detail": groups}, "env": env})


__all__ = ["Check", "PreflightResult", "components", "preflight"]
