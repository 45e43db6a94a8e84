"""The "Screening" section of a sweep run with `--screen`: per rung (its step and fraction of the
steps) the arms dropped, against which best arm, why, whether also below the baseline, the hours
each had spent and the estimate of what its dropping saved; the rule and what a drop guarantees;
the arms a rung could not read. And the dropped arms' runs in the runs table, marked as dropped.

Screening is the typed record (execution/screen.py keeps it on the sweep's registry row;
execution/report_inputs.py builds this from it). The guarantee stated is analysis/screening.py's:
P(dropping an arm within δ of the best) ≤ α, resting on the curve forms.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from grpo_lab.report.render import Block, Paragraph, Table, TableCell, num, plural


@dataclass(frozen=True)
class Drop:
    """One arm dropped at one rung: `hours` it had spent, `hours_saved` the estimate of what
    finishing its runs would have cost more (spent × steps left / steps trained)."""

    model: str
    task: str
    arm: str  # the trick set's order-free key (spec/arm.arm_key)
    best: str  # the arm it is credibly below
    why: str  # the rule's two gaps, in words
    below_baseline: bool
    run_ids: tuple[str, ...]
    hours: float
    hours_saved: float


@dataclass(frozen=True)
class Rung:
    index: int  # 0-based, as recorded; shown from 1
    step: int
    fraction: float | None  # of the matrix's steps; None when the record's rule does not have it
    drops: tuple[Drop, ...] = ()
    unread: dict[str, str] = field(default_factory=dict)  # "model/task/arm" -> why it was not read

    @property
    def label(self) -> str:
        return f"rung {self.index + 1}, step {self.step}"


@dataclass(frozen=True)
class Screening:
    """What a screened sweep's rungs decided. runs: the label rows (model, task, tricks, seed,
    run_id, folder) of the dropped arms' runs, which have no row among the finished runs."""

    rungs: tuple[Rung, ...]
    fractions: tuple[float, ...]
    delta: float
    alpha: float
    inflate: float
    observed: bool = True
    runs: tuple[dict, ...] = ()

    @classmethod
    def from_record(cls, record: dict, runs: list[dict] | None = None) -> Screening:
        """From execution/screen.py's state dict ({"rule": ScreenRule's fields, "rungs": [...]})."""
        rule = record.get("rule") or {}
        fractions = tuple(float(x) for x in rule.get("rungs") or ())
        rungs = tuple(
            Rung(int(r["rung"]), int(r["step"]), fractions[int(r["rung"])] if int(r["rung"]) < len(fractions) else None,
                 tuple(_drop(d) for d in r.get("drops") or ()), dict(r.get("unread") or {}))
            for r in record.get("rungs") or ())
        return cls(rungs, fractions, float(rule.get("delta", float("nan"))), float(rule.get("alpha", float("nan"))),
                   float(rule.get("inflate", float("nan"))), bool(rule.get("observed", True)), tuple(runs or ()))

    def dropped_status(self) -> dict[str, str]:
        """run id -> the runs table's status of a dropped arm's run."""
        return {run_id: f"dropped ({rung.label})" for rung in self.rungs for d in rung.drops for run_id in d.run_ids}


def _drop(d: dict) -> Drop:
    model, task, arm = (list(d["arm"]) + ["", "", ""])[:3]
    return Drop(str(model), str(task), str(arm), str(d.get("best", "")), str(d.get("why", "")),
                bool(d.get("below_baseline")), tuple(d.get("run_ids") or ()), float(d.get("hours") or 0.0),
                float(d.get("hours_saved") or 0.0))


