"""Alarms stay quiet on healthy runs of the shipped configs (an alarm that always fires is ignored).

tests/data/healthy/<config>.jsonl holds the watched metrics of a real `grpo-lab run
experiments/configs/<config>.yaml` (the run learned: see each file's first and last reward), so
this replays the detectors without training; test_alarms.py still trains the planted failures and
checks that they fire. Re-record a file after a trainer change that moves these metrics:
    grpo-lab run experiments/configs/tiny-math.yaml --out /tmp/r  (then keep `step` + alarms.WATCHED)
"""

import json
from pathlib import Path

import pytest

from grpo_lab.spec.config import load_config
from grpo_lab.trainer.alarms import AlarmMonitor

ROOT = Path(__file__).resolve().parents[2]
RECORDED = sorted((ROOT / "tests" / "data" / "healthy").glob("*.jsonl"))


@pytest.mark.parametrize("recorded", RECORDED, ids=[p.stem for p in RECORDED])
def test_a_healthy_run_of_a_shipped_config_raises_no_alarm(recorded, tmp_path):
    cfg = load_config(ROOT / "experiments" / "configs" / f"{recorded.stem}.yaml")
    rows = [json.loads(line) for line in recorded.read_text().splitlines()]
    assert len(rows) == cfg.steps and rows[-1]["reward/mean"] > rows[0]["reward/mean"]  # the whole run, and it learned
    monitor = AlarmMonitor(cfg.alarms, tmp_path, 0)
    for row in rows:
        monitor.observe(row["step"], row)
    assert not (tmp_path / "events.jsonl").read_text(), (tmp_path / "events.jsonl").read_text()[:500]



def test_every_tiny_shipped_config_has_a_recording():
    shipped = {p.stem for p in (ROOT / "experiments" / "configs").glob("tiny-*.yaml")}
    assert shipped <= {p.stem for p in RECORDED}, f"record a healthy run of {sorted(shipped - {p.stem for p in RECORDED})}"
