"""The report's decisions section: --decide's waves and its verdicts (analysis/verdict.py), each
with the interval and seeds it rests on, its collapse counts and the true reason an open one is
open, under the sentence naming the estimand, sequence, α split and guarantee they were decided
under; and the variance budget."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from grpo_lab.analysis.rule import COLLAPSE_SHARE, ESTIMAND_TEXT
from grpo_lab.analysis.verdict import Verdict
from grpo_lab.report.render import (
    MISSING,
    Badge,
    Block,
    Paragraph,
    Table,
    TableCell,
    Tone,
    interval,
    is_missing,
    num,
    short,
    signed,
)
from grpo_lab.report.verdicts import collapse_text, on_estimand, open_reason

def _pct(x: Any) -> str:
    return MISSING if is_missing(x) else f"{100 * x:.0f}%"


def variance_blocks(variance: pl.DataFrame, unit: str) -> list[Block]:
    if variance.is_empty():
        return []
    intro = Paragraph(
        "Variance budget: how much of one arm's variance comes from training randomness (seeds) and how much "
        "from the finite eval set (seed-by-problem noise and how an arm fares on these problems), from the "
        "per-problem eval records; and the eval size and seed count that decide a two-arm comparison (a "
        f"±δ effect found with 80% power at 5%, δ = {num(variance['delta'][0])}) for the fewest {unit}. "
        "That is a fixed-sample z-test: --decide's anytime-valid sequence over the whole family needs "
        "more (its seeds per comparison: grpo-lab plan --decide-delta, or the start of sweep --decide).")
    rows = [[str(r["model"]), str(r["task"]), num(r["seeds"]), str(r["problems"]), num(r["sd_seed"]),
             num(r["sd_resid"]), num(r["sd_arm_problem"]), _pct(r["share_seed"]), _pct(r["share_eval"]),
             num(r["seeds_needed_now"]), num(r["hours_now"]), str(r["best_problems"]),
             num(r["best_seeds"]), num(r["hours_best"])]
            for r in variance.iter_rows(named=True)]
    headers = ["model", "task", "seeds", "problems", "sd seed", "sd seed×problem", "sd arm×problem",
               "share seeds", "share eval", "seeds needed now", f"{unit} / decided now", "best problems",
               "best seeds", f"{unit} / decided at best"]
    return [intro, Table(headers, rows)]


SEQUENCE_TEXT = {  # analysis/decide.py SEQUENCES, as the report explains them
    "t": "t-mixture confidence sequences (the sequential t-test: Gaussian seed noise of any variance, "
         "estimated per comparison)",
    "betting": "Betting confidence sequences for bounded outcomes (Waudby-Smith & Ramdas 2023)",
}
# What family-wise error ≤ α over every label holds for, by (sequence, estimand) (analysis/rule.py,
# analysis/decide.py); collapse labels are betting sequences on indicators, valid for any distribution.
GUARANTEE = {
    ("t", "healthy"): "for Gaussian-like seed noise on the seeds that did not collapse; collapse labels for any "
                      "distribution",
    ("t", "mean"): "for Gaussian-like seed noise over all seeds, provided no trick has a collapse mode the seeds "
                   "have not shown (a trick that collapses a few seeds and lifts the rest breaks it); collapse labels "
                   "for any distribution",
    ("betting", "healthy"): "for any distribution of a run's score on the seeds that did not collapse; collapse "
                            "labels for any distribution",
    ("betting", "mean"): "for any distribution of a run's score, collapsed seeds included; collapse labels for any "
                         "distribution",
}


def closing_text(decisions: dict | None) -> str | None:
    """What a sweep's last line says its --decide labels are about and what holds for them (None
    when --decide made no verdict: the labels are then Holm's)."""
    verdicts, options = (decisions or {}).get("verdicts") or [], (decisions or {}).get("options") or {}
    if not verdicts:
        return None
    estimands = sorted({v.estimand for v in verdicts})
    about = "; ".join(ESTIMAND_TEXT.get(e, e) for e in estimands)
    holds = GUARANTEE.get((options.get("sequence", "betting"), estimands[0]), "under its sequence's assumptions")
    return (f"Labels from --decide, about {about}, each with the anytime-valid interval it rests on: "
            f"family-wise error ≤ α over every label {holds}")


