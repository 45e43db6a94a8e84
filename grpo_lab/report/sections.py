"""The report's sections, in order, with their stable ids: what each one says and shows."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import polars as pl

from grpo_lab.report import fmt, tables
from grpo_lab.report.decisions import decision_blocks, variance_blocks
from grpo_lab.report.document import (
    Block,
    Code,
    Document,
    Image,
    Paragraph,
    Section,
    Table,
)
from grpo_lab.report.inputs import KEYS, ReportData
from grpo_lab.report.verdicts import VerdictPolicy


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
    stats: pl.DataFrame       # series.run_stats
    chosen: pl.DataFrame      # trick sets drawn as lines
    verdicts: pl.DataFrame    # verdicts.verdict_table
    figures: dict[str, list[Image]]
    policy: VerdictPolicy
    limits: TableLimits


def _models(runs: pl.DataFrame) -> str:
    models = runs["model"].unique().sort().to_list()
    return f"model {models[0]}" if len(models) == 1 else fmt.plural(len(models), "model")


def _meta(data: ReportData, *keys: str) -> str:
    """First of several accepted spellings of a meta key (the CLI's, the registry's)."""
    return next((str(data.meta[k]) for k in keys if data.meta.get(k)), fmt.MISSING)


def _summary(data: ReportData, unit: str) -> list[str]:
    runs = data.runs
    status = Counter(runs["status"].fill_null("unknown").to_list())
    counts = ", ".join(f"{n} {s}" for s, n in sorted(status.items()))
    return [
        f"Sweep {_meta(data, 'sweep', 'name')} · matrix {_meta(data, 'matrix', 'matrix_path')} "
        f"· metric {data.metric} · created {_meta(data, 'created', 'created_at')}",
        f"{runs.height} runs ({counts or 'none'}) · {runs.select(KEYS).n_unique()} trick sets "
        f"on {_models(runs)} × "
        f"{fmt.plural(runs['task'].n_unique(), 'task')} · total cost "
        f"{fmt.num(data.costs.get('total'))} {unit}",
    ]


def _verdicts(p: Parts, unit: str) -> list[Block]:
    if p.verdicts.is_empty():
        return [Paragraph("No effects yet: no trick set has runs to compare with its baseline.")]
    counts = Counter(p.verdicts["verdict"].to_list())
    return [
        Paragraph(f"Effect of each trick set on {p.data.metric} against the baseline of the same "
                  f"model and task, its confidence interval, and its price in {unit}. Worth it: "
                  "CI above 0 and at most "
                  f"{p.policy.max_hours_per_point:g}× a baseline run's hours per point "
                  f"(1 point = {p.policy.point:g} of {p.data.metric}). Harmful in combination: part "
                  "of a combination flagged in the interactions section, whatever it does alone."),
        Paragraph(" · ".join(f"{n} {v}" for v, n in counts.most_common())),
        tables.verdict_table(p.verdicts, unit, p.data.metric, p.limits.verdicts),
    ]


def _or(blocks: list[Block], empty: str) -> list[Block]:
    return blocks or [Paragraph(empty)]


def _curves(p: Parts) -> list[Block]:
    blocks: list[Block] = list(p.figures.get("curves", []))
    if not p.chosen.is_empty():
        blocks += [Paragraph("Run metrics of the trick sets drawn above (means over seeds):"),
                   tables.metric_table(p.stats, p.chosen)]
    return _or(blocks, "No runs to draw.")


def _length(p: Parts) -> list[Block]:
    blocks: list[Block] = list(p.figures.get("length", []))
    if not p.stats.is_empty():
        blocks.append(tables.length_table(p.stats, p.limits.length))
    return _or(blocks, "No length data.")


def _stability(p: Parts) -> list[Block]:
    blocks: list[Block] = list(p.figures.get("stability", [])) or [
        Paragraph("No alarm events were recorded.")]
    table = tables.stability_table(p.stats, p.limits.stability)
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
            tables.interaction_table(p.data.interactions, p.limits.interactions)]


def _costs(data: ReportData, unit: str) -> list[Block]:
    c = data.costs
    if not c:
        return [Paragraph("No cost accounting was recorded for this sweep.")]
    total, wasted, per_sample = c.get("total"), c.get("wasted"), c.get("cost_per_effective_sample")
    lines = [
        f"Total {fmt.num(total)} {unit}; wasted on failed or retried attempts {fmt.num(wasted)} "
        f"{unit} ({fmt.share(wasted, total)} of the total).",
        f"Cost per effective sample (a completion that contributed a gradient): "
        f"{fmt.num(per_sample)} h = "
        f"{fmt.num(None if per_sample is None else per_sample * 3600)} s. G-fold sampling eats "
        "part of GRPO's savings: compare this, not curves alone.",
    ]
    price = c.get("price_per_gpu_hour")
    if price and total:
        lines.append(f"At {price:g} per {unit} the sweep cost {fmt.num(price * total)}.")
    return [*(Paragraph(line) for line in lines), tables.phase_table(c, unit),
            Paragraph("Where the hours went, against the split the source study reports:"),
            tables.split_table(c, unit)]


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
    unit = fmt.hours_unit(p.data.hours_unit)
    title = f"GRPO trick report — {_meta(p.data, 'sweep', 'name')}"
    sections = [
        Section("verdicts", "Verdicts per trick set", _verdicts(p, unit)),
        Section("curves", "Reward and pass@1 curves", _curves(p)),
        Section("length", "Output length", _length(p)),
        Section("stability", "Stability", _stability(p)),
        Section("interactions", "Interactions between tricks", _interactions(p)),
        Section("costs", "Costs", _costs(p.data, unit)),
        Section("environment", "Environment", _environment(p.data)),
        Section("reproduce", "Reproduce", _reproduce(p.data)),
    ]
    decided = decision_blocks(p.data.decisions, unit) + variance_blocks(p.data.variance, unit)
    if decided:
        sections.insert(5, Section("decisions", "Decisions and variance budget", decided))
    if p.data.runs["model"].n_unique() <= 1:
        # One model: the summary names it; a constant column would only push tables wider.
        for section in sections:
            section.blocks = [b.without("model") if isinstance(b, Table) else b
                              for b in section.blocks]
    return Document(title, _summary(p.data, unit), sections)
