"""The report's decisions section: --decide's waves and verdicts, with the sentence naming the
confidence sequence they were decided under, and the variance budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from grpo_lab.report.render import MISSING, Badge, Block, Paragraph, Table, Tone, is_missing, num, short, signed

DECISION_TONES: dict[str, Tone] = {"significant": "good", "equivalent": "neutral", "open": "warn"}


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
    "t": ("t-mixture confidence sequences (the sequential t-test: Gaussian seed noise of any variance, "
          "estimated per comparison)", "for Gaussian seed noise (measured: heavy tails, collapsed seeds, a noisier "
          "trick, pass rates near 0 or 1; not a trick that collapses a few seeds and lifts the rest)"),
    "betting": ("Betting confidence sequences for bounded outcomes (Waudby-Smith & Ramdas 2023)",
                "for any distribution of a run's score"),
}


def _method_text(options: dict | None) -> str:
    """The sentence naming the sequence and pairing the recorded --decide options used (waves
    recorded before the sequence was an option used betting)."""
    if not options:  # waves recorded before their options were, and so before t existed
        return ("Betting confidence sequences for bounded outcomes (their options were not recorded), "
                "Bonferroni over the comparisons.")
    sequence = options.get("sequence", "betting")
    name, holds = SEQUENCE_TEXT.get(sequence, (f"{sequence!r} confidence sequences", "under that sequence's assumptions"))
    pairing, family = (("per-arm means", "arms") if options.get("method") == "unpaired"
                       else ("seed-index paired contrasts", "comparisons"))
    return (f"{name} on {pairing}, Bonferroni over the {family}: family-wise error ≤ α at every wave, "
            f"whenever the sweep stopped, {holds}.{_design_text(options.get('eval_design') or [])}")


def _design_text(design: list) -> str:
    """The eval design the waves recorded ([model, task, K] each), as a sentence ('' for none)."""
    if not design:
        return ""
    many = len({m for m, _, _ in design}) > 1
    cells = ", ".join(f"{Path(m).stem + '/' if many else ''}{t} at {k}" for m, t, k in design)
    return (f" Scores are final evals run again with more completions per problem ({cells}; the eval design, "
            "chosen after wave 0 from the runs' noise and costs, not their effects); other tasks use each "
            "run's own final eval, as do the per-trick verdict table's effect and CI columns everywhere.")


def decision_blocks(decisions: dict, unit: str) -> list[Block]:
    waves, verdicts = decisions.get("waves") or [], decisions.get("verdicts") or []
    if not waves:
        return []
    counts = {v: sum(r["verdict"] == v for r in verdicts) for v in DECISION_TONES}
    by_kind = {k: (sum(r["kind"] == k and r["verdict"] != "open" for r in verdicts), sum(r["kind"] == k for r in verdicts))
               for k in ("effect", "interaction")}
    summary = Paragraph(
        f"--decide: {len(waves)} wave(s), {waves[-1]['runs']} runs, {num(waves[-1]['hours'])} {unit}. "
        f"Decided {by_kind['effect'][0]} of {by_kind['effect'][1]} effects and {by_kind['interaction'][0]} of "
        f"{by_kind['interaction'][1]} interactions: {counts['significant']} significant, {counts['equivalent']} "
        f"equivalent within ±δ, {counts['open']} open. {_method_text(decisions.get('options'))} "
        "These are the verdict table's labels.")
    wave_table = Table(["wave", f"{unit} spent", "runs", "significant", "equivalent", "open", "runs added"],
                       [[str(w["wave"]), num(w["hours"]), str(w["runs"]), str(w["significant"]),
                         str(w["equivalent"]), str(w["open"]), str(w["added"])] for w in waves])
    order = {"significant": 0, "equivalent": 1, "open": 2}
    rows = [[r["task"], r["kind"], short(r["target"]), signed(r["est"]),
             MISSING if is_missing(r["radius"]) else f"±{num(r['radius'])}",
             Badge(r["verdict"], DECISION_TONES[r["verdict"]]), MISSING if r["wave"] is None else str(r["wave"]),
             num(r["hours"])]
            for r in sorted(verdicts, key=lambda r: (order[r["verdict"]], r["task"], r["kind"], r["target"]))]
    verdict_table = Table(["task", "kind", "arm", "estimate", "confidence sequence", "verdict", "decided at wave",
                           f"{unit} when decided"], rows)
    return [summary, wave_table, verdict_table]
