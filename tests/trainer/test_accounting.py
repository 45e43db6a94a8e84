import json
import time

import pytest
import torch

from grpo_lab.rundir import Summary
from grpo_lab.trainer.grpo import train

PHASES = {"setup", "rollout", "reward", "reference", "advantage", "train", "eval", "checkpoint", "idle"}


def check_cost(summary: Summary) -> None:
    """The phases' device-hours add up to the run's wall time on its devices (docs/design.md section 5),
    checked on the summary's JSON form: its keys are what summary.json holds."""
    s = summary.model_dump(mode="json")
    assert set(s["device_hours_by_phase"]) == PHASES
    expected = s["wall_seconds"] * s["devices"] / 3600
    assert sum(s["device_hours_by_phase"].values()) == pytest.approx(expected, rel=0.05)
    assert s["device_hours"] == pytest.approx(expected)
    assert s["devices"] == 1 and s["unit"] == "device-hours (cpu)"
    assert s["cost_per_effective_sample_hours"] == pytest.approx(s["device_hours"] / s["effective_samples"])
    share = (s["phase_seconds"]["rollout"] + s["phase_seconds"]["reward"]) / s["wall_seconds"]
    assert s["sampling_share"] == pytest.approx(share) and 0 < share < 1
    timed = sum(v for k, v in s["phase_seconds"].items() if k != "idle")
    assert timed <= s["wall_seconds"]  # idle is what is left, never a clamped negative
    assert s["price_per_gpu_hour"] is None and s["tokens_generated"] > 0 and s["tokens_trained"] > 0


def test_phase_hours_add_up_to_wall_hours(tmp_path, make_cfg):
    summary = train(make_cfg(), tmp_path)
    check_cost(summary)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["device_hours_by_phase"] == summary.device_hours_by_phase
    # the process's CPU time beside the wall time, in the summary and per phase in every step row
    assert 0 < saved["cpu_seconds"] < 8 * saved["wall_seconds"]
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(r["cpu/train"] > 0 for r in rows) and all(r["cpu/train"] < 8 * r["timing/train"] for r in rows)


def test_a_resumed_run_counts_both_attempts(tmp_path, make_cfg):
    cfg = make_cfg(steps=8, checkpoint_every=2, eval={"every": 4})

    def crash(step, metrics):
        if step == 5:
            raise KeyboardInterrupt

    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path, on_step=crash)
    first_cpu = torch.load(tmp_path / "checkpoint.pt", weights_only=False)["cpu_seconds"]
    t1, c1 = time.perf_counter(), time.process_time()
    summary = train(cfg, tmp_path)
    t2, c2 = time.perf_counter(), time.process_time()
    check_cost(summary)
    assert t2 - t1 < summary.wall_seconds < t2 - t0  # the first attempt's wall up to its checkpoint counts
    assert first_cpu > 0 and summary.cpu_seconds == pytest.approx(first_cpu + (c2 - c1), rel=0.1)  # and its CPU time


def test_effective_samples_exclude_masked_and_zero_variance_samples(tmp_path, make_cfg):
    # Two tokens truncate about half the tiny model's answers; step 0 samples the same in both runs.
    # 8 prompts: with 4, every truncated answer once fell in an all-zero group, masking changed nothing.
    short = {"steps": 2, "eval": {"every": 100}, "sampling": {"max_new_tokens": 2, "prompts_per_step": 8}}
    plain = train(make_cfg(**short), tmp_path / "plain")
    masked = train(make_cfg(**short, reward={"format": "mask", "mask_truncated": True}), tmp_path / "masked")
    rows = {d: [json.loads(line) for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
            for d in ("plain", "masked")}
    p0, m0 = rows["plain"][0], rows["masked"][0]
    n = p0["samples/total"]
    assert p0["samples/effective"] == round((1 - p0["adv/zero_std_frac"]) * n)  # every sample of a varied group
    assert m0["length/truncated_frac"] > 0
    assert m0["samples/effective"] < p0["samples/effective"]
    assert m0["samples/effective"] <= round((1 - m0["length/truncated_frac"]) * n)
    for summary, d in ((plain, "plain"), (masked, "masked")):
        assert summary.effective_samples == sum(r["samples/effective"] for r in rows[d])
