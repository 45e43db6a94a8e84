"""What a reader sees first and what they copy: the forest plot on top, eval curves from the base
model, no one-cell heatmap, the CPU unit, times to the second, and Reproduce commands that run
from the repository root with every flag the sweep used."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pytest

from grpo_lab.report import ReportData, prepare, write_report
from grpo_lab.report.forest import forest_rows
from grpo_lab.execution.report_inputs import repo_path, reproduce_commands
from grpo_lab.report.render import Image, hours_unit, timestamp
from grpo_lab.report.sections import build_document
from tests.report.conftest import SETS, TASKS, make_data


def test_the_forest_plot_is_the_first_figure_right_after_the_recommendation(report_data: ReportData) -> None:
    doc = build_document(prepare(report_data))
    assert [s.id for s in doc.sections[:2]] == ["recommend", "glance"]
    first = next(b for s in doc.sections for b in s.blocks if isinstance(b, Image))
    assert first.name == "forest" and first is doc.sections[1].blocks[0]


def test_the_forest_has_one_row_per_trick_set_with_its_ci(report_data: ReportData) -> None:
    verdicts = prepare(report_data).verdicts
    (row,) = forest_rows(verdicts)
    assert sorted(row.sets) == sorted(s for s in SETS if s != "baseline") and row.tasks == sorted(TASKS)
    assert row.rows.height == len(TASKS) * len(row.sets)
    assert (row.rows["ci_low"] < row.rows["effect"]).all() and (row.rows["effect"] < row.rows["ci_high"]).all()
    means = [verdicts.filter(pl.col("tricks") == s)["effect"].mean() for s in row.sets]
    assert means == sorted(means, reverse=True)  # best on top


def test_the_forest_keeps_labelled_sets_when_it_caps_rows() -> None:
    verdicts = pl.DataFrame({"model": "m", "task": "t", "tricks": ["big", "small_harm", "mid"],
                             "effect": [0.09, -0.01, 0.05], "ci_low": [-0.1, -0.02, -0.1],
                             "ci_high": [0.2, -0.005, 0.2], "verdict": ["undecided", "harmful", "undecided"],
                             "tone": ["warn", "bad", "warn"]})
    (row,) = forest_rows(verdicts, max_rows=2)
    assert row.total_sets == 3 and row.sets == ["big", "small_harm"]


def test_eval_series_starts_at_the_base_eval(report_data: ReportData) -> None:
    series = report_data.eval_steps()
    first = series.group_by("run_id").agg(pl.col("step").first(), pl.col("eval/pass@1").first())
    base = report_data.runs.select("run_id", "base_pass@1")
    joined = first.join(base, on="run_id")
    assert joined.height == report_data.runs.height
    assert (joined["step"] == 0).all() and (joined["eval/pass@1"] == joined["base_pass@1"]).all()
    # logged evals sit at the steps trained before them: index 10 is after 11 steps
    logged = report_data.steps.drop_nulls("eval/pass@1")["step"].unique().sort().to_list()
    assert series.filter(pl.col("step") > 0)["step"].unique().sort().to_list() == [s + 1 for s in logged]


def test_a_single_combination_is_a_table_row_not_a_heatmap(tmp_path: Path) -> None:
    data = make_data()
    one = data.interactions.filter((pl.col("task") == "math") & (pl.col("tricks") == "kl_decay+ema_ref"))
    _, md = write_report(dataclasses.replace(data, interactions=one), tmp_path)
    text = md.read_text()
    assert "interaction-heatmap" not in text and not (tmp_path / "report_files" / "interaction-heatmap.png").exists()
    section = text[text.index('<a id="interactions"></a>'):text.index('<a id="costs"></a>')]
    assert section.count(r"kl\_decay+ema\_ref") == 1  # its row in the table


@pytest.mark.parametrize("unit", ["device-hours", "device-hours (cpu)", "core-hours"])
def test_a_cpu_sweep_reads_core_hours_everywhere(tmp_path: Path, unit: str) -> None:
    from tests.report.test_report_decisions import DECISIONS, VARIANCE

    data = make_data()
    data = dataclasses.replace(data, costs={**data.costs, "unit": unit, "price_per_gpu_hour": 2.0},
                               decisions=DECISIONS, variance=VARIANCE)
    html, md = write_report(data, tmp_path)
    for text in (md.read_text(), html.read_text()):
        assert "core-h" in text and "GPU-h" not in text and "GPU-s" not in text


def test_units_by_hardware() -> None:
    assert hours_unit("gpu-hours") == hours_unit("GPU-hours") == hours_unit(None) == "GPU-h"
    assert hours_unit("device-hours (mps)") == "device-h"


def test_times_are_shown_to_the_second_in_utc(tmp_path: Path) -> None:
    data = make_data()
    data = dataclasses.replace(data, meta={**data.meta, "created": "2026-12-01T20:15:06.498155"})
    _, md = write_report(data, tmp_path)
    text = md.read_text()
    assert "created 2026-12-01 20:15:06 UTC" in text
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", text)
    assert timestamp("2026-12-01T21:15:06.9+01:00") == "2026-12-01 20:15:06 UTC"


def _sweep(name: str, matrix: str, runners: list[str]) -> SimpleNamespace:
    run = SimpleNamespace(attempts=[SimpleNamespace(runner=r) for r in runners])
    return SimpleNamespace(name=name, matrix_path=matrix, cells=[SimpleNamespace(run=run)])


OPTIONS = {"budget": 4.0, "delta": 0.02, "alpha": 0.05, "wave": None, "most_seeds": 32, "method": "unpaired",
           "sequence": "t", "estimand": "healthy", "eval_samples": "auto", "eval_design": [["tiny", "logic", 32]]}


def test_reproduce_runs_from_the_repo_with_every_decide_flag() -> None:
    sweep = _sweep("tt", "/work/elsewhere/matrices/ten_tricks.yaml", ["slurm", "slurm"])
    matrix = repo_path(sweep.matrix_path)
    plan, run, report = reproduce_commands(sweep, matrix, "pass@1", True, {"waves": [{}], "options": OPTIONS})
    assert matrix == "matrices/ten_tricks.yaml"
    assert plan == "grpo-lab plan matrices/ten_tricks.yaml --decide-delta 0.02"
    assert run == ("grpo-lab sweep matrices/ten_tricks.yaml --name tt --runner slurm --decide --budget 4 "
                   "--delta 0.02 --most-seeds 32 --unpaired")
    assert report == "grpo-lab report tt --metric pass@1 --logit"
    assert not any(re.search(r"(^|\s)/", c) for c in (plan, run, report))
    older = {k: v for k, v in OPTIONS.items() if k != "sequence"}  # waves recorded before t existed used betting
    assert reproduce_commands(sweep, matrix, "pass@1", True, {"waves": [{}], "options": older})[1].endswith(
        "--unpaired --sequence betting")
    for samples, flag in ((16, "--eval-samples 16"), (None, "--eval-samples none")):
        opts = {**OPTIONS, "eval_samples": samples}
        assert reproduce_commands(sweep, matrix, "pass@1", True, {"waves": [{}], "options": opts})[1].endswith(flag)
    no_estimand = {k: v for k, v in OPTIONS.items() if k != "estimand"}  # recorded before it: decided on the mean
    assert "--unpaired --estimand mean" in reproduce_commands(sweep, matrix, "pass@1", True,
                                                             {"waves": [{}], "options": no_estimand})[1]
    before = {k: v for k, v in OPTIONS.items() if k not in ("eval_samples", "eval_design")}  # before the design
    assert reproduce_commands(sweep, matrix, "pass@1", True, {"waves": [{}], "options": before})[1].endswith(
        "--unpaired --eval-samples none")


def test_reproduce_without_decide_or_with_unrecorded_options() -> None:
    sweep = _sweep("quickstart", str(Path.cwd() / "matrices" / "quickstart.yaml"), ["local"])
    plain = reproduce_commands(sweep, repo_path(sweep.matrix_path), "pass@1", False, {"waves": []})
    assert plain[1] == "grpo-lab sweep matrices/quickstart.yaml" and "--decide" not in " ".join(plain)
    old = reproduce_commands(sweep, "matrices/quickstart.yaml", "pass@1", False, {"waves": [{}], "options": None})
    assert old[1].startswith("grpo-lab sweep matrices/quickstart.yaml --decide --sequence betting --eval-samples none  # ")
    assert repo_path("/tmp/tt/ten_tricks_math.yaml") == "ten_tricks_math.yaml"


def test_the_registry_keeps_decide_options_and_adds_the_column_to_old_ones(tmp_path: Path) -> None:
    import json

    from sqlalchemy import text

    from grpo_lab.execution import registry as reg
    from grpo_lab.execution.waves import report_rows

    url = f"sqlite:///{tmp_path / 'registry.db'}"
    with reg.connect(url)() as session:  # a registry from before the column: drop it again
        session.execute(text("ALTER TABLE decide_waves DROP COLUMN options_json"))
        session.commit()
    with reg.connect(url)() as session:
        sweep = reg.Sweep(name="tt", matrix_path="matrices/tt.yaml")
        session.add(sweep)
        session.flush()
        for wave, options in ((0, None), (1, json.dumps(OPTIONS))):
            session.add(reg.DecideWave(sweep_id=sweep.id, wave=wave, hours=1.0, runs=2, open=1, significant=0,
                                       equivalent=0, options_json=options))
        session.commit()
        assert report_rows(session, sweep)["options"] == OPTIONS


def test_a_report_on_a_running_sweep_says_it_is_partial() -> None:
    from types import SimpleNamespace

    from grpo_lab.execution.report_inputs import _partial

    cells = [SimpleNamespace(run_id=f"r{i}") for i in range(3)]
    assert _partial(SimpleNamespace(cells=cells), cells[:1]) == "1 of 3 cells finished"
    assert _partial(SimpleNamespace(cells=cells[:2]), cells[:2]) is None
    data = make_data()
    data.meta["partial"] = "1 of 3 cells finished"
    assert build_document(prepare(data)).summary[0].startswith("Partial: 1 of 3 cells finished")
