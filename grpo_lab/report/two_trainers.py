"""The report's "Same trick, two trainers" section, shown when a sweep holds more than one trainer
(the matrix's `trainers:` axis): per (model, task, trick set), the verdict and effect of the trick
under each trainer side by side, whether the verdicts agree, and each trainer's speed and cost.

Each side's effect is measured against the baseline of its own trainer (spec/arm.py spells the
trainer into the arm's model label, so the verdict table never compares across trainers); this
section only reads that label back and lines the two sides up.
"""

from __future__ import annotations

import polars as pl

from grpo_lab.report.inputs import BASELINE
from grpo_lab.report.render import MISSING, Badge, Block, Paragraph, Table, TableCell, interval, num, signed, text
from grpo_lab.spec.arm import TRAINERS, split_arm_model

SIDE = ["effect", "ci_low", "ci_high", "verdict", "tone", "decided", "seconds_per_step", "cost_per_effective_sample"]


def _split(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its model label split into the model and the trainer."""
    pairs = [split_arm_model(m) for m in frame["model"].to_list()]
    return frame.with_columns(pl.Series("model", [m for m, _ in pairs], dtype=pl.Utf8),
                              pl.Series("trainer", [t for _, t in pairs], dtype=pl.Utf8))


def arm_speed(runs: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """model (label), task, tricks, seconds_per_step: the mean over an arm's runs of the seconds
    in its training steps over the steps it logged (metrics lines, so a run an alarm stopped
    counts the steps it trained)."""
    trained = steps.group_by("run_id").agg(pl.col("step").n_unique().alias("_steps"))
    per_run = (runs.join(trained, on="run_id", how="left")
               .with_columns((pl.col("loop_seconds") / pl.col("_steps")).alias("_sps")))
    return per_run.group_by("model", "task", "tricks").agg(pl.col("_sps").mean().alias("seconds_per_step"))


def side_by_side(verdicts: pl.DataFrame, speed: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """(one row per model, task, trick set with every trainer's SIDE columns suffixed ':<trainer>',
    `agree` and `undecided`, the trainers in TRAINERS order). `agree` is null unless every trainer's
    verdict is decided (verdict_table's `decided`: two undecided verdicts are no agreement);
    `undecided` is true where no trainer's is."""
    frame = _split(verdicts.filter(pl.col("tricks") != BASELINE)
                   .join(speed, on=["model", "task", "tricks"], how="left"))
    trainers = [t for t in TRAINERS if t in set(frame["trainer"].to_list())]
    keys = ["model", "task", "tricks"]
    wide = frame.select(keys).unique(maintain_order=True)
    for t in trainers:
        side = frame.filter(pl.col("trainer") == t).select(keys + [pl.col(c).alias(f"{c}:{t}") for c in SIDE])
        wide = wide.join(side, on=keys, how="left")
    verdict_cols = [pl.col(f"verdict:{t}") for t in trainers]
    settled = [pl.col(f"decided:{t}").fill_null(False) for t in trainers]
    same = pl.all_horizontal([c == verdict_cols[0] for c in verdict_cols[1:]] or [pl.lit(True)])
    return wide.with_columns(pl.when(pl.all_horizontal(settled)).then(same).otherwise(None).alias("agree"),
                             (~pl.any_horizontal(settled)).alias("undecided")), trainers


def _row(r: dict, trainers: list[str]) -> list[TableCell]:
    effects: list[TableCell] = []
    for t in trainers:
        effects += [signed(r[f"effect:{t}"]), interval(r[f"ci_low:{t}"], r[f"ci_high:{t}"]),
                    Badge(r[f"verdict:{t}"], r[f"tone:{t}"]) if r[f"verdict:{t}"] else MISSING]
    if r["agree"] is None:
        agree = f"{'both' if len(trainers) == 2 else 'all'} undecided" if r["undecided"] else MISSING
    else:
        agree = "yes" if r["agree"] else "no"
    speed = [num(r[f"seconds_per_step:{t}"]) for t in trainers]
    cost = [num(None if r[f"cost_per_effective_sample:{t}"] is None else r[f"cost_per_effective_sample:{t}"] * 3600)
            for t in trainers]
    return [text(r["model"]), text(r["task"]), text(r["tricks"]), *effects, agree, *speed, *cost]


def two_trainer_blocks(verdicts: pl.DataFrame, runs: pl.DataFrame, steps: pl.DataFrame,
                       unit: str, metric: str) -> list[Block]:
    """The section's blocks; none when the sweep holds one trainer (the section is then left out).
    `verdicts` is report/verdicts.verdict_table; `runs`, `steps` ReportData's frames."""
    if runs.is_empty() or _split(runs.select("model"))["trainer"].n_unique() < 2:
        return []
    wide, trainers = side_by_side(verdicts, arm_speed(runs, steps))
    headers = ["model", "task", "trick set"]
    for t in trainers:
        headers += [f"{t}: effect on {metric}", f"{t}: CI", f"{t}: verdict"]
    headers += ["verdicts agree", *(f"{t}: s / step" for t in trainers),
                *(f"{t}: {unit.replace('-h', '-s')} / effective sample" for t in trainers)]
    table = Table(headers, [_row(r, trainers) for r in wide.iter_rows(named=True)])
    if wide["model"].n_unique() <= 1:
        table = table.without("model")
    decided = wide["agree"].drop_nulls()
    both = "both trainers" if len(trainers) == 2 else "every trainer"
    intro = Paragraph(
        f"The same trick sets trained by {', '.join(trainers)} on the same problems, rewards, eval problems and "
        f"seeds. Each effect is against the baseline of its own trainer, never across trainers. "
        f"{int(decided.sum())} of {decided.len()} trick sets decided under {both} agree; "
        f"{wide.height - decided.len()} undecided under at least one. Seconds per step count the training steps only "
        f"(set-up, evals and checkpoints left out); the cost per effective sample counts the whole run.")
    return [intro, table]
