"""What `sweep --screen` would spend, priced by the plan (spec/screen_spend.py; `plan --screen`):
the range from nothing dropped to every droppable arm dropped at the first rung, the baseline kept
whole, and bad rungs refused in one line before the plan reads any data."""

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_lab.cli import app
from grpo_lab.spec.budget import Estimate
from grpo_lab.spec.matrix import Cell
from grpo_lab.spec.model_cards import load_hardware
from grpo_lab.spec.plan import Plan
from grpo_lab.spec.screen_spend import screening_spend

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "matrices" / "quickstart.yaml"  # 60 steps, eval.every 30
runner = CliRunner()


def small_plan(rows: list[tuple[str, tuple[str, ...], int, float]], price: float = 2.0, fixed: float = 0.0) -> Plan:
    """A plan of model 'm' from (task, trick set, seed, estimated hours of the cell) rows, each
    cell's hours `fixed` of them its per-run fixed cost."""
    cells = [Cell("m", task, tricks, seed, f"{task}-{'+'.join(tricks)}-{seed}", (), None)
             for task, tricks, seed, _ in rows]
    estimates = [Estimate({"training": hours - fixed, "fixed": fixed}, 1, "device-hours") for *_, hours in rows]
    return Plan("small", load_hardware("cpu"), cells, estimates, [], None, None, price)


def test_the_range_is_the_full_plan_down_to_every_droppable_arm_stopped_at_the_first_rung():
    plan = small_plan([("t", (), 0, 1.0), ("t", (), 1, 1.0),      # baseline: kept, 2.0
                       ("t", ("a",), 0, 2.0), ("t", ("a",), 1, 2.0),  # droppable: 4.0
                       ("t", ("b",), 0, 4.0), ("t", ("b",), 1, 4.0),  # droppable: 8.0
                       ("u", ("a",), 0, 3.0),                         # no baseline on u: the cheapest arm kept, 3.0
                       ("u", ("b",), 0, 5.0)])                        # droppable: 5.0
    s = screening_spend(plan, [25, 50, 100])
    assert s.most == pytest.approx(22.0) == pytest.approx(plan.total)
    # kept 2 + 3 = 5 at full; the dropped 4 + 8 + 5 = 17 at the rung's fraction
    assert [r.hours for r in s.rungs] == pytest.approx([5 + 17 * 0.25, 5 + 17 * 0.5])
    assert s.least == pytest.approx(9.25)
    assert (s.droppable, s.arms, s.full) == (3, 5, 100)
    d = s.to_dict()
    assert d["least"] == pytest.approx({"gpu_hours": 9.25, "cost": 18.5})
    assert d["most"] == pytest.approx({"gpu_hours": 22.0, "cost": 44.0, "resumes_gpu_hours": 0.0})
    assert [(r["rung"], r["step"], r["fraction"]) for r in d["rungs"]] == [(1, 25, 0.25), (2, 50, 0.5)]


def test_the_baseline_is_kept_at_full_cost_even_when_it_is_the_dearest_arm():
    plan = small_plan([("t", (), 0, 10.0), ("t", ("a",), 0, 1.0)])
    s = screening_spend(plan, [25, 100])
    assert s.least == pytest.approx(10.0 + 1.0 * 0.25)  # not 1 + 10 * 0.25: the baseline is never dropped
    assert s.most == pytest.approx(11.0)


def test_each_resume_pays_the_runs_fixed_cost_again():
    # two cells of 10 h, 2 of them fixed; rungs at 1/4 and 1/2: each cell resumed twice if kept
    plan = small_plan([("t", (), 0, 10.0), ("t", ("a",), 0, 10.0)], fixed=2.0)
    s = screening_spend(plan, [25, 50, 100])
    assert s.resumes == pytest.approx(2 * 2 * 2.0) and s.most == pytest.approx(20.0 + 8.0)
    kept = 10.0 + 2 * 2.0
    # dropped at rung 1: a quarter of its 8 variable hours and one fixed; at rung 2: half and two
    assert [r.hours for r in s.rungs] == pytest.approx([kept + 0.25 * 8 + 2.0, kept + 0.5 * 8 + 2 * 2.0])


def test_a_lone_arm_has_nothing_to_drop():
    s = screening_spend(small_plan([("t", ("a",), 0, 3.0), ("t", ("a",), 1, 3.0)]), [50, 100])
    assert s.least == pytest.approx(s.most) == pytest.approx(6.0) and s.droppable == 0
    (line,) = s.describe("core-h")  # one line, not a range and rungs that cannot differ
    assert "no arm can be dropped" in line and "6 core-h" in line


def invoke(workspace: Path, *args: str):
    return runner.invoke(app, ["plan", str(QUICKSTART), "--workspace", str(workspace), *args])


def test_plan_screen_prints_and_writes_the_range(tmp_path):
    res = invoke(tmp_path, "--screen", "--rungs", "0.5")
    assert res.exit_code == 0, res.output
    assert "--screen (rungs 0.5 of 60 steps)" in res.output and "dropped at rung 1 (step 30)" in res.output
    assert "depends on the data" in res.output and "nothing dropped" in res.output
    res = invoke(tmp_path, "--screen", "--rungs", "0.5", "--json")
    p = json.loads(res.stdout)
    base = sum(c["gpu_hours"] for c in p["cells"] if not c["tricks"])
    rest = p["totals"]["gpu_hours"] - base
    s = p["screening"]
    assert s["most"]["gpu_hours"] == pytest.approx(p["totals"]["gpu_hours"])
    assert s["least"]["gpu_hours"] == pytest.approx(base + 0.5 * rest)
    assert (s["arms"], s["droppable_arms"], s["full_steps"]) == (5, 4, 60)
    assert "screening" not in json.loads(invoke(tmp_path, "--json").stdout)


@pytest.mark.parametrize("rungs, says", [("0.25,0.5", "eval.every = 30"), ("0.5,0.25", "increasing fractions"),
                                         ("1.5", "strictly between 0 and 1"), ("half", "expected fractions")])
def test_bad_rungs_end_plan_in_one_line_before_its_data_is_read(rungs, says, monkeypatch, tmp_path):
    def no_data_read(plan):
        raise AssertionError("the rungs are checked first")

    monkeypatch.setattr("grpo_lab.spec.plan.check_data", no_data_read)
    res = invoke(tmp_path, "--screen", "--rungs", rungs)
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], res.output
    if rungs == "0.25,0.5":  # the field and the file
        assert "quickstart.yaml" in lines[0] and "eval.every" in lines[0]


def test_a_plan_fits_its_budget_only_with_the_resumes_counted():
    plan = small_plan([("t", (), 0, 10.0), ("t", ("a",), 0, 10.0)], fixed=2.0)
    limited = dataclasses.replace(plan, limit=24.0)
    assert limited.fits is True and limited.spend == pytest.approx(20.0)
    screened = dataclasses.replace(limited, screening=screening_spend(plan, [25, 50, 100]))
    assert screened.spend == pytest.approx(28.0) and screened.fits is False
