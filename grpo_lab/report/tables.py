"""Frames to report tables: which columns, in which order, formatted how, capped where."""

from __future__ import annotations

from typing import Any

import polars as pl

from grpo_lab.report import fmt
from grpo_lab.report.document import Badge, Table, TableCell, Tone, capped
from grpo_lab.report.inputs import HARM_VERDICTS, KEYS
from grpo_lab.report.verdicts import TONES

INTERACTION_TONES: dict[str, Tone] = {
    **{v: "bad" for v in HARM_VERDICTS}, "below_best_single": "warn", "additive": "good",
    "synergy": "good", "inconclusive": "neutral",
}
# The study's split of its budget (docs/study.md): main matrix 60%, search and reruns 15%, rest 25%.
STUDY_SPLIT = {"main matrix": 0.60, "search and reruns": 0.15, "sampling and eval": 0.25}


def _text(x: Any) -> str:
    return fmt.MISSING if x is None or x == "" else str(x)


def _keys(row: dict[str, Any]) -> list[TableCell]:
    return [_text(row["model"]), _text(row["task"]), _text(row["tricks"])]


def verdict_table(verdicts: pl.DataFrame, unit: str, metric: str, limit: int) -> Table:
    headers = ["model", "task", "trick set", "n", f"effect on {metric}", "CI", "p",
               f"{unit} / run", f"extra {unit} / run", f"extra {unit} / point",
               f"{unit.replace('-h', '-s')} / effective sample", "verdict", "why"]
    rows: list[list[TableCell]] = []
    for r in verdicts.iter_rows(named=True):
        per_sample = r["cost_per_effective_sample"]
        rows.append(_keys(r) + [
            _text(r["n"]), fmt.signed(r["effect"]), fmt.interval(r["ci_low"], r["ci_high"]),
            fmt.p_value(r["p_value"]), fmt.num(r["hours_per_run"]), fmt.signed(r["extra_hours"]),
            fmt.num(r["hours_per_point"]),
            fmt.num(None if per_sample is None else per_sample * 3600),
            Badge(r["verdict"], TONES[r["verdict"]]), r["reason"]])
    kept, note = capped(rows, limit, "trick sets")
    return Table(headers, kept, note)


def metric_table(stats: pl.DataFrame, chosen: pl.DataFrame) -> Table:
    """Run metrics (means over seeds) of the trick sets the curves show."""
    shown = stats.join(chosen, on=KEYS).sort(["model", "task", "rank"])
    headers = ["model", "task", "trick set", "finished / runs", "pass@1", "best pass@1", "pass@k",
               "final reward", "reward AUC", "steps to 90%", "oscillation"]
    rows: list[list[TableCell]] = [
        _keys(r) + [f"{r['finished']} / {r['runs']}", fmt.num(r["pass@1"]),
                    fmt.num(r["pass@1_best"]), fmt.num(r["pass@k"]), fmt.num(r["reward_final"]),
                    fmt.num(r["reward_auc"]), fmt.num(r["steps_to_90"]), fmt.num(r["oscillation"])]
        for r in shown.iter_rows(named=True)]
    return Table(headers, rows)


def length_table(stats: pl.DataFrame, limit: int) -> Table:
    ranked = stats.sort(["length_ratio", *KEYS], descending=[True, False, False, False],
                        nulls_last=True)
    headers = ["model", "task", "trick set", "length ratio (end / start)", "length slope / step",
               "final reward"]
    rows: list[list[TableCell]] = [
        _keys(r) + [fmt.num(r["length_ratio"]), fmt.signed(r["length_slope"]),
                    fmt.num(r["reward_final"])]
        for r in ranked.head(limit).iter_rows(named=True)]
    note = f"The {len(rows)} trick sets with the largest length ratio, of {stats.height}."
    return Table(headers, rows, note)


def stability_table(stats: pl.DataFrame, limit: int) -> Table:
    troubled = stats.filter((pl.col("alarms") > 0) | (pl.col("collapsed") > 0)).sort(
        ["collapsed", "alarms", *KEYS], descending=[True, True, False, False, False],
        nulls_last=True)
    headers = ["model", "task", "trick set", "runs", "runs with alarms", "collapsed runs",
               "alarms", "alarm kinds", "oscillation"]
    rows: list[list[TableCell]] = [
        _keys(r) + [_text(r["runs"]), _text(r["runs_with_alarms"]),
                    Badge(str(r["collapsed"]), "bad" if r["collapsed"] else "neutral"),
                    _text(r["alarms"]), _text(r["alarm_kinds"]), fmt.num(r["oscillation"])]
        for r in troubled.iter_rows(named=True)]
    kept, note = capped(rows, limit, "trick sets with alarms")
    return Table(headers, kept, note)


def interaction_table(interactions: pl.DataFrame, limit: int) -> Table:
    ranked = (interactions.with_columns(pl.col("verdict").is_in(HARM_VERDICTS).alias("_flag"))
              .sort(["_flag", "interaction", *KEYS], descending=[True, False, False, False, False],
                    nulls_last=True))
    headers = ["model", "task", "combination", "seeds", "expected", "observed", "interaction",
               "CI", "q", "p (Holm)", "best single", "verdict", "seeds needed", "warnings"]
    rows: list[list[TableCell]] = []
    for r in ranked.iter_rows(named=True):
        verdict = _text(r["verdict"])
        best = f"{_text(r['best_single'])} ({fmt.signed(r['best_single_effect'])})"
        rows.append(_keys(r) + [
            _text(r["n_seeds"]), fmt.signed(r["expected"]), fmt.signed(r["observed"]),
            fmt.signed(r["interaction"]), fmt.interval(r["ci_low"], r["ci_high"]),
            fmt.p_value(r["q_value"]), fmt.p_value(r["p_holm"]), best,
            Badge(verdict, INTERACTION_TONES.get(verdict, "neutral")), _text(r["seeds_needed"]),
            _text(r["warnings"])])
    kept, note = capped(rows, limit, "combinations (flagged and most negative first)")
    return Table(headers, kept, note)


def phase_table(costs: dict[str, Any], unit: str) -> Table:
    total = costs.get("total")
    rows: list[list[TableCell]] = [[str(phase), fmt.num(hours), fmt.share(hours, total)]
                              for phase, hours in (costs.get("by_phase") or {}).items()]
    rows.append(["total", fmt.num(total), fmt.share(total, total)])
    return Table(["phase", unit, "share"], rows)


def split_table(costs: dict[str, Any], unit: str) -> Table:
    split = costs.get("split") or {}
    spent = sum(v for v in split.values() if v is not None) or None
    names = list(STUDY_SPLIT) + [k for k in split if k not in STUDY_SPLIT]
    rows: list[list[TableCell]] = [
        [name, fmt.num(split.get(name)), fmt.share(split.get(name), spent),
         f"{STUDY_SPLIT[name]:.0%}" if name in STUDY_SPLIT else fmt.MISSING]
        for name in names]
    return Table(["bucket", unit, "share here", "share in the study"], rows)
