"""Synthetic analysis frames for the report tests: 1 model, 2 tasks, 8 trick sets, 3 seeds.

The combination kl_decay+ema_ref is flagged (negative interaction, collapsed) on math; adv_clip
gains nothing significant; lr_high is worse than the baseline; group16 gains but costs 2x.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from grpo_lab.report import ReportData, write_report

TASKS = ["math", "logic"]
SETS = {  # trick set -> (gain on pass@1, hours multiplier)
    "baseline": (0.0, 1.0), "kl_decay": (0.03, 1.0), "ema_ref": (0.02, 1.05),
    "adv_clip": (0.002, 1.0), "lr_high": (-0.05, 1.0), "group16": (0.01, 2.0),
    "kl_decay+ema_ref": (-0.04, 1.05), "ema_ref+adv_clip": (0.022, 1.05),
}
FLAGGED = ("math", "kl_decay+ema_ref")
STEPS = 60
HOSTILE = "G & T changed together <b>not bold</b> | pipe"


def _curve(gain: float, seed: int, collapsed: bool) -> np.ndarray:
    steps = np.arange(STEPS)
    reward = 0.2 + (0.4 + gain * 4) * (1 - np.exp(-steps / 15)) + 0.02 * np.sin(steps + seed)
    if collapsed:
        reward[40:] = 0.05
    return reward


def _runs_and_steps() -> tuple[pl.DataFrame, pl.DataFrame]:
    runs, steps = [], []
    for task in TASKS:
        for tricks, (gain, cost) in SETS.items():
            for seed in range(3):
                run_id = f"{task}-{tricks}-{seed}"
                collapsed = (task, tricks) == FLAGGED
                reward = _curve(gain, seed, collapsed)
                evals = [0.4 + gain + 0.01 * seed + i / 600 if i % 10 == 0 else None
                         for i in range(STEPS)]
                length = 40 + np.arange(STEPS) * (1.5 if tricks == "ema_ref" else 0.2)
                runs.append({
                    "model": "tiny", "task": task, "tricks": tricks, "seed": seed,
                    "run_id": run_id,
                    "status": "failed" if run_id == "logic-group16-2" else "finished",
                    "pass@1": 0.5 + gain + 0.005 * seed, "pass@1_best": 0.52 + gain,
                    "pass@k": 0.7 + gain, "reward_final": float(reward[-1]),
                    "reward_auc": float(reward.mean()), "steps_to_90": 30.0, "oscillation": 0.02,
                    "length_slope": float(length[1] - length[0]),
                    "length_ratio": float(length[-1] / length[0]), "alarms": 2 if collapsed else 0,
                    "alarm_kinds": "reward_cliff+repetition" if collapsed else "",
                    "collapsed": collapsed, "gpu_hours": 0.1 * cost,
                    "cost_per_effective_sample": 2e-6 * cost, "effective_samples": 50_000.0,
                    "sampling_share": 0.6, "base_pass@1": 0.3 + 0.01 * seed,
                })
                steps.append(pl.DataFrame({
                    "run_id": [run_id] * STEPS, "step": list(range(STEPS)),
                    "reward/mean": reward, "eval/pass@1": evals, "length/mean": length,
                    "entropy/mean": np.linspace(2, 1, STEPS), "kl/mean": np.linspace(0, 0.1, STEPS),
                    "diversity/unique_answer_ratio": np.full(STEPS, 0.8)}))
    return pl.DataFrame(runs), pl.concat(steps)


def _effects() -> pl.DataFrame:
    rows = []
    for task in TASKS:
        for tricks, (gain, _) in SETS.items():
            if tricks != "baseline":
                half = 0.004 if tricks != "adv_clip" else 0.01
                rows.append({"model": "tiny", "task": task, "tricks": tricks, "n": 3,
                             "effect": gain, "ci_low": gain - half, "ci_high": gain + half,
                             "p_value": 1e-4 if abs(gain) > half else 0.5})
    return pl.DataFrame(rows)


def _interactions() -> pl.DataFrame:
    rows = []
    for task in TASKS:
        for tricks in ("kl_decay+ema_ref", "ema_ref+adv_clip"):
            flagged = (task, tricks) == FLAGGED
            expected = sum(SETS[t][0] for t in tricks.split("+"))
            observed = SETS[tricks][0] if flagged else expected + 0.001
            rows.append({
                "model": "tiny", "task": task, "tricks": tricks, "n_tricks": 2, "n_seeds": 3,
                "expected": expected, "observed": observed, "interaction": observed - expected,
                "ci_low": observed - expected - 0.01, "ci_high": observed - expected + 0.01,
                "p_value": 0.001 if flagged else 0.6, "q_value": 0.004 if flagged else 0.7,
                "p_holm": 0.004 if flagged else 1.0, "best_single": tricks.split("+")[0],
                "best_single_effect": 0.03,
                "verdict": "negative_interaction" if flagged else "additive",
                "seeds_needed": None if flagged else 12, "warnings": HOSTILE if flagged else ""})
    return pl.DataFrame(rows)


def make_data() -> ReportData:
    runs, steps = _runs_and_steps()
    events = pl.DataFrame({
        "run_id": ["math-kl_decay+ema_ref-0", "math-kl_decay+ema_ref-1", "math-kl_decay+ema_ref-2",
                   "math-kl_decay+ema_ref-0", "logic-lr_high-1"],
        "step": [40, 41, 40, 45, 20], "kind": ["reward_cliff", "reward_cliff", "reward_cliff",
                                               "repetition", "kl_spike"],
        "value": [-0.5, -0.4, -0.5, 0.9, 0.3]})
    costs = {"unit": "device-hours (cpu)", "by_phase": {"sampling": 3.1, "reward": 0.2,
             "reference": 0.4, "training": 1.2, "eval": 0.5}, "total": 5.4, "wasted": 0.1,
             "split": {"main matrix": 3.5, "search and reruns": 0.6, "sampling and eval": 1.3},
             "price_per_gpu_hour": None, "cost_per_effective_sample": 2.2e-6}
    env = {"python": "3.11.9", "torch": "2.5.1", "polars": pl.__version__, "git commit": "4b9f8c6"}
    meta = {"sweep": "test-sweep", "matrix": "matrices/quickstart.yaml", "metric": "pass@1",
            "created": "2025-01-01T00:00:00Z",
            "commands": ["grpo-lab sweep matrices/quickstart.yaml", "grpo-lab report test-sweep"]}
    return ReportData(runs, steps, _effects(), _interactions(), events, costs, env, meta)


@pytest.fixture(scope="session")
def report_data() -> ReportData:
    return make_data()


@pytest.fixture(scope="session")
def written(report_data: ReportData, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(index.html, report.md) of the synthetic sweep, written once per session."""
    return write_report(report_data, tmp_path_factory.mktemp("report"))


