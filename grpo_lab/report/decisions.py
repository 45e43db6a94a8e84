"""The report's "decisions" section: the variance budget per (model, task) and, for a sweep run
with --decide, its waves and the verdict of every comparison with what it cost."""

from __future__ import annotations

from typing import Any

import polars as pl

from grpo_lab.report import fmt
from grpo_lab.report.document import Badge, Block, Paragraph, Table, Tone

TONES: dict[str, Tone] = {"significant": "good", "equivalent": "neutral", "open": "warn"}


def _pct(x: Any) -> str:
    return fmt.MISSING if fmt.is_missing(x) else f"{100 * x:.0f}%"


def variance_blocks(variance: pl.DataFrame, unit: str) -> list[Block]:
    if variance.is_empty():
        return []
    intro = Paragraph(
        "Variance budget: how much of one arm's variance comes from training randomness (seeds) and how much "
        "from the finite eval set (seed-by-problem noise and how an arm fares on these problems), from the "
        "per-problem eval records; and the eval size and seed count that decide a two-arm comparison (a "
        f"±δ effect found with 80% power at 5%, δ = {fmt.num(variance['delta'][0])}) for the fewest {unit}.")
    rows = [[str(r["model"]), str(r["task"]), fmt.num(r["seeds"]), str(r["problems"]), fmt.num(r["sd_seed"]),
             fmt.num(r["sd_resid"]), fmt.num(r["sd_arm_problem"]), _pct(r["share_seed"]), _pct(r["share_eval"]),
             fmt.num(r["seeds_needed_now"]), fmt.num(r["hours_now"]), str(r["best_problems"]),
             fmt.num(r["best_seeds"]), fmt.num(r["hours_best"])]
            for r in variance.iter_rows(named=True)]
    headers = ["model", "task", "seeds", "problems", "sd seed", "sd seed×problem", "sd arm×problem",
               "share seeds", "share eval", "seeds needed now", f"{unit} / decided now", "best problems",
               "best seeds", f"{unit} / decided at best"]
    return [intro, Table(headers, rows)]


def decision_blocks(decisions: dict, unit: str) -> list[Block]:
    waves, verdicts = decisions.get("waves") or [], decisions.get("verdicts") or []
    if not waves:
        return []
    counts = {v: sum(r["verdict"] == v for r in verdicts) for v in TONES}
    by_kind = {k: (sum(r["kind"] == k and r["verdict"] != "open" for r in verdicts), sum(r["kind"] == k for r in verdicts))
               for k in ("effect", "interaction")}
    summary = Paragraph(
        f"--decide: {len(waves)} wave(s), {waves[-1]['runs']} runs, {fmt.num(waves[-1]['hours'])} {unit}. "
        f"Decided {by_kind['effect'][0]} of {by_kind['effect'][1]} effects and {by_kind['interaction'][0]} of "
        f"{by_kind['interaction'][1]} interactions: {counts['significant']} significant, {counts['equivalent']} "
        f"equivalent within ±δ, {counts['open']} open. Normal-mixture confidence sequences, Bonferroni over the "
        "comparisons: family-wise error ≤ α at every wave, whenever the sweep stopped.")
    wave_table = Table(["wave", f"{unit} spent", "runs", "significant", "equivalent", "open", "runs added"],
                       [[str(w["wave"]), fmt.num(w["hours"]), str(w["runs"]), str(w["significant"]),
                         str(w["equivalent"]), str(w["open"]), str(w["added"])] for w in waves])
    order = {"significant": 0, "equivalent": 1, "open": 2}
    rows = [[r["task"], r["kind"], fmt.short(r["target"]), fmt.signed(r["est"]),
             fmt.MISSING if fmt.is_missing(r["radius"]) else f"±{fmt.num(r['radius'])}",
             Badge(r["verdict"], TONES[r["verdict"]]), fmt.MISSING if r["wave"] is None else str(r["wave"]),
             fmt.num(r["hours"])]
            for r in sorted(verdicts, key=lambda r: (order[r["verdict"]], r["task"], r["kind"], r["target"]))]
    verdict_table = Table(["task", "kind", "arm", "estimate", "confidence sequence", "verdict", "decided at wave",
                           f"{unit} when decided"], rows)
    return [summary, wave_table, verdict_table]
