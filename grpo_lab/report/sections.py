"""The report's content: its sections, in order, with their stable ids, and the tables, notes and
figures each one shows (which columns, in which order, formatted how, capped where)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import polars as pl

from grpo_lab.analysis.rule import ESTIMAND_TEXT
from grpo_lab.report.costs import cost_blocks
from grpo_lab.report.decisions import decision_blocks, variance_blocks
from grpo_lab.report.inputs import KEYS, ReportData
from grpo_lab.report.recommend import recommendation
from grpo_lab.report.samples import sample_blocks
from grpo_lab.report.screening import runs_with_dropped, screening_blocks
from grpo_lab.report.render import (
    MISSING,
    Badge,
    Block,
    Code,
    Document,
    Image,
    Paragraph,
    Section,
    Table,
    TableCell,
    hours_unit,
    interval,
    key_cells,
    num,
    p_value,
    plural,
    signed,
    text,
    timestamp,
)
from grpo_lab.report.runs import arm_link, runs_blocks
from grpo_lab.report.two_trainers import two_trainer_blocks
from grpo_lab.report.verdicts import INTERACTION_TONES, ON_ESTIMAND, VerdictPolicy, flag_expr


@dataclass(frozen=True)
class TableLimits:
    verdicts: int = 500
    length: int = 15
    stability: int = 30
    interactions: int = 200


@dataclass(frozen=True)
class Parts:
    """Everything computed before rendering: the inputs plus the derived frames and figures."""

    data: ReportData
    stats: pl.DataFrame       # verdicts.run_stats
    chosen: pl.DataFrame      # trick sets drawn as lines
    verdicts: pl.DataFrame    # verdicts.verdict_table
    figures: dict[str, list[Image]]
    policy: VerdictPolicy
    limits: TableLimits
    compute_curves: list[Block]  # report/compute_curves.py's blocks


# --- tables ---



def _capped(rows: list[list[TableCell]], limit: int, what: str) -> tuple[list[list[TableCell]], str]:
    """Keep the first `limit` rows; the note says how many were left out."""
    if len(rows) <= limit:
        return rows, ""
    return rows[:limit], f"Showing the first {limit} of {len(rows)} {what}."


def _verdict_table(verdicts: pl.DataFrame, unit: str, metric: str, limit: int) -> Table:
    headers = ["model", "task", "trick set", "n", f"effect on {metric}", "CI", "p", "p (Holm)",
               f"{unit} / run", f"extra {unit} / run", f"extra {unit} / point",
               f"{unit.replace('-h', '-s')} / effective sample", "verdict", "why"]
    rows: list[list[TableCell]] = []
    for r in verdicts.iter_rows(named=True):
        per_sample = r["cost_per_effective_sample"]
        rows.append([text(r["model"]), text(r["task"]), arm_link(r),
            text(r["n"]), signed(r["effect"]), interval(r["ci_low"], r["ci_high"]),
            p_value(r["p_value"]), p_value(r["p_holm"]), num(r["hours_per_run"]), signed(r["extra_hours"]),
            num(r["hours_per_point"]),
            num(None if per_sample is None else per_sample * 3600),
            Badge(r["verdict"], r["tone"]), r["reason"]])
    kept, note = _capped(rows, limit, "trick sets")
    return Table(headers, kept, note)


def _decided_table(verdicts: pl.DataFrame, unit: str, metric: str, limit: int) -> Table:
    """After --decide: the estimate, interval and seeds each label rests on, and the collapses."""
    headers = ["model", "task", "trick set", f"effect on {metric}", "confidence sequence", "seeds (of runs)",
               "collapses", f"{unit} / run", f"extra {unit} / run", f"extra {unit} / point",
               f"{unit.replace('-h', '-s')} / effective sample", "verdict", "why"]
    rows: list[list[TableCell]] = []
    for r in verdicts.iter_rows(named=True):
        per_sample = r["cost_per_effective_sample"]
        seeds = MISSING if r["seeds"] is None else f"{r['seeds']} of {r['runs']}"
        rows.append([text(r["model"]), text(r["task"]), arm_link(r),
            signed(r["effect"]), interval(r["ci_low"], r["ci_high"]), seeds, r["collapse"],
            num(r["hours_per_run"]), signed(r["extra_hours"]), num(r["hours_per_point"]),
            num(None if per_sample is None else per_sample * 3600),
            Badge(r["verdict"], r["tone"]), r["reason"]])
    kept, note = _capped(rows, limit, "trick sets")
    return Table(headers, kept, note)


def _metric_table(stats: pl.DataFrame, chosen: pl.DataFrame) -> Table:
    """Run metrics (means over seeds) of the trick sets the curves show."""
    shown = stats.join(chosen, on=KEYS).sort(["model", "task", "rank"])
    headers = ["model", "task", "trick set", "finished / runs", "pass@1", "best pass@1", "pass@k",
               "final reward", "reward AUC", "steps to 90%", "oscillation"]
    rows: list[list[TableCell]] = [
        key_cells(r) + [f"{r['finished']} / {r['runs']}", num(r["pass@1"]),
                    num(r["pass@1_best"]), num(r["pass@k"]), num(r["reward_final"]),
                    num(r["reward_auc"]), num(r["steps_to_90"]), num(r["oscillation"])]
        for r in shown.iter_rows(named=True)]
    return Table(headers, rows)


def _length_table(stats: pl.DataFrame, limit: int) -> Table:
    ranked = stats.sort(["length_ratio", *KEYS], descending=[True, False, False, False],
                        nulls_last=True)
    headers = ["model", "task", "trick set", "length ratio (end / start)", "length slope / step",
               "final reward"]
    rows: list[list[TableCell]] = [
        key_cells(r) + [num(r["length_ratio"]), signed(r["length_slope"]),
                    num(r["reward_final"])]
        for r in ranked.head(limit).iter_rows(named=True)]
    note = f"The {len(rows)} trick sets with the largest length ratio, of {stats.height}."
    return Table(headers, rows, note)


def _stability_table(stats: pl.DataFrame, limit: int) -> Table:
    troubled = stats.filter((pl.col("alarms") > 0) | (pl.col("collapsed") > 0)).sort(
        ["collapsed", "alarms", *KEYS], descending=[True, True, False, False, False],
        nulls_last=True)
    headers = ["model", "task", "trick set", "runs", "runs with alarms", "collapsed runs",
               "alarms", "alarm kinds", "oscillation"]
    rows: list[list[TableCell]] = [
        key_cells(r) + [text(r["runs"]), text(r["runs_with_alarms"]),
                    Badge(str(r["collapsed"]), "bad" if r["collapsed"] else "neutral"),
                    text(r["alarms"]), text(r["alarm_kinds"]), num(r["oscillation"])]
        for r in troubled.iter_rows(named=True)]
    kept, note = _capped(rows, limit, "trick sets with alarms")
    return Table(headers, kept, note)


def _interaction_table(interactions: pl.DataFrame, limit: int) -> Table:
    ranked = (interactions.with_columns(flag_expr(interactions.columns).alias("_flag"))
              .sort(["_flag", "interaction", *KEYS], descending=[True, False, False, False, False],
                    nulls_last=True))
    headers = ["model", "task", "combination", "seeds", "expected", "observed", "interaction",
               "CI", "q", "p (Holm)", "best single", "verdict", "seeds needed", "warnings"]
    rows: list[list[TableCell]] = []
    for r in ranked.iter_rows(named=True):
        verdict = text(r["verdict"])
        best = f"{text(r['best_single'])} ({signed(r['best_single_effect'])})"
        rows.append(key_cells(r) + [
            text(r["n_seeds"]), signed(r["expected"]), signed(r["observed"]),
            signed(r["interaction"]), interval(r["ci_low"], r["ci_high"]),
            p_value(r["q_value"]), p_value(r["p_holm"]), best,
            Badge(verdict, INTERACTION_TONES.get(verdict, "neutral")), text(r["seeds_needed"]),
            text(r["warnings"])])
    kept, note = _capped(rows, limit, "combinations (flagged and most negative first)")
    return Table(headers, kept, note)





def _models(runs: pl.DataFrame) -> str:
    models = runs["model"].unique().sort().to_list()
    return f"model {models[0]}" if len(models) == 1 else plural(len(models), "model")


def _meta(data: ReportData, *keys: str) -> str:
    """First of several accepted spellings of a meta key (the CLI's, the registry's)."""
    return next((str(data.meta[k]) for k in keys if data.meta.get(k)), MISSING)


def _summary(data: ReportData, unit: str) -> list[str]:
    runs = data.runs
    status = Counter(runs["status"].fill_null("unknown").to_list())
    counts = ", ".join(f"{n} {s}" for s, n in sorted(status.items()))
    partial = data.meta.get("partial")
    return [
        *([f"Partial: {partial}; the others are still to run, running, or failed: this report shows the "
           "finished runs only."] if partial else []),
        (f"Sweep {_meta(data, 'sweep', 'name')} · matrix {_meta(data, 'matrix', 'matrix_path')} "
         f"· metric {data.metric} · created {timestamp(_meta(data, 'created', 'created_at'))}"),
        (f"{runs.height} runs ({counts or 'none'}) · {runs.select(KEYS).n_unique()} trick sets "
         f"on {_models(runs)} × {plural(runs['task'].n_unique(), 'task')} · total cost "
         f"{num(data.costs.get('total'))} {unit}"),
    ]


def _verdicts(p: Parts, unit: str) -> list[Block]:
    if p.verdicts.is_empty():
        return [Paragraph("No effects yet: no trick set has runs to compare with its baseline.")]
    counts = Paragraph(" · ".join(f"{n} {v}" for v, n in Counter(p.verdicts["verdict"].to_list()).most_common()))
    if (p.data.decisions or {}).get("verdicts"):
        return [_decided_intro(p, unit), counts,
                _decided_table(p.verdicts, unit, p.data.metric, p.limits.verdicts)]
    return [
        Paragraph(f"Effect of each trick set on {p.data.metric} against the baseline of the same "
                  f"model and task, its confidence interval and p (uncorrected numbers), and its price in "
                  f"{unit}. Labels come from Holm-adjusted p ≤ {p.policy.alpha:g} over the table's "
                  f"{p.verdicts.height} effects. Worth it: a significant gain at most "
                  f"{p.policy.max_hours_per_point:g}× a baseline run's hours per point "
                  f"(1 point = {p.policy.point:g} of {p.data.metric}). Harmful in combination: part "
                  "of a combination the interaction detector flags, whatever it does alone."),
        counts,
        _verdict_table(p.verdicts, unit, p.data.metric, p.limits.verdicts),
    ]


def _decided_intro(p: Parts, unit: str) -> Paragraph:
    estimands = sorted({v.estimand for v in p.data.decisions["verdicts"]})
    about = "; ".join(f"“{ON_ESTIMAND.get(e, e)}”: {ESTIMAND_TEXT.get(e, e)}" for e in estimands)
    return Paragraph(
        f"Labels are --decide's verdicts (decisions section), each naming what it is about ({about}). "
        f"Effect on {p.data.metric} against the baseline of the same model and task, and the anytime-valid "
        "confidence sequence the label rests on (family-wise over every label and wave, not a per-row 95% CI), "
        "on the seeds it rests on of the runs of the least-sampled arm, with the scores --decide read (the eval "
        "design's where it had one); then how many runs of the trick and of the baseline collapsed and what the "
        f"collapse verdict says, and its price in {unit}. Collapses more often: the trick's collapse rate is "
        "significantly above the baseline's, whatever pass@1 does on the other seeds. Worth it: a significant "
        f"gain at most {p.policy.max_hours_per_point:g}× a baseline run's hours per point "
        f"(1 point = {p.policy.point:g} of {p.data.metric}). Harmful in combination: part of a combination "
        "whose interaction --decide found significantly negative, or whose collapse rate it found above what "
        "its singles predict.")


def _or(blocks: list[Block], empty: str) -> list[Block]:
    return blocks or [Paragraph(empty)]


def _glance(p: Parts) -> list[Block]:
    return _or(list(p.figures.get("glance", [])), "No effects yet: no trick set has runs to compare with its baseline.")


def _curves(p: Parts) -> list[Block]:
    blocks: list[Block] = list(p.figures.get("curves", []))
    if not p.chosen.is_empty():
        blocks += [Paragraph("Run metrics of the trick sets drawn above (means over seeds):"),
                   _metric_table(p.stats, p.chosen)]
    return _or(blocks, "No runs to draw.")


def _length(p: Parts) -> list[Block]:
    blocks: list[Block] = list(p.figures.get("length", []))
    if not p.stats.is_empty():
        blocks.append(_length_table(p.stats, p.limits.length))
    return _or(blocks, "No length data.")


def _stability(p: Parts) -> list[Block]:
    blocks: list[Block] = list(p.figures.get("stability", [])) or [
        Paragraph("No alarm events were recorded.")]
    table = _stability_table(p.stats, p.limits.stability)
    if table.rows:
        return blocks + [table]
    return blocks + [Paragraph("No run raised an alarm or collapsed.")]


def _interactions(p: Parts) -> list[Block]:
    if p.data.interactions.is_empty():
        return [Paragraph("No combinations of tricks in this sweep, so no interactions.")]
    intro = Paragraph(
        "For each combination: expected = sum of its single tricks' effects, observed = its own "
        "effect, interaction = observed − expected, with its CI across seeds. Flagged when the "
        "interaction is significantly negative after multiple-comparison correction, when the "
        "combination is harmful, or when it collapsed while none of its single tricks did.")
    return [intro, *p.figures.get("interactions", []),
            _interaction_table(p.data.interactions, p.limits.interactions)]


def _environment(data: ReportData) -> list[Block]:
    if not data.env:
        return [Paragraph("No environment snapshot was recorded.")]
    return [Paragraph("Pinned at sweep time; compare it before comparing runs across machines."),
            Table(["component", "version"], [[str(k), str(v)] for k, v in data.env.items()])]


def _reproduce(data: ReportData) -> list[Block]:
    commands = [str(c) for c in data.meta.get("commands") or []]
    if not commands:
        return [Paragraph("No commands were recorded.")]
    return [Paragraph("Run these from the repository root, at the commit in the environment "
                      "section, to reproduce this sweep and report:"), Code(commands)]


def build_document(p: Parts) -> Document:
    unit = hours_unit(p.data.hours_unit)
    title = f"GRPO trick report — {_meta(p.data, 'sweep', 'name')}"
    sections = [
        Section("recommend", "Recommendation", recommendation(p.verdicts, p.data.meta, p.data.costs, unit, p.policy, p.data.runs)),
        Section("glance", "At a glance", _glance(p)),
        Section("verdicts", "Verdicts per trick set", _verdicts(p, unit)),
        Section("curves", "Reward and pass@1 curves", _curves(p)),
        Section("compute", "Compute curves: ceiling and speed", p.compute_curves),
        Section("samples", "Sample completions", sample_blocks(p.data.samples, p.verdicts["tricks"].to_list())),
        Section("length", "Output length", _length(p)),
        Section("stability", "Stability", _stability(p)),
        Section("interactions", "Interactions between tricks", _interactions(p)),
        Section("costs", "Costs", cost_blocks(p.data, unit)),
        Section("environment", "Environment", _environment(p.data)),
        Section("runs", "Runs", runs_blocks(runs_with_dropped(p.data.runs, p.data.screening))),
        Section("reproduce", "Reproduce", _reproduce(p.data)),
    ]
    decided = decision_blocks(p.data.decisions, unit) + variance_blocks(p.data.variance, unit)
    if decided:
        sections.insert(9, Section("decisions", "Decisions and variance budget", decided))
    trainers = two_trainer_blocks(p.verdicts, p.data.runs, p.data.steps, unit, p.data.metric)
    if trainers:  # a sweep of one trainer has nothing to set side by side
        sections.insert(3, Section("trainers", "Same trick, two trainers", trainers))
    screened = screening_blocks(p.data.screening, unit)
    if screened:  # after the verdicts: it says which arms have none
        after = [s.id for s in sections].index("verdicts") + 1
        sections.insert(after, Section("screening", "Screening", screened))
    if p.data.runs["model"].n_unique() <= 1:
        # One model: the summary names it; a constant column would only push tables wider.
        for section in sections:
            section.blocks = [b.without("model") if isinstance(b, Table) else b
                              for b in section.blocks]
    return Document(title, _summary(p.data, unit), sections)
