"""Per trick set: worth it, not worth its cost, harmful, or harmful in combination.

The rule, in order (the first that applies wins):
1. harmful in combination: the set is part of (or is) a combination whose interaction verdict on
   the same model and task is negative_interaction, harmful or collapsed_only_in_combination.
   This outranks a good solo effect on purpose: stacking it is where the compute gets lost.
2. harmful: its effect's CI lies entirely below 0.
3. not worth its cost: its CI includes 0 (or is missing): no significant gain to pay for.
4. worth it / not worth its cost: the gain is significant; it is worth it when the extra hours it
   costs per point of the metric stay within `max_hours_per_point` of a baseline run's hours
   (a trick that costs nothing extra is always worth it; unknown cost is said so in the reason).

The hours and the run metrics the tables show come from run_stats: one row per trick set, means
over its seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from grpo_lab.report.inputs import BASELINE, HARM_VERDICTS, KEYS
from grpo_lab.report.render import Tone, num

WORTH_IT = "worth it"
NOT_WORTH = "not worth its cost"
HARMFUL = "harmful"
HARMFUL_COMBO = "harmful in combination"
TONES: dict[str, Tone] = {WORTH_IT: "good", NOT_WORTH: "neutral", HARMFUL: "bad",
                          HARMFUL_COMBO: "bad"}

# Means over seeds of the run metrics the tables show (cost_per_effective_sample: the verdicts table).
_MEAN_COLUMNS = ["pass@1", "pass@1_best", "pass@k", "reward_final", "reward_auc", "steps_to_90",
                 "oscillation", "length_slope", "length_ratio", "cost_per_effective_sample"]


def run_stats(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per trick set: run counts, metric means over seeds, alarms, hours."""
    kind = pl.col("alarm_kinds").str.split("+").explode()
    kinds = kind.filter(kind != "").drop_nulls().unique().sort().str.join("+")
    return runs.group_by(KEYS).agg(
        pl.len().alias("runs"),
        (pl.col("status") == "finished").sum().alias("finished"),
        *[pl.col(c).mean() for c in _MEAN_COLUMNS],
        pl.col("alarms").sum().alias("alarms"),
        (pl.col("alarms") > 0).sum().alias("runs_with_alarms"),
        pl.col("collapsed").sum().alias("collapsed"),
        kinds.alias("alarm_kinds"),
        pl.col("gpu_hours").mean().alias("hours_per_run"),
    ).sort(KEYS)


@dataclass(frozen=True)
class VerdictPolicy:
    # One point of the metric in its own units: 0.01 is one percentage point of a 0-1 pass rate.
    point: float = 0.01
    # Extra hours per point a trick may cost, as a fraction of one baseline run's hours. At 0.5 the
    # study's G4->G8 (+3 pts for 2x sampling) is worth it and G8->G16 (+1 pt for 2x) is not.
    max_hours_per_point: float = 0.5


@dataclass(frozen=True)
class _Combo:
    parts: frozenset[str]
    tricks: str
    verdict: str


def _flagged_combos(interactions: pl.DataFrame) -> dict[tuple[str, str], list[_Combo]]:
    combos: dict[tuple[str, str], list[_Combo]] = {}
    flagged = interactions.filter(pl.col("verdict").is_in(HARM_VERDICTS)).sort("interaction",
                                                                              nulls_last=True)
    for model, task, tricks, verdict in flagged.select(KEYS + ["verdict"]).iter_rows():
        combos.setdefault((model, task), []).append(
            _Combo(frozenset(tricks.split("+")), tricks, verdict))
    return combos


def _cost_label(row: dict[str, Any], policy: VerdictPolicy) -> tuple[str, str]:
    per_point, base = row["hours_per_point"], row["base_hours"]
    if per_point is None or base is None:
        return WORTH_IT, "significant gain; cost vs baseline unknown"
    if per_point <= 0:
        return WORTH_IT, "significant gain at no extra cost"
    limit = policy.max_hours_per_point * base
    if per_point <= limit:
        return WORTH_IT, f"significant gain; {num(per_point)} extra h per point ≤ {num(limit)}"
    return NOT_WORTH, f"significant gain, but {num(per_point)} extra h per point > {num(limit)}"


def _label(row: dict[str, Any], combos: dict[tuple[str, str], list[_Combo]],
           policy: VerdictPolicy) -> tuple[str, str]:
    parts = frozenset(row["tricks"].split("+"))
    hits = [c for c in combos.get((row["model"], row["task"]), []) if parts <= c.parts]
    if hits:
        named = "; ".join(f"{c.tricks}: {c.verdict}" for c in hits[:3])
        return HARMFUL_COMBO, named + (f" (+{len(hits) - 3} more)" if len(hits) > 3 else "")
    low, high = row["ci_low"], row["ci_high"]
    if low is None or high is None:
        return NOT_WORTH, "no confidence interval (too few seeds?)"
    if high < 0:
        return HARMFUL, "worse than the baseline (CI below 0)"
    if low <= 0:
        return NOT_WORTH, "gain not significant (CI includes 0)"
    return _cost_label(row, policy)


def verdict_table(stats: pl.DataFrame, effects: pl.DataFrame, interactions: pl.DataFrame,
                  policy: VerdictPolicy) -> pl.DataFrame:
    """Effects joined with hours per trick set, plus `verdict` and a one-line `reason`."""
    base = stats.filter(pl.col("tricks") == BASELINE).select(
        "model", "task", pl.col("hours_per_run").alias("base_hours"))
    frame = (effects.filter(pl.col("tricks") != BASELINE).unique(KEYS, keep="first")
             .join(stats.select(KEYS + ["hours_per_run", "cost_per_effective_sample"]), on=KEYS,
                   how="left")
             .join(base, on=["model", "task"], how="left")
             .with_columns((pl.col("hours_per_run") - pl.col("base_hours")).alias("extra_hours"))
             .with_columns(pl.when(pl.col("effect") > 0)
                           .then(pl.col("extra_hours") / (pl.col("effect") / policy.point))
                           .alias("hours_per_point")))
    combos = _flagged_combos(interactions)
    labels = [_label(row, combos, policy) for row in frame.iter_rows(named=True)]
    return (frame.with_columns(pl.Series("verdict", [v for v, _ in labels], dtype=pl.Utf8),
                               pl.Series("reason", [r for _, r in labels], dtype=pl.Utf8))
            .sort(["model", "task", "effect", "tricks"], descending=[False, False, True, False],
                  nulls_last=True))