def _method_text(options: dict | None, verdicts: list[Verdict]) -> str:
    """The sentence naming the estimand, sequence, pairing, α split and guarantee of the recorded
    --decide options (waves recorded before the sequence was an option used betting, before the
    estimand was, the mean over all seeds at α/K with no collapse labels)."""
    if not options:  # waves recorded before their options were, and so before t existed
        return ("Betting confidence sequences for bounded outcomes (their options were not recorded), "
                "Bonferroni over the comparisons.")
    sequence = options.get("sequence", "betting")
    name = SEQUENCE_TEXT.get(sequence, f"{sequence!r} confidence sequences")
    paired = options.get("method") != "unpaired"
    pairing = "seed-index paired contrasts" if paired else "per-arm means"
    k, arms = len(verdicts), len({(v.model, v.task, a) for v in verdicts for a, _, _ in v.collapse.counts})
    family = f"K = {k} comparisons" if paired else f"A = {arms or 'the'} arms, K = {k} comparisons"
    design = _design_text(options.get("eval_design") or [])
    if "estimand" not in options:  # recorded before the estimand and collapse labels existed
        return (f"{name} on {pairing}, Bonferroni over the {'comparisons' if paired else 'arms'}, on mean pass@1 "
                "over all seeds (recorded before the estimand was an option; no collapse labels): family-wise error "
                f"≤ α at every wave, whenever the sweep stopped, {GUARANTEE.get((sequence, 'mean'), '')}.{design}")
    estimand, alpha = options["estimand"], float(options.get("alpha", 0.05))
    each = alpha * (1 - COLLAPSE_SHARE) / max(k if paired else arms or k, 1)
    split = (f"pass@1 labels at α·{1 - COLLAPSE_SHARE:g}/{'K' if paired else 'A'} = {each:.2g} each, collapse labels "
             f"(betting sequences on the paired collapse indicators) at α·{COLLAPSE_SHARE:g}/K = "
             f"{alpha * COLLAPSE_SHARE / max(k, 1):.2g} each")
    holds = GUARANTEE.get((sequence, estimand), "under that sequence's assumptions")
    return (f"Estimand: {ESTIMAND_TEXT.get(estimand, estimand)}. {name} on {pairing}; α = {alpha:g} split "
            f"Bonferroni over the family ({family}): {split}. Family-wise error ≤ α over every label, at every "
            f"wave, whenever the sweep stopped, {holds}.{design}")


def _design_text(design: list) -> str:
    """The eval design the waves recorded ([model, task, K] each), as a sentence ('' for none)."""
    if not design:
        return ""
    many = len({m for m, _, _ in design}) > 1
    cells = ", ".join(f"{Path(m).stem + '/' if many else ''}{t} at {k}" for m, t, k in design)
    return (f" Scores are final evals run again with more completions per problem ({cells}; the eval design, "
            "chosen after wave 0 from the runs' noise and costs, not their effects); other tasks use each "
            "run's own final eval. The verdict table's effects and intervals are these scores' too.")


def _pass1_badge(v: Verdict) -> Badge:
    """The pass@1 label of one verdict, with its estimand: 'higher on seeds that did not collapse'."""
    if v.label == "open":
        return Badge("open", "warn")
    if v.label == "equivalent":
        return Badge(f"no change (±δ) {on_estimand(v)}", "neutral")
    words = ("above additive", "below additive") if v.kind == "interaction" else ("higher", "lower")
    return Badge(f"{words[v.direction < 0]} {on_estimand(v)}", "good" if v.direction > 0 else "bad")


COLLAPSE_TONES: dict[str, Tone] = {"more": "bad", "fewer": "good"}


def _row(v: Verdict, most_seeds: int | None) -> list[TableCell]:
    said = collapse_text(v)
    bounds = [x if math.isfinite(x) else None for x in (v.lower, v.upper)]
    return [v.task, v.kind, short(v.target), signed(v.est), interval(*bounds), f"{v.seeds} of {v.runs}",
            _pass1_badge(v), Badge(said, COLLAPSE_TONES[v.collapse.label]) if v.collapse.label in COLLAPSE_TONES else said,
            open_reason(v, most_seeds) if v.label == "open" else MISSING,
            MISSING if v.wave is None else str(v.wave), num(v.hours)]


def decision_blocks(decisions: dict, unit: str) -> list[Block]:
    waves, verdicts = decisions.get("waves") or [], list(decisions.get("verdicts") or [])
    if not waves:
        return []
    counts = {label: sum(v.label == label for v in verdicts) for label in ("significant", "equivalent", "open")}
    by_kind = {k: (sum(v.kind == k and v.decided for v in verdicts), sum(v.kind == k for v in verdicts))
               for k in ("effect", "interaction")}
    collapses = {label: sum(v.collapse.label == label for v in verdicts) for label in ("more", "fewer", "open")}
    options = decisions.get("options") or {}
    summary = Paragraph(
        f"--decide: {len(waves)} wave(s), {waves[-1]['runs']} runs, {num(waves[-1]['hours'])} {unit}. "
        f"Decided {by_kind['effect'][0]} of {by_kind['effect'][1]} effects and {by_kind['interaction'][0]} of "
        f"{by_kind['interaction'][1]} interactions: {counts['significant']} significant, {counts['equivalent']} "
        f"equivalent within ±δ, {counts['open']} open. Collapse rates: {collapses['more']} more often, "
        f"{collapses['fewer']} less often, {collapses['open']} open. {_method_text(decisions.get('options'), verdicts)} "
        "The verdict table's labels render these.")
    wave_table = Table(["wave", f"{unit} spent", "runs", "significant", "equivalent", "open", "runs added"],
                       [[str(w["wave"]), num(w["hours"]), str(w["runs"]), str(w["significant"]),
                         str(w["equivalent"]), str(w["open"]), str(w["added"])] for w in waves])
    order = {"significant": 0, "equivalent": 1, "open": 2}
    rows = [_row(v, options.get("most_seeds"))
            for v in sorted(verdicts, key=lambda v: (order[v.label], v.task, v.kind, v.target))]
    verdict_table = Table(["task", "kind", "arm", "estimate", "confidence sequence", "seeds (of runs)",
                           "pass@1 verdict", "collapses", "why open", "decided at wave",
                           f"{unit} when decided"], rows)
    return [summary, wave_table, verdict_table]
