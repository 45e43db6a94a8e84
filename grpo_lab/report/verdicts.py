"""Per trick set: worth it, not worth its cost, no effect, undecided, harmful, or harmful in combination.

One set of verdicts per sweep, corrected for the family of comparisons it makes. Without
--decide the effects' p-values are Holm-adjusted over every effect in the table; after --decide
the labels are --decide's own verdicts (anytime-valid for adaptively collected seeds). The
uncorrected CI and p stay in the table as numbers.

The rule, in order (the first that applies wins):
1. harmful in combination: the set is part of (or is) a combination the interaction detector
   flags on the same model and task (its `flagged`: a significant negative interaction, or more
   collapses than its singles); after --decide, a combination whose interaction --decide called
   significant and negative. A combination that is merely harmful (because one of its tricks is)
   does not count: that trick's own row says so.
2. harmful: the effect is significantly below 0 (Holm p ≤ α with the CI below 0; after
   --decide: significant and negative).
3. no effect: --decide found it equivalent to the baseline within ±δ.
4. undecided: no significant difference yet (the CI includes 0, or --decide left it open); the
   reason says about how many seeds per arm would resolve an effect of ±`resolution` at the
   noise seen, for the fixed design.
5. worth it / not worth its cost: the gain is significant; it is worth it when the extra hours it
   costs per point of the metric stay within `max_hours_per_point` of a baseline run's hours
   (a trick that costs nothing extra is always worth it; unknown cost is said so in the reason).

The hours and the run metrics the tables show come from run_stats: one row per trick set, means
over its seeds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as sps

from grpo_lab.analysis.stats import holm
from grpo_lab.report.inputs import BASELINE, KEYS
from grpo_lab.report.render import Tone, num
from grpo_lab.spec.arm import arm_key

WORTH_IT = "worth it"
NOT_WORTH = "not worth its cost"
NO_EFFECT = "no effect"
UNDECIDED = "undecided"
HARMFUL = "harmful"
HARMFUL_COMBO = "harmful in combination"
TONES: dict[str, Tone] = {WORTH_IT: "good", NOT_WORTH: "neutral", NO_EFFECT: "neutral", UNDECIDED: "warn",
                          HARMFUL: "bad", HARMFUL_COMBO: "bad"}

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
    # Family-wise level of the labels: an effect is significant when its Holm-adjusted p-value
    # over all the table's effects is at most this.
    alpha: float = 0.05
    # The effect size an undecided row quotes a seed count for (two points of a pass rate).
    resolution: float = 0.02


@dataclass(frozen=True)
class _Combo:
    parts: frozenset[str]
    tricks: str
    verdict: str


# Interaction verdicts of the detector's flag, for frames that carry no `flagged` column.
FLAG_VERDICTS = ("negative_interaction", "collapsed_only_in_combination")


def _flagged_combos(interactions: pl.DataFrame) -> dict[tuple[str, str], list[_Combo]]:
    combos: dict[tuple[str, str], list[_Combo]] = {}
    flag = pl.col("verdict").is_in(FLAG_VERDICTS)
    if "flagged" in interactions.columns:
        flag = pl.col("flagged").fill_null(flag)
    flagged = interactions.filter(flag).sort("interaction", nulls_last=True)
    for model, task, tricks, verdict in flagged.select(KEYS + ["verdict"]).iter_rows():
        combos.setdefault((model, task), []).append(
            _Combo(frozenset(tricks.split("+")), tricks, verdict))
    return combos


def _decided(decisions: dict) -> tuple[dict, dict[tuple[str, str], list[_Combo]]]:
    """--decide's verdicts: {(model, task, key): row} of its effects, and the combinations whose
    interaction it called significant and negative."""
    rows = decisions.get("verdicts") or []
    effects = {(r["model"], r["task"], r["target"]): r for r in rows if r["kind"] == "effect"}
    combos: dict[tuple[str, str], list[_Combo]] = {}
    for r in rows:
        if r["kind"] == "interaction" and r["verdict"] == "significant" and (r["est"] or 0) < 0:
            combos.setdefault((r["model"], r["task"]), []).append(
                _Combo(frozenset(r["target"].split("+")), r["target"], "--decide: negative interaction"))
    return effects, combos


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


def _label(row: dict[str, Any], combos: dict[tuple[str, str], list[_Combo]], policy: VerdictPolicy,
           decided: dict | None) -> tuple[str, str]:
    parts = frozenset(row["tricks"].split("+"))
    hits = [c for c in combos.get((row["model"], row["task"]), []) if parts <= c.parts]
    if hits:
        named = "; ".join(f"{c.tricks}: {c.verdict}" for c in hits[:3])
        return HARMFUL_COMBO, named + (f" (+{len(hits) - 3} more)" if len(hits) > 3 else "")
    if decided is not None:
        d = decided.get((row["model"], row["task"], arm_key(row["tricks"])))
        if d is None or d["verdict"] == "open":
            return UNDECIDED, "--decide left it open within its budget"
        if d["verdict"] == "equivalent":
            return NO_EFFECT, "--decide: equivalent to the baseline within ±δ"
        if (d["est"] or 0) < 0:
            return HARMFUL, "--decide: significantly worse than the baseline"
        return _cost_label(row, policy)
    low, high, p = row["ci_low"], row["ci_high"], row["p_holm"]
    if low is None or high is None or p is None:
        return UNDECIDED, "no confidence interval: at least two seeds per arm are needed"
    if high < 0 and p <= policy.alpha:
        return HARMFUL, "worse than the baseline (Holm-corrected)"
    if p > policy.alpha or low <= 0:
        return UNDECIDED, f"Holm p {p:.2g}; {_seeds_to_resolve(row, policy)}"
    return _cost_label(row, policy)


def _seeds_to_resolve(row: dict[str, Any], policy: VerdictPolicy) -> str:
    """'about N seeds per arm would resolve ±r': the CI's half-width shrinks as 1/√n, and the
    first Holm step tests at α/m (m effects in the table)."""
    n, half = row.get("n"), (row["ci_high"] - row["ci_low"]) / 2
    if not n or not np.isfinite(half) or half <= 0:
        return "more seeds per arm would narrow it"
    widen = sps.norm.ppf(1 - policy.alpha / (2 * row["family"])) / sps.norm.ppf(1 - policy.alpha / 2)
    need = int(np.ceil(n * (half * widen / policy.resolution) ** 2))
    return f"about {need:,} seeds per arm (now {n}) would resolve ±{policy.resolution:g} at this noise"


def verdict_table(stats: pl.DataFrame, effects: pl.DataFrame, interactions: pl.DataFrame,
                  policy: VerdictPolicy, decisions: dict | None = None) -> pl.DataFrame:
    """Effects joined with hours per trick set, plus `p_holm`, `verdict` and a one-line `reason`.
    decisions: --decide's waves and verdicts (execution/waves.py report_rows); when it has
    verdicts, they are the labels."""
    base = stats.filter(pl.col("tricks") == BASELINE).select(
        "model", "task", pl.col("hours_per_run").alias("base_hours"))
    frame = (effects.filter(pl.col("tricks") != BASELINE).unique(KEYS, keep="first")
             .join(stats.select(KEYS + ["hours_per_run", "cost_per_effective_sample"]), on=KEYS,
                   how="left")
             .join(base, on=["model", "task"], how="left")
             .with_columns((pl.col("hours_per_run") - pl.col("base_hours")).alias("extra_hours"))
             # an effect under a millionth of a point is float noise (a mean of identical runs), not a gain
             .with_columns(pl.when(pl.col("effect") > 1e-6 * policy.point)
                           .then(pl.col("extra_hours") / (pl.col("effect") / policy.point))
                           .alias("hours_per_point")))
    frame = frame.with_columns(pl.Series("p_holm", holm(frame["p_value"].to_numpy()), dtype=pl.Float64)
                               .fill_nan(None))
    decided, combos = None, _flagged_combos(interactions)
    if decisions and decisions.get("verdicts"):
        decided, combos = _decided(decisions)
    frame = frame.with_columns(pl.lit(max(frame.height, 1)).alias("family"))
    labels = [_label(row, combos, policy, decided) for row in frame.iter_rows(named=True)]
    return (frame.with_columns(pl.Series("verdict", [v for v, _ in labels], dtype=pl.Utf8),
                               pl.Series("reason", [r for _, r in labels], dtype=pl.Utf8))
            .sort(["model", "task", "effect", "tricks"], descending=[False, False, True, False],
                  nulls_last=True))
