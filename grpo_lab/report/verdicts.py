"""Per trick set: worth it, not worth its cost, no change, undecided, harmful, harmful in combination,
or collapses more / less often. This module owns the verdict vocabulary: every other module of the
report (sections, figures, the CLI's closing lines) imports its labels and tones from here.

One set of verdicts per sweep, corrected for the family of comparisons it makes.

Without --decide the effects' p-values are Holm-adjusted over every effect in the table; the
uncorrected CI and p stay in the table as numbers. The rule, in order (the first that applies wins):
1. harmful in combination: the set is part of (or is) a combination the interaction detector
   flags on the same model and task (its `flagged`: a significant negative interaction, or more
   collapses than its singles). A combination that is merely harmful (because one of its tricks
   is) does not count: that trick's own row says so.
2. harmful: Holm p ≤ α with the CI below 0.
3. undecided: no significant difference yet; the reason says about how many seeds per arm would
   resolve an effect of ±`resolution` at the noise seen, for the fixed design.
4. worth it / not worth its cost: the gain is significant; it is worth it when the extra hours it
   costs per point of the metric stay within `max_hours_per_point` of a baseline run's hours
   (a trick that costs nothing extra is always worth it; unknown cost is said so in the reason).

After --decide the labels only render its typed verdicts (analysis/verdict.py), and the table's
effect, interval and seeds are the ones the label rests on: the estimate and anytime-valid
confidence sequence of the rule's estimand (analysis/rule.py) on the scores --decide read (the
eval design's, where it had one). Every label names its estimand (ON_ESTIMAND): "harmful on seeds
that did not collapse", "no change (assuming no unseen collapse mode)". In order:
1. collapses more often: the collapse verdict is "more", whatever the pass@1 label says (a
   flagged combination it is part of is named in the reason).
2. harmful in combination: part of a combination whose interaction --decide called significant
   and negative, or whose collapse rate it found above the additive prediction.
3. harmful / no change / worth it / not worth its cost (qualified), or undecided with the true
   reason it stayed open (the seed cap, the budget, or still being sampled), from the pass@1
   label; a collapse verdict "fewer" adds "collapses less often".
Beside each: "collapsed k of n" for the trick and the baseline, and what an open collapse verdict
does not exclude.

The hours and the run metrics the tables show come from run_stats: one row per trick set, means
over its seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as sps

from grpo_lab.analysis import collapse
from grpo_lab.analysis.stats import holm
from grpo_lab.analysis.verdict import Verdict
from grpo_lab.report.inputs import BASELINE, KEYS
from grpo_lab.report.render import MISSING, Tone, num
from grpo_lab.spec.arm import arm_key

# --- the vocabulary ---

WORTH_IT = "worth it"
NOT_WORTH = "not worth its cost"
NO_CHANGE = "no change"  # --decide's equivalence, always with its estimand
UNDECIDED = "undecided"
HARMFUL = "harmful"
HARMFUL_COMBO = "harmful in combination"
COLLAPSES_MORE = "collapses more often"
COLLAPSES_LESS = "collapses less often"
TONES: dict[str, Tone] = {WORTH_IT: "good", NOT_WORTH: "neutral", NO_CHANGE: "neutral", UNDECIDED: "warn",
                          HARMFUL: "bad", HARMFUL_COMBO: "bad", COLLAPSES_MORE: "bad", COLLAPSES_LESS: "good"}
# What a label advises, by its base label (the vocabulary word it starts with; `advice`)
ADVICE = {WORTH_IT: "adopt", NOT_WORTH: "drop", HARMFUL: "drop", HARMFUL_COMBO: "drop", COLLAPSES_MORE: "drop",
          NO_CHANGE: "no change", UNDECIDED: "undecided", COLLAPSES_LESS: "undecided"}


def advice(verdict: str) -> str:
    """adopt / drop / no change / undecided of a verdict label, read from its base label (the
    longest vocabulary word its first clause starts with: "harmful in combination on seeds ..."
    is harmful in combination, "worth it ...; collapses less often" is worth it); a bare
    "collapses less often" leaves pass@1 undecided."""
    head = verdict.split(";")[0]
    return ADVICE[max((w for w in ADVICE if head == w or head.startswith(w + " ")), key=len)]


# What a --decide label is about, as its wording says it (analysis/rule.py ESTIMANDS, ESTIMAND_TEXT)
ON_ESTIMAND = {"healthy": "on seeds that did not collapse", "mean": "(assuming no unseen collapse mode)"}

# Interaction verdicts (analysis/interactions.py) that flag a combination: each of its tricks is
# then "harmful in combination". "harmful" is not one: a combination below the baseline because one
# of its tricks is says nothing about the others.
FLAG_VERDICTS = ("negative_interaction", "collapsed_only_in_combination")
INTERACTION_TONES: dict[str, Tone] = {
    **{v: "bad" for v in FLAG_VERDICTS}, "harmful": "bad", "below_best_single": "warn", "additive": "good",
    "synergy": "good", "inconclusive": "neutral"}


def flag_expr(columns: list[str]) -> pl.Expr:
    """Whether an interaction row is flagged: its `flagged` column where the frame has one (null:
    read from the verdict), else its verdict in FLAG_VERDICTS."""
    flag = pl.col("verdict").is_in(FLAG_VERDICTS)
    return pl.col("flagged").fill_null(flag) if "flagged" in columns else flag

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
    # Family-wise level of the labels without --decide: an effect is significant when its
    # Holm-adjusted p-value over all the table's effects is at most this.
    alpha: float = 0.05
    # The effect size an undecided row quotes a seed count for (two points of a pass rate).
    resolution: float = 0.02


# --- a --decide verdict in words ---

def on_estimand(v: Verdict) -> str:
    return ON_ESTIMAND.get(v.estimand, f"(estimand {v.estimand})")


def collapse_text(v: Verdict) -> str:
    """'collapsed k of n (≤ U%); [each single of an interaction k of n (≤ U%);] baseline k of n
    (≤ U%)', U each arm's 95% anytime bound on its collapse rate, and what the collapse verdict
    says: the interval of the
    rate difference (points) when it closed, the largest rise it does not exclude when open."""
    counts = {k: (x, n) for k, x, n in v.collapse.counts}
    if not counts:
        return "collapses not recorded (a verdict from before collapse was an outcome)"
    # the arm it is about first, then an interaction's singles, the baseline last
    order = [v.target, *sorted(k for k in counts if k not in (v.target, BASELINE)), BASELINE]
    shown = [f"{'collapsed' if k == v.target else k} {counts[k][0]} of {counts[k][1]} "
             f"(≤ {100 * collapse.rate_bounds(*counts[k])[1]:.0f}%)" for k in order if k in counts]
    lo, hi = (100 * v.collapse.lower, 100 * v.collapse.upper)
    if v.collapse.label == "more":
        said = f"collapses more often: +{num(lo)} to +{num(hi)} points" if math.isfinite(hi) else \
            f"collapses more often: at least +{num(lo)} points"
    elif v.collapse.label == "fewer":
        said = f"collapses less often: {num(lo)} to {num(hi)} points" if math.isfinite(lo) else \
            f"collapses less often: at least {num(-hi)} points fewer"
    else:
        said = (f"a collapse-rate rise up to {num(hi)} points not excluded" if math.isfinite(hi)
                else "no collapse bound yet")
    return "; ".join(shown + [said])


def open_reason(v: Verdict, most_seeds: int | None = None) -> str:
    """Why an open verdict stayed open when the loop stopped (analysis/verdict.py REASONS)."""
    rests = f"its interval rests on {v.seeds} of {v.runs} seeds"
    if v.reason == "seed cap":
        cap = f" ({most_seeds} per arm)" if most_seeds else ""
        within = f" (a margin of ±{v.delta_at_cap:.3g} could close within it)" if v.delta_at_cap else ""
        return (f"blocked by the seed cap{cap}: closing it needs more seeds per arm than the cap allows{within}; "
                f"{rests}")
    if v.reason == "budget":
        return f"the budget ran out before it could close (it could within the seed cap); {rests}"
    if not v.collapse.counts:  # a verdict stored before the reason was
        return f"--decide left it open (why was not recorded); {rests}"
    return f"still being sampled when the sweep stopped; {rests}"


# --- the labels ---

@dataclass(frozen=True)
class _Combo:
    parts: frozenset[str]
    tricks: str
    verdict: str  # what flagged it, in words
    label: str  # what each of its tricks is labelled


def _flagged_combos(interactions: pl.DataFrame) -> dict[tuple[str, str], list[_Combo]]:
    combos: dict[tuple[str, str], list[_Combo]] = {}
    flagged = interactions.filter(flag_expr(interactions.columns)).sort("interaction", nulls_last=True)
    for model, task, tricks, verdict in flagged.select(KEYS + ["verdict"]).iter_rows():
        combos.setdefault((model, task), []).append(
            _Combo(frozenset(tricks.split("+")), tricks, verdict, HARMFUL_COMBO))
    return combos


def _decided(verdicts: list[Verdict]) -> tuple[dict[tuple[str, str, str], Verdict], dict[tuple[str, str], list[_Combo]]]:
    """--decide's verdicts: {(model, task, key): Verdict} of its effects, and the combinations
    it found harmful (collapse-rate ones first)."""
    effects = {(v.model, v.task, v.target): v for v in verdicts if v.kind == "effect"}
    combos: dict[tuple[str, str], list[_Combo]] = {}
    inter = sorted((v for v in verdicts if v.kind == "interaction"), key=lambda v: v.collapse.label != "more")
    for v in inter:
        if v.collapse.label == "more":
            combo = _Combo(frozenset(v.target.split("+")), v.target,
                           "--decide: collapses more often than its singles predict", f"{COLLAPSES_MORE} in combination")
        elif v.direction < 0:
            combo = _Combo(frozenset(v.target.split("+")), v.target,
                           f"--decide: negative interaction {on_estimand(v)}", f"{HARMFUL_COMBO} {on_estimand(v)}")
        else:
            continue
        combos.setdefault((v.model, v.task), []).append(combo)
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


def _combo_label(row: dict[str, Any], combos: dict[tuple[str, str], list[_Combo]]) -> tuple[str, str, Tone] | None:
    parts = frozenset(row["tricks"].split("+"))
    hits = [c for c in combos.get((row["model"], row["task"]), []) if parts <= c.parts]
    if not hits:
        return None
    named = "; ".join(f"{c.tricks}: {c.verdict}" for c in hits[:3])
    return hits[0].label, named + (f" (+{len(hits) - 3} more)" if len(hits) > 3 else ""), "bad"


def _label_holm(row: dict[str, Any], policy: VerdictPolicy) -> tuple[str, str]:
    low, high, p = row["ci_low"], row["ci_high"], row["p_holm"]
    if low is None or high is None or p is None:
        return UNDECIDED, "no confidence interval: at least two seeds per arm are needed"
    if high < 0 and p <= policy.alpha:
        return HARMFUL, "worse than the baseline (Holm-corrected)"
    if p > policy.alpha or low <= 0:
        return UNDECIDED, f"Holm p {p:.2g}; {_seeds_to_resolve(row, policy)}"
    return _cost_label(row, policy)


def _holm_toned(row: dict[str, Any], policy: VerdictPolicy) -> tuple[str, str, Tone]:
    verdict, reason = _label_holm(row, policy)
    return verdict, reason, TONES[verdict]


def _label_decided(row: dict[str, Any], v: Verdict | None, policy: VerdictPolicy,
                   most_seeds: int | None) -> tuple[str, str, Tone]:
    """The label of one --decide verdict, its estimand named (module docstring, 2-3)."""
    if v is None:
        return UNDECIDED, "--decide made no verdict on it", TONES[UNDECIDED]
    on = on_estimand(v)
    if v.label == "open":
        base, why = UNDECIDED, open_reason(v, most_seeds)
    elif v.label == "equivalent":
        base, why = NO_CHANGE, "its interval lies within ±δ of the baseline"
    elif v.direction < 0:
        base, why = HARMFUL, "its interval lies below the baseline"
    else:
        base, why = _cost_label(row, policy)
    said = base if base == UNDECIDED else f"{base} {on}"
    if v.collapse.label == "more":
        return COLLAPSES_MORE, f"pass@1 {on}: {base}: {why}", TONES[COLLAPSES_MORE]
    if v.collapse.label == "fewer":
        tone = "good" if base in (UNDECIDED, NO_CHANGE, WORTH_IT) else TONES[base]
        if base == UNDECIDED:
            return COLLAPSES_LESS, f"pass@1 {on}: {base}: {why}", tone
        return f"{said}; {COLLAPSES_LESS}", why, tone
    return said, why, TONES[base]


def seeds_to_resolve(row: dict[str, Any], policy: VerdictPolicy) -> int | None:
    """Seeds per arm that would resolve ±resolution at the row's noise: the CI's half-width
    shrinks as 1/√n, and the first Holm step tests at α/m (m effects in the table). None when
    the row has no interval."""
    n = row.get("n") or row.get("seeds")
    low, high = row.get("ci_low"), row.get("ci_high")
    if not n or low is None or high is None or not np.isfinite(high - low) or high <= low:
        return None
    widen = sps.norm.ppf(1 - policy.alpha / (2 * row["family"])) / sps.norm.ppf(1 - policy.alpha / 2)
    return int(np.ceil(n * ((high - low) / 2 * widen / policy.resolution) ** 2))


def _seeds_to_resolve(row: dict[str, Any], policy: VerdictPolicy) -> str:
    need = seeds_to_resolve(row, policy)
    if need is None:
        return "more seeds per arm would narrow it"
    return f"about {need:,} seeds per arm (now {row['n']}) would resolve ±{policy.resolution:g} at this noise"


# --- the table ---

def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _from_verdicts(frame: pl.DataFrame, decided: dict[tuple[str, str, str], Verdict]) -> pl.DataFrame:
    """The effect, interval and seeds of each row's --decide verdict in place of the fixed-sample
    ones (null where --decide has none); the uncorrected n and p, which no label rests on, dropped."""
    vs = [decided.get((m, t, arm_key(tricks))) for m, t, tricks in frame.select(KEYS).iter_rows()]
    pick = lambda f: [None if v is None else f(v) for v in vs]  # noqa: E731
    return frame.with_columns(
        pl.Series("effect", pick(lambda v: _finite(v.est)), dtype=pl.Float64),
        pl.Series("ci_low", pick(lambda v: _finite(v.lower)), dtype=pl.Float64),
        pl.Series("ci_high", pick(lambda v: _finite(v.upper)), dtype=pl.Float64),
        pl.Series("seeds", pick(lambda v: v.seeds), dtype=pl.Int64),
        pl.Series("runs", pick(lambda v: v.runs), dtype=pl.Int64),
        pl.Series("collapse", [MISSING if v is None else collapse_text(v) for v in vs], dtype=pl.Utf8),
        pl.lit(None, dtype=pl.Int64).alias("n"), pl.lit(None, dtype=pl.Float64).alias("p_value"))


def verdict_table(stats: pl.DataFrame, effects: pl.DataFrame, interactions: pl.DataFrame,
                  policy: VerdictPolicy, decisions: dict | None = None) -> pl.DataFrame:
    """Effects joined with hours per trick set, plus `p_holm`, `verdict`, its `tone`, a one-line
    `reason` and `decided` (false where the label leaves pass@1 undecided: the Holm rule's
    undecided, an open or missing --decide verdict; a flagged combination or a collapse verdict
    "more" is decided). decisions: --decide's waves, verdicts (analysis/verdict.py Verdict) and options
    (execution/waves.py report_rows); when it has verdicts they are the labels, and effect, ci_low,
    ci_high are theirs, with `seeds`, `runs` and `collapse` beside them."""
    base = stats.filter(pl.col("tricks") == BASELINE).select(
        "model", "task", pl.col("hours_per_run").alias("base_hours"))
    frame = (effects.filter(pl.col("tricks") != BASELINE).unique(KEYS, keep="first")
             .join(stats.select(KEYS + ["hours_per_run", "cost_per_effective_sample"]), on=KEYS,
                   how="left")
             .join(base, on=["model", "task"], how="left")
             .with_columns((pl.col("hours_per_run") - pl.col("base_hours")).alias("extra_hours")))
    decided, combos = None, _flagged_combos(interactions)
    if decisions and decisions.get("verdicts"):
        decided, combos = _decided(decisions["verdicts"])
        frame = _from_verdicts(frame, decided)
    # an effect under a millionth of a point is float noise (a mean of identical runs), not a gain
    frame = frame.with_columns(pl.when(pl.col("effect") > 1e-6 * policy.point)
                               .then(pl.col("extra_hours") / (pl.col("effect") / policy.point))
                               .alias("hours_per_point"))
    frame = frame.with_columns(pl.Series("p_holm", holm(frame["p_value"].to_numpy()), dtype=pl.Float64)
                               .fill_nan(None))
    frame = frame.with_columns(pl.lit(max(frame.height, 1)).alias("family"))
    most = ((decisions or {}).get("options") or {}).get("most_seeds")
    labels, settled = [], []
    for row in frame.iter_rows(named=True):
        combo = _combo_label(row, combos)
        if decided is None:
            own = _holm_toned(row, policy)
            labels.append(combo or own)
            settled.append(combo is not None or own[0] != UNDECIDED)
            continue
        v = decided.get((row["model"], row["task"], arm_key(row["tricks"])))
        own = _label_decided(row, v, policy, most)
        more = v is not None and v.collapse.label == "more"
        if combo is not None and more:  # the trick's own harm first, the combination's beside it
            own = (own[0], f"{own[1]}; in combination: {combo[1]}", own[2])
        labels.append(own if combo is None or more else combo)
        settled.append(combo is not None or more or (v is not None and v.decided))
    return (frame.with_columns(pl.Series("verdict", [v for v, _, _ in labels], dtype=pl.Utf8),
                               pl.Series("reason", [r for _, r, _ in labels], dtype=pl.Utf8),
                               pl.Series("tone", [t for _, _, t in labels], dtype=pl.Utf8),
                               pl.Series("decided", settled, dtype=pl.Boolean))
            .sort(["model", "task", "effect", "tricks"], descending=[False, False, True, False],
                  nulls_last=True))
