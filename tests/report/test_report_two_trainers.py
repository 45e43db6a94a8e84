"""The report's "Same trick, two trainers" section: each trainer's effect against its own baseline,
side by side, whether the verdicts agree, and each trainer's speed and cost; absent for one trainer."""

from __future__ import annotations

import polars as pl
import pytest

from grpo_lab.analysis.interactions import effects
from grpo_lab.report import ReportData, prepare
from grpo_lab.report.render import MISSING, Badge, Paragraph, Table, num
from grpo_lab.report.sections import build_document
from grpo_lab.spec.arm import arm_model

STEPS = 10
# trainer -> (baseline pass@1, clip_higher's gain, loop seconds per run, cost per effective sample)
SIDES = {"grpo-lab": (0.30, 0.10, 20.0, 2e-6), "trl": (0.45, 0.0, 50.0, 5e-6)}
NOISE = {"baseline": [0.01, -0.01, 0.015, -0.005], "clip_higher": [-0.005, 0.01, -0.01, 0.005]}  # seed noise
SHIFT = sum(NOISE["clip_higher"]) / 4 - sum(NOISE["baseline"]) / 4


def _data(trainers: list[str], sides: dict | None = None) -> ReportData:
    runs, steps = [], []
    for trainer in trainers:
        base, gain, loop, cost = (sides or SIDES)[trainer]
        for tricks in ("baseline", "clip_higher"):
            for seed in range(4):
                run_id = f"{trainer}-{tricks}-{seed}"
                score = base + (gain if tricks != "baseline" else 0.0) + NOISE[tricks][seed]
                runs.append({"model": arm_model("tiny", trainer), "task": "math", "tricks": tricks, "seed": seed,
                             "run_id": run_id, "status": "finished", "pass@1": score, "gpu_hours": loop / 3000,
                             "cost_per_effective_sample": cost, "loop_seconds": loop, "collapsed": False})
                steps.append(pl.DataFrame({"run_id": [run_id] * STEPS, "step": list(range(STEPS))}))
    frame = pl.DataFrame(runs)
    return ReportData(frame, pl.concat(steps), effects(frame, "pass@1"), pl.DataFrame(), meta={"name": "two"})


def _section(trainers: list[str], sides: dict | None = None):
    doc = build_document(prepare(_data(trainers, sides)))
    return {s.id: s for s in doc.sections}


def test_each_trainers_effect_is_against_its_own_baseline_side_by_side():
    section = _section(["grpo-lab", "trl"])["trainers"]
    table = next(b for b in section.blocks if isinstance(b, Table))
    row = dict(zip(table.headers, table.rows[0]))
    assert len(table.rows) == 1 and "model" not in table.headers  # one model: its column says nothing
    assert row["trick set"] == "clip_higher"
    assert float(row["grpo-lab: effect on pass@1"]) == pytest.approx(0.10 + SHIFT, abs=1e-3)
    assert float(row["trl: effect on pass@1"]) == pytest.approx(SHIFT, abs=1e-3)  # not TRL's 0.45 - grpo-lab's 0.30
    verdicts = [row["grpo-lab: verdict"], row["trl: verdict"]]
    assert all(isinstance(v, Badge) for v in verdicts) and verdicts[0].text != verdicts[1].text
    assert row["verdicts agree"] == MISSING  # TRL's is undecided: neither agreement nor disagreement
    assert row["grpo-lab: s / step"] == num(20.0 / STEPS) and row["trl: s / step"] == num(50.0 / STEPS)
    cost = [h for h in table.headers if h.endswith("/ effective sample")]
    assert [row[h] for h in cost] == [num(2e-6 * 3600), num(5e-6 * 3600)]


def _agreement(sides: dict) -> tuple[str, str]:
    section = _section(["grpo-lab", "trl"], sides)["trainers"]
    table = next(b for b in section.blocks if isinstance(b, Table))
    intro = next(b for b in section.blocks if isinstance(b, Paragraph))
    return dict(zip(table.headers, table.rows[0]))["verdicts agree"], intro.text


def test_two_undecided_verdicts_are_not_an_agreement():
    no_gain = {t: (base, 0.0, loop, cost) for t, (base, _, loop, cost) in SIDES.items()}
    agree, intro = _agreement(no_gain)
    assert agree == "both undecided"
    assert "0 of 0 trick sets decided under both trainers agree; 1 undecided under at least one" in intro
    gain = {t: (base, 0.10, loop, cost) for t, (base, _, loop, cost) in SIDES.items()}
    agree, intro = _agreement(gain)  # both decided and the same: that is an agreement
    assert agree == "yes"
    assert "1 of 1 trick sets decided under both trainers agree; 0 undecided under at least one" in intro
    agree, intro = _agreement(SIDES)  # decided under grpo-lab only
    assert agree == MISSING and "0 of 0 trick sets decided" in intro and "1 undecided under at least one" in intro


def test_the_section_is_left_out_for_a_sweep_of_one_trainer():
    for trainers in (["grpo-lab"], ["trl"]):
        sections = _section(trainers)
        assert "trainers" not in sections and "verdicts" in sections


def test_a_runs_loop_seconds_leave_out_set_up_evals_and_checkpoints():
    from grpo_lab.analysis.run_metrics import loop_seconds

    phases = {"setup": 3.0, "eval": 1.5, "checkpoint": 0.5, "rollout": 2.0, "train": 2.5, "idle": 0.5}
    assert loop_seconds(10.0, phases) == pytest.approx(5.0)
    assert loop_seconds(float("nan"), phases) != loop_seconds(float("nan"), phases)  # NaN: no wall time


def test_the_recommendation_names_each_rows_trainer():
    blocks = build_document(prepare(_data(["grpo-lab", "trl"]))).sections[0].blocks
    said = " ".join(getattr(b, "text", "") for b in blocks)
    assert "clip_higher (tiny (trl))" in said and "clip_higher (tiny (trl) / math)" in said
