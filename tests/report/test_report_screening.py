"""A sweep run with --screen: the Screening section (per rung the arms dropped, against which, why, the
hours spent and saved; the rule and its guarantee; the arms not read) and the dropped arms' runs marked
in the runs table. Without --screen the report has no such section."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_lab.execution.report_inputs import _partial, reproduce_commands, screening
from grpo_lab.report import ReportData, write_report
from grpo_lab.report.screening import Screening

# execution/screen.py's record after two decision rungs: lr_high dropped on math at the first
RECORD = {
    "rule": {"rungs": [0.25, 0.5], "delta": 0.02, "alpha": 0.05, "inflate": 1.5, "observed": True},
    "rungs": [
        {"rung": 0, "step": 15,
         "drops": [{"arm": ["tiny", "math", "lr_high"], "best": "kl_decay",
                    "why": "predicted 0.450 at step 60 (≤ 0.470) vs kl_decay's 0.530 (≥ 0.510); at step 15 0.40 vs 0.48",
                    "below_baseline": True, "run_ids": ["math-lr_high-0", "math-lr_high-1", "math-lr_high-2",
                                                        "math-lr_high-3"],
                    "hours": 0.25, "hours_saved": 0.75}],
         "unread": {"tiny/logic/group16": "seed 2: 1 eval after step 0 (needs 2)"}},
        {"rung": 1, "step": 30, "drops": [], "unread": {}},
    ],
}
# math-lr_high-3 never finished (paused at its rung): it is not among the report's runs
PAUSED = {"model": "tiny", "task": "math", "tricks": "lr_high", "seed": 3, "run_id": "math-lr_high-3",
          "folder": "/ws/runs/math-lr_high-3"}


@pytest.fixture(scope="module")
def screened_md(report_data: ReportData, tmp_path_factory: pytest.TempPathFactory) -> str:
    data = dataclasses.replace(report_data, screening=Screening.from_record(RECORD, [PAUSED]))
    _, md = write_report(data, tmp_path_factory.mktemp("screened"))
    return md.read_text()


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}")
    return md[start:md.find("\n## ", start + 1)]


def test_the_section_names_each_drop_its_rung_best_arm_reason_and_hours(screened_md: str) -> None:
    section = _section(screened_md, "Screening")
    row = next(line for line in section.splitlines() if "lr\\_high" in line and "kl\\_decay" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:3] == ["1", "15", "0.25"]  # rung shown from 1, its step, its fraction
    # one model: the model column is left out, as in every table
    assert cells[3:6] == ["math", "lr\\_high", "kl\\_decay"]
    assert "predicted 0.450 at step 60" in cells[6] and cells[7] == "yes"
    assert cells[8:] == ["0.25", "0.75"]  # hours spent, hours saved (estimate)
    assert "| 2 | 30 | 0.5 |" in section and "nothing dropped" in section
    assert "core-h saved (estimate)" in section and "~0.75 core-h saved in all" in section
    assert "P(dropping an arm within δ of the best) ≤ α = 0.05" in section
    assert "δ = 0.02" in section and "× 1.5" in section and "curve form" in section
    assert "tiny/logic/group16" in section and "1 eval after step 0" in section  # an arm not read
    # it follows the verdicts, the arms it dropped have none there
    assert screened_md.index("## Verdicts per trick set") < screened_md.index("## Screening")


def test_the_runs_table_marks_a_dropped_arms_runs(screened_md: str) -> None:
    runs = _section(screened_md, "Runs")
    dropped = [line for line in runs.splitlines() if "math-lr\\_high-" in line]
    assert len(dropped) == 4  # the one paused at its rung, added; three a later sweep ran on
    assert "| 3 | dropped (rung 1, step 15) |" in next(line for line in dropped if "lr\\_high-3" in line)
    ran_on = [line for line in dropped if "lr\\_high-3" not in line]
    assert all("| dropped (rung 1, step 15), then finished |" in line for line in ran_on)
    others = [line for line in runs.splitlines() if "logic-lr\\_high-" in line]
    assert others and not any("dropped" in line for line in others)  # the arm on another task ran on


def test_without_screening_the_report_has_no_such_section(written: tuple[Path, Path]) -> None:
    html, md = (p.read_text() for p in written)
    assert "## Screening" not in md and 'id="screening"' not in html and "dropped (rung" not in md


def test_report_inputs_find_the_record_mark_partial_and_reproduce(tmp_path: Path) -> None:
    ws = tmp_path / "ws"

    def cell(run_id: str, position: int) -> SimpleNamespace:
        labels = {"model": "tiny", "task": "math", "tricks": run_id.split("-")[1], "seed": position,
                  "run_id": run_id}
        run = SimpleNamespace(out_dir=str(ws / "runs" / run_id), attempts=[])
        return SimpleNamespace(run_id=run_id, position=position, run=run, labels=lambda: labels)

    cells = [cell("math-baseline-0", 0), cell("math-lr_high-3", 1)]
    sweep = SimpleNamespace(name="scr", matrix_path="matrices/scr.yaml", cells=cells, screen_json=json.dumps(RECORD))
    found = screening(sweep)
    assert found is not None and [r.step for r in found.rungs] == [15, 30]
    assert [r["run_id"] for r in found.runs] == ["math-lr_high-3"]
    assert found.runs[0]["folder"] == str((ws / "runs" / "math-lr_high-3").resolve())
    # the dropped cell is not still to run: the baseline alone finished is the whole sweep
    assert _partial(sweep, cells[:1], frozenset(found.dropped_status())) is None
    assert _partial(sweep, cells[:1]) == "1 of 2 cells finished"
    run = reproduce_commands(sweep, "matrices/scr.yaml", "pass@1", False, {"waves": []}, found)[1]
    assert run == "grpo-lab sweep matrices/scr.yaml --screen --rungs 0.25,0.5 --delta 0.02"
    assert screening(SimpleNamespace(name="other", cells=cells, screen_json=None)) is None
