"""The recommendation that opens the report: adopt, drop, no change, and what the undecided rows
would take to decide, with the command. It reads the verdict table (report/verdicts.py) and
never relabels a row: each row goes where verdicts.advice puts its label, and a label with a
qualifier (its estimand, a collapse verdict) is shown whole.

Pricing the undecided rows is the fixed design's (rows with a Holm p): row r needs n_r seeds per
arm to resolve ±resolution at its observed noise (verdicts.seeds_to_resolve), so its extra runs
are (n_r − n) of the trick and, per cell, max_r (n_r − n) of the baseline, each at its arm's mean
hours per run. Rows that would need more than MAX_SEEDS seeds per arm are named as not decidable
at that resolution on this noise; rows without a measured cost are named as such. A --decide
sweep's open rows are not priced here: their reasons (the seed cap, the budget) are in the
verdict table, and the command continues the sweep with its own options and a larger budget.
"""

from __future__ import annotations

import math
import shlex
from typing import Any

import polars as pl

from grpo_lab.report.render import Block, Code, Paragraph, num
from grpo_lab.report.verdicts import NO_CHANGE, UNDECIDED, WORTH_IT, VerdictPolicy, advice, seeds_to_resolve

MAX_SEEDS = 64  # beyond this many seeds per arm a row is called not decidable at this noise
SHOWN = 8  # rows named per list


def _names(rows: list[dict[str, Any]], tasks: int, plain: str | None, models: int = 1) -> str:
    """'a (math), b (math: worth it on seeds that did not collapse)' or 'none': the model (its
    label, which names a trainer other than grpo-lab's) and the task when the sweep has several,
    and the whole label unless it is the bucket's `plain` one."""
    items = []
    for r in rows:
        said = "" if r["verdict"] == plain else r["verdict"]
        cell = " / ".join(x for x in (r["model"] if models > 1 else "", r["task"] if tasks > 1 else "") if x)
        where = ": ".join(x for x in (cell, said) if x)
        items.append(f"{r['tricks']} ({where})" if where else r["tricks"])
    return ", ".join(items) or "none"


def undecided_price(rows: list[dict[str, Any]], policy: VerdictPolicy,
                    models: int = 1) -> tuple[float, list[str], list[str]]:
    """(extra hours, rows priced, rows not priceable with why) for fixed-design undecided rows; each
    named with its task, and its model label too when the sweep has several models (or trainers)."""
    extra, priced, other = 0.0, [], []
    base_need: dict[tuple[str, str], tuple[int, float]] = {}
    for r in rows:
        name = f"{r['tricks']} ({r['model']} / {r['task']})" if models > 1 else f"{r['tricks']} ({r['task']})"
        need = seeds_to_resolve(r, policy)
        if need is None or need > MAX_SEEDS:
            other.append(f"{name}: not decidable at ±{policy.resolution:g} within {MAX_SEEDS} seeds per arm on this "
                         "noise" if need else f"{name}: no interval yet")
            continue
        if r.get("hours_per_run") is None or r.get("base_hours") is None:
            other.append(f"{name}: {need} seeds per arm, at a cost not measured yet")
            continue
        more = max(need - (r.get("n") or 0), 0)
        extra += more * r["hours_per_run"]
        key = (r["model"], r["task"])
        base_need[key] = (max(base_need.get(key, (0, 0.0))[0], more), r["base_hours"])
        priced.append(f"{name}: " + (f"{more} more seeds" if more else
                                     "no more seeds (its interval is already within the resolution: --decide labels it)"))
    extra += sum(more * hours for more, hours in base_need.values())
    return extra, priced, other


def decide_command(commands: list[str], budget: str) -> str | None:
    """The report's own sweep command (execution/report_inputs.reproduce_commands: its name, runner and --decide
    options) with --decide and --budget set; None when the report has none."""
    sweep = next((c for c in commands if c.startswith("grpo-lab sweep ")), None)
    if sweep is None:
        return None
    words = shlex.split(sweep.split("  #")[0])
    if "--budget" in words:
        del words[words.index("--budget"):words.index("--budget") + 2]
    words += ([] if "--decide" in words else ["--decide"]) + ["--budget", budget]
    return shlex.join(words)


def stalled(runs: pl.DataFrame) -> list[Block]:
    """A paragraph per (model, task) in which no run learnt (every run has a diagnosis,
    analysis/run_diagnosis.py): its arms' verdicts compare runs that all stood still."""
    if "diagnosis" not in runs.columns:
        return []
    blocks: list[Block] = []
    for (model, task), part in runs.partition_by("model", "task", as_dict=True, maintain_order=True).items():
        said = part["diagnosis"].drop_nulls().to_list()
        if said and len(said) == part.height:
            blocks.append(Paragraph(f"No run of {model} / {task} learnt ({len(said)} runs); the first says it "
                                    f"{said[0]}"))
    return blocks


def recommendation(verdicts: pl.DataFrame, meta: dict[str, Any], costs: dict[str, Any], unit: str,
                   policy: VerdictPolicy, runs: pl.DataFrame | None = None) -> list[Block]:
    """The box's blocks: adopt / drop / no change / undecided, and the command that would decide;
    first, the model-task cells where no run learnt at all."""
    first = stalled(runs) if runs is not None else []
    return first + _advice(verdicts, meta, costs, unit, policy)


def _advice(verdicts: pl.DataFrame, meta: dict[str, Any], costs: dict[str, Any], unit: str,
            policy: VerdictPolicy) -> list[Block]:
    if verdicts.is_empty():
        return [Paragraph("Nothing to recommend yet: no trick set has runs to compare with its baseline.")]
    rows, tasks, models = verdicts.to_dicts(), verdicts["task"].n_unique(), verdicts["model"].n_unique()
    by = {kind: [r for r in rows if advice(r["verdict"]) == kind] for kind in ("adopt", "drop", "no change",
                                                                              "undecided")}
    plain = {"adopt": WORTH_IT, "drop": None, "no change": NO_CHANGE}
    blocks: list[Block] = [Paragraph(f"{kind.capitalize()}: {_names(by[kind], tasks, plain[kind], models)}.")
                           for kind in plain]
    open_ = by["undecided"]
    if not open_:
        return blocks + [Paragraph("Undecided: none.")]
    fixed = [r for r in open_ if r.get("p_holm") is not None]
    extra, priced, other = undecided_price(fixed, policy, models)
    text = f"Undecided ({len(open_)}): {_names(open_, tasks, UNDECIDED, models)}."
    if priced:
        text += (f" To resolve ±{policy.resolution:g} at the noise seen: {'; '.join(priced[:SHOWN])}"
                 f"{'; …' if len(priced) > SHOWN else ''} (about {num(extra)} {unit} more, baseline seeds included).")
    if other:
        text += " " + "; ".join(other[:SHOWN]) + ("; …" if len(other) > SHOWN else "") + "."
    blocks.append(Paragraph(text))
    spent = costs.get("total") or 0.0
    if fixed and priced:
        budget = f"{math.ceil(round((spent + extra) * 100, 6)) / 100:g}"
        said = (f"--decide stops each comparison once it is decided, so {budget} {unit} is what it may spend in "
                "all, this sweep's included")
    else:
        budget = "B"
        said = f"B: the {unit} it may spend in all, more than the {num(spent)} spent; each open row's reason says what held it"
    if command := decide_command([str(c) for c in meta.get("commands") or []], budget):
        blocks += [Paragraph(f"The command that decides them ({said}):"), Code([command])]
    return blocks
