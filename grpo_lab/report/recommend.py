"""The recommendation that opens the report: adopt, drop, no change, and what the undecided rows
would cost to decide, with the exact command. It reads the verdict table (report/verdicts.py)
and never relabels a row: "adopt" is exactly the rows labelled worth it, "drop" those labelled
harmful, harmful in combination, collapses more often or not worth its cost.

The price of the undecided rows is the fixed design's: row r needs n_r seeds per arm to resolve
±resolution at its observed noise (verdicts.seeds_to_resolve), so its extra runs are
(n_r − n) of the trick and, per cell, max_r (n_r − n) of the baseline, each at its arm's mean
hours per run. Rows that would need more than MAX_SEEDS seeds per arm are named as not decidable
at that resolution on this noise. --decide stops each comparison once decided, so the budget the
command gives is an upper bound on what it spends.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from grpo_lab.report.render import Block, Code, Paragraph, num
from grpo_lab.report.verdicts import (
    COLLAPSES_MORE,
    HARMFUL,
    HARMFUL_COMBO,
    NOT_WORTH,
    NO_CHANGE,
    UNDECIDED,
    WORTH_IT,
    VerdictPolicy,
    seeds_to_resolve,
)

MAX_SEEDS = 64  # beyond this many seeds per arm a row is called not decidable at this noise
DROP = (HARMFUL, HARMFUL_COMBO, COLLAPSES_MORE, NOT_WORTH)


def _names(rows: list[dict[str, Any]], tasks: int) -> str:
    """'a (math), b (math, logic)' or 'none'; tasks named only when the sweep has several."""
    by: dict[str, list[str]] = {}
    for r in rows:
        by.setdefault(r["tricks"], []).append(r["task"])
    if not by:
        return "none"
    return ", ".join(f"{t} ({', '.join(ts)})" if tasks > 1 else t for t, ts in by.items())


def _starts(verdict: str, *labels: str) -> bool:
    return any(verdict == label or verdict.startswith(label + " ") or verdict.startswith(label + ";")
               for label in labels)


def undecided_price(rows: list[dict[str, Any]], policy: VerdictPolicy) -> tuple[float, list[str], list[str]]:
    """(extra hours, rows priced, rows beyond MAX_SEEDS) for the undecided rows (module docstring)."""
    extra, priced, beyond = 0.0, [], []
    base_need: dict[tuple[str, str], tuple[int, float]] = {}
    for r in rows:
        need = seeds_to_resolve(r, policy)
        n = r.get("n") or r.get("seeds") or 0
        if need is None or need > MAX_SEEDS or r.get("hours_per_run") is None:
            beyond.append(f"{r['tricks']} ({r['task']})")
            continue
        more = max(need - n, 0)
        extra += more * r["hours_per_run"]
        key = (r["model"], r["task"])
        base_need[key] = (max(base_need.get(key, (0, 0.0))[0], more), r.get("base_hours") or 0.0)
        priced.append(f"{r['tricks']} ({r['task']}): " + (f"{more} more seeds" if more else
                      "no more seeds (its interval is already within the resolution: --decide labels it)"))
    extra += sum(more * hours for more, hours in base_need.values())
    return extra, priced, beyond


def recommendation(verdicts: pl.DataFrame, meta: dict[str, Any], costs: dict[str, Any], unit: str,
                   policy: VerdictPolicy) -> list[Block]:
    """The box's blocks: adopt / drop / no change / undecided, and the command that would decide."""
    if verdicts.is_empty():
        return [Paragraph("Nothing to recommend yet: no trick set has runs to compare with its baseline.")]
    rows = verdicts.to_dicts()
    tasks = verdicts["task"].n_unique()
    adopt = [r for r in rows if _starts(r["verdict"], WORTH_IT)]
    drop = "; ".join(f"{label}: {_names(hit, tasks)}" for label in DROP
                     if (hit := [r for r in rows if _starts(r["verdict"], label)]))
    same = [r for r in rows if _starts(r["verdict"], NO_CHANGE)]
    open_ = [r for r in rows if r["verdict"] == UNDECIDED]
    blocks: list[Block] = [Paragraph(f"Adopt: {_names(adopt, tasks)}."), Paragraph(f"Drop: {drop or 'none'}."),
                           Paragraph(f"No change: {_names(same, tasks)}.")]
    if not open_:
        return blocks + [Paragraph("Undecided: none.")]
    extra, priced, beyond = undecided_price(open_, policy)
    text = f"Undecided: {len(open_)}."
    if priced:
        text += (f" To resolve ±{policy.resolution:g} at the noise seen: {'; '.join(priced[:8])}"
                 f"{'; …' if len(priced) > 8 else ''} (about {num(extra)} {unit} more, baseline seeds included).")
    if beyond:
        text += (f" Not decidable at ±{policy.resolution:g} within {MAX_SEEDS} seeds per arm on this noise: "
                 f"{', '.join(beyond[:8])}{', …' if len(beyond) > 8 else ''}.")
    blocks.append(Paragraph(text))
    matrix = meta.get("matrix") or meta.get("matrix_path")
    if priced and matrix:
        budget = math.ceil(((costs.get("total") or 0.0) + extra) * 100) / 100
        blocks += [Paragraph(f"The command that decides them (--decide stops each comparison once it is decided, "
                             f"so {budget:g} {unit} is what it may spend in all, this sweep's included):"),
                   Code([f"grpo-lab sweep {matrix} --decide --budget {budget:g}"])]
    return blocks