def verdict(target: str, label: str, est: float, radius: float, *, task: str = "math", model: str = "tiny",
            kind: str = "effect", estimand: str = "healthy", seeds: int = 5, runs: int = 5,
            collapsed: tuple[int, int] = (0, 0), collapse: str = "open", collapse_span: tuple[float, float] = (-0.3, 0.3),
            reason: str = "", wave: int | None = 0, hours: float | None = 0.5, delta_at_cap: float | None = None):
    """A --decide Verdict (analysis/verdict.py) as execution/waves.report_rows returns them: the
    trick arm and the baseline each collapsed `collapsed` of `runs` runs."""
    from grpo_lab.analysis.collapse import CollapseVerdict
    from grpo_lab.analysis.verdict import Verdict

    counts = ((target, collapsed[0], runs), ("baseline", collapsed[1], runs))
    col = CollapseVerdict(counts, (collapsed[0] - collapsed[1]) / runs, *collapse_span, runs, collapse)
    return Verdict(name=f"{model}/{task}/{kind}:{target}", kind=kind, model=model, task=task, target=target,
                   estimand=estimand, label=label, est=est, lower=est - radius, upper=est + radius, sigma=0.01,
                   seeds=seeds, runs=runs, collapse=col, reason=reason, wave=wave, hours=hours,
                   delta_at_cap=delta_at_cap)
