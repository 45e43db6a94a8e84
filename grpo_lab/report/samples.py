"""Sample completions side by side: per model and task, the same eval prompts answered by the
baseline and by each trick set at their last logged eval (the lowest seed each ran), so a reader
sees what a verdict means in outputs, not only in pass@1.

`sample_frame` reads them from run folders (completions.jsonl: the eval examples the trainer
logs at every eval); `sample_blocks` renders one table per (model, task)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from grpo_lab.report.render import Block, Paragraph, Table, TableCell, short
from grpo_lab.spec.arm import BASELINE, arm_key

PROMPTS = 3  # prompts shown per model and task
SETS = 6  # trick sets shown beside the baseline per model and task
WIDTH = 60  # characters of one completion shown

SCHEMA = {"model": pl.String, "task": pl.String, "tricks": pl.String, "seed": pl.Int64, "step": pl.Int64,
          "prompt": pl.String, "completion": pl.String, "reward": pl.Float64}


def sample_frame(runs: list[tuple[dict, Path]]) -> pl.DataFrame:
    """One row per (arm, prompt): the first completion and the mean reward of the last logged
    eval examples of the arm's lowest-seed run. runs: (labels {model, task, tricks, seed}, folder)."""
    from grpo_lab.rundir import RunDir

    first: dict[tuple[str, str, str], tuple[dict, Path]] = {}
    for labels, folder in sorted(runs, key=lambda r: r[0]["seed"]):
        first.setdefault((labels["model"], labels["task"], arm_key(labels["tricks"])), (labels, folder))
    rows = []
    for labels, folder in first.values():
        logged = RunDir(folder).completions()
        last = max((r["step"] for r in logged), default=None)
        for r in (r for r in logged if r["step"] == last and r.get("completions")):
            rewards = r.get("rewards") or []
            rows.append({"model": labels["model"], "task": labels["task"], "tricks": labels["tricks"],
                         "seed": labels["seed"], "step": last, "prompt": r["prompt"],
                         "completion": str(r["completions"][0]),
                         "reward": sum(rewards) / len(rewards) if rewards else None})
    return pl.DataFrame(rows, schema=SCHEMA)


def _cell(row: dict | None) -> TableCell:
    if row is None:
        return "-"
    reward = "" if row["reward"] is None else f" ({row['reward']:.2f})"
    return short(row["completion"].replace("\n", " ⏎ "), WIDTH) + reward


def sample_blocks(samples: pl.DataFrame, order: list[str] | None = None) -> list[Block]:
    """Per (model, task): PROMPTS prompts the baseline answered, a column per trick set (`order`
    first: the report's verdict order), each cell the set's first completion and its group's mean reward."""
    if samples.is_empty():
        return [Paragraph("No eval examples were logged (completions.jsonl) for these runs.")]
    blocks: list[Block] = [Paragraph(
        "The same eval prompts answered at each arm's last logged eval (its lowest seed): the first sampled "
        "completion, and in brackets the mean reward of its group.")]
    for (model, task), part in samples.partition_by("model", "task", as_dict=True, maintain_order=True).items():
        labels = list(dict.fromkeys(part["tricks"].to_list()))
        base = next((t for t in labels if arm_key(t) == BASELINE), None)
        rank = {t: i for i, t in enumerate(order or [])}
        others = sorted((t for t in labels if t != base), key=lambda t: (rank.get(t, len(rank)), t))[:SETS]
        by = {(r["tricks"], r["prompt"]): r for r in part.iter_rows(named=True)}
        prompts = list(dict.fromkeys(r["prompt"] for r in part.iter_rows(named=True)
                                     if base is None or r["tricks"] == base))[:PROMPTS]
        columns = ([base] if base else []) + others
        rows = [[short(p, 40), *(_cell(by.get((t, p))) for t in columns)] for p in prompts]
        blocks += [Paragraph(f"{model} / {task}:"), Table(["prompt", *columns], rows)]
    return blocks
