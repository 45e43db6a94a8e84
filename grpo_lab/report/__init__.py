"""Comparison report of a sweep: which tricks are worth their compute, which hurt combined.

    from grpo_lab.report import ReportData, write_report
    html_path, md_path = write_report(ReportData(runs, steps, effects, interactions, ...), out)

The modules, in the order the report is made:
    inputs    ReportData (the frames, conformed to their column contracts); execution/report_inputs
              loads a registered sweep's finished runs into one
    verdicts  per trick set: means over seeds (run_stats) and the verdict (worth it, harmful, ...);
              the verdict vocabulary's one owner; after --decide it renders analysis/verdict.py's Verdicts
    figures   the figures' data series, their matplotlib drawings and captions
    compute_curves  the compute-curve section: fits, predictions, ceiling and speed verdicts
    forest    the first figure: every effect with its CI, coloured by its verdict
    sections  the content of each report section: its tables, notes and figures
    recommend, samples, costs, runs  the recommendation box, sample completions, the cost basis,
              and the runs table every verdict row links to
    render    the Document model, number formatting, and the Markdown and HTML renderers
and here: write_report, which computes everything, builds the Document and writes the files.

Every file is written by util/files.atomic_write (a temp file in its final folder renamed over
the target), so a crash leaves the previous report or the new one, never half a file. Images go first and the HTML last.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

from grpo_lab.analysis import curve_verdicts
from grpo_lab.report import compute_curves
from grpo_lab.report.figure_data import FigureLimits
from grpo_lab.report.figures import choose_sets, make_figures
from grpo_lab.report.forest import forest_images
from grpo_lab.report.inputs import ReportData
from grpo_lab.report.render import Document, Image, render_html, render_markdown
from grpo_lab.report.sections import Parts, TableLimits, build_document
from grpo_lab.report.verdicts import VerdictPolicy, run_stats, verdict_table
from grpo_lab.util.files import atomic_write

__all__ = ["ReportData", "VerdictPolicy", "write_report"]

FIGURE_DIR = "report_files"


def prepare(data: ReportData, policy: VerdictPolicy = VerdictPolicy(),
            figure_limits: FigureLimits = FigureLimits(),
            table_limits: TableLimits = TableLimits()) -> Parts:
    """Everything the report shows, computed: stats, verdicts, figures."""
    stats = run_stats(data.runs)
    chosen = choose_sets(data, figure_limits)
    verdicts = verdict_table(stats, data.effects, data.interactions, policy, data.decisions)
    decided = bool((data.decisions or {}).get("verdicts"))
    figures = {"glance": forest_images(verdicts, data.metric, decided), **make_figures(data, chosen, figure_limits)}
    labels = [] if decided else curve_verdicts.verdicts(data.curves, policy.alpha)  # none on a --decide sweep
    curve_blocks = compute_curves.curve_blocks(data.curves, labels, decided)
    return Parts(data, stats, chosen, verdicts, figures, policy, table_limits, curve_blocks)


def write_files(doc: Document, out_dir: Path) -> tuple[Path, Path]:
    """Write images, report.md, then index.html; drop images an earlier report left behind."""
    figure_dir = out_dir / FIGURE_DIR
    figure_dir.mkdir(parents=True, exist_ok=True)
    images = [b for s in doc.sections for b in s.blocks if isinstance(b, Image)]
    for image in images:
        atomic_write(figure_dir / f"{image.name}.png", image.png, durable=True)
    md_path, html_path = out_dir / "report.md", out_dir / "index.html"

    def href(target: str) -> str:  # a run folder, relative to the report so the pair can move together
        if not os.path.isabs(target):
            return target
        return urllib.parse.quote(os.path.relpath(target, out_dir.resolve()))  # '#', '?', '%' in a path

    markdown = render_markdown(doc, lambda image: f"{FIGURE_DIR}/{image.name}.png", href)
    atomic_write(md_path, markdown.encode("utf-8"), durable=True)
    atomic_write(html_path, render_html(doc, href).encode("utf-8"), durable=True)
    current = {f"{image.name}.png" for image in images}
    for old in figure_dir.glob("*.png"):
        if old.name not in current:
            old.unlink()
    return html_path, md_path


def write_report(data: ReportData, out_dir: Path, *, policy: VerdictPolicy = VerdictPolicy(),
                 figure_limits: FigureLimits = FigureLimits(),
                 table_limits: TableLimits = TableLimits()) -> tuple[Path, Path]:
    """Write the report into out_dir; returns (index.html, report.md)."""
    parts = prepare(data, policy, figure_limits, table_limits)
    return write_files(build_document(parts), Path(out_dir))