def runs_with_dropped(runs: pl.DataFrame, screening: Screening | None) -> pl.DataFrame:
    """The runs table's frame: a dropped arm's runs marked "dropped (rung r, step s)", added with
    their labels only (paused at their rung, they are not among the finished `runs`); one that is
    among them was run on by a later sweep without --screen: "dropped (...), then finished"."""
    if screening is None:
        return runs
    status = screening.dropped_status()
    if not status:
        return runs
    then = pl.col("run_id").replace_strict(status, default=None, return_dtype=pl.Utf8) + ", then " + pl.col("status")
    marked = runs.with_columns(pl.coalesce(then, pl.col("status")).alias("status"))
    have = set(runs["run_id"].to_list())
    labels = {r["run_id"]: r for r in screening.runs}
    extra = [{**_fallback_labels(screening, run_id), **labels.get(run_id, {}), "status": why}
             for run_id, why in status.items() if run_id not in have]
    if not extra:
        return marked
    added = pl.DataFrame([{c: row.get(c) for c in marked.columns} for row in extra], schema=marked.schema,
                         strict=False)
    return pl.concat([marked, added], how="vertical")


def _fallback_labels(screening: Screening, run_id: str) -> dict:
    """A dropped run's labels from its drop alone: where report_inputs gave none (no seed, no folder)."""
    d = next(d for r in screening.rungs for d in r.drops if run_id in d.run_ids)
    return {"model": d.model, "task": d.task, "tricks": d.arm, "run_id": run_id}


def screening_blocks(screening: Screening | None, unit: str) -> list[Block]:
    """The section's blocks; none without a screening (the section is then left out)."""
    if screening is None:
        return []
    drops = [(rung, d) for rung in screening.rungs for d in rung.drops]
    saved = sum(d.hours_saved for _, d in drops)
    blocks: list[Block] = [
        Paragraph(_rule_text(screening)),
        Paragraph(f"{plural(len(drops), 'arm')} dropped over {plural(len(screening.rungs), 'rung')}; "
                  f"~{num(saved)} {unit} saved in all (an estimate: each dropped arm's hours so far, scaled "
                  "to the steps it did not train). A dropped arm's runs stay paused at their rung, outside the "
                  "finished runs the verdicts rest on (unless a later sweep without --screen ran them on); "
                  "the runs table marks them. Also decided below the "
                  "baseline: its interval lies below the baseline's too, a significant loss on the same event."),
        _drops_table(screening, unit)]
    unread = [[r.label, arm, why] for r in screening.rungs for arm, why in sorted(r.unread.items())]
    if unread:
        blocks += [Paragraph("Arms a rung could not read (they could be neither dropped nor the best there):"),
                   Table(["rung", "arm (model/task/trick set)", "why not read"], unread)]
    return blocks


def _rule_text(s: Screening) -> str:
    fractions = ", ".join(f"{f:g}" for f in s.fractions) or "—"
    gaps = ("its predicted pass@1 at the full length and its observed pass@1 at the rung are both"
            if s.observed else "its predicted pass@1 at the full length is")
    return (f"Rule: rungs at {fractions} of the steps (the full length decides nothing); at each, an arm is "
            f"dropped when {gaps} credibly below the best arm's by more than δ = {s.delta:g}, on intervals at "
            f"α = {s.alpha:g} split over the rungs and arms (Bonferroni), their half-widths × {s.inflate:g} "
            f"(inflate). What a drop guarantees: P(dropping an arm within δ of the best) ≤ α = {s.alpha:g}, "
            "resting on the curve forms: for each arm, one of its seeds' readings (fitted curve, drift "
            "continued, plateau) must not under-read its pass@1 at the full length, and a rise after the rung "
            "that none of them shows, lifting a trailing arm later than the best, is not covered "
            "(analysis/screening.py). The baseline is never dropped.")


def _drops_table(s: Screening, unit: str) -> Table:
    rows: list[list[TableCell]] = []
    for rung in s.rungs:
        head = [str(rung.index + 1), str(rung.step), "—" if rung.fraction is None else f"{rung.fraction:g}"]
        if not rung.drops:
            rows.append(head + ["—", "—", "nothing dropped", "—", "—", "—", "—", "—"])
        for d in rung.drops:
            rows.append(head + [d.model, d.task, d.arm, d.best, d.why, "yes" if d.below_baseline else "no",
                                num(d.hours), num(d.hours_saved)])
    return Table(["rung", "step", "fraction", "model", "task", "arm dropped", "below (best arm)", "why",
                  "also decided below the baseline", f"{unit} spent", f"{unit} saved (estimate)"], rows)
