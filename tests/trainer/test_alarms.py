import json
import math
import random

import pytest
import torch

from grpo_lab.spec.config import AlarmsConfig, resolve
from grpo_lab.trainer.alarms import DETECTORS, AlarmMonitor, repetition_rate
from grpo_lab.trainer.grpo import train
from grpo_lab.util.yamlio import ConfigError


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def clean_series(steps=40, seed=0):
    """A healthy run: reward rising, entropy and diversity drifting down slowly, KL growing, noise."""
    rng = random.Random(seed)
    return [{
        "reward/mean": 0.2 + 0.3 * t / steps + rng.gauss(0, 0.03),
        "adv/group_std_mean": 0.8 + rng.gauss(0, 0.05),
        "loss/total": rng.gauss(0, 0.02),
        "diversity/unique_answer_ratio": 0.85 + rng.gauss(0, 0.04),
        "diversity/repetition": 0.1 + rng.gauss(0, 0.02),
        "entropy/mean": 1.0 - 0.2 * t / steps + rng.gauss(0, 0.02),
        "kl/mean": 0.002 + 0.05 * t / steps + abs(rng.gauss(0, 0.005)),
    } for t in range(steps)]


# kind -> (key, value planted on the last `n` steps)
PLANTED = {
    "adv_std_spike": ("adv/group_std_mean", 3.0, 1),
    "diversity_collapse": ("diversity/unique_answer_ratio", 0.3, 5),
    "entropy_collapse": ("entropy/mean", 0.1, 1),
    "kl_explosion": ("kl/mean", 2.0, 5),
    "reward_cliff": ("reward/mean", 0.05, 5),
    "repetition": ("diversity/repetition", 0.9, 5),
    "loss_spike": ("loss/total", 2.0, 1),
    "nan": ("loss/total", math.nan, 1),
}


def monitor_over(series, tmp_path, cfg=None):
    tmp_path.mkdir(exist_ok=True)
    monitor = AlarmMonitor(cfg or AlarmsConfig(), tmp_path, start_step=0)
    return [(step, e.kind) for step, row in enumerate(series) for e in monitor.observe(step, row)]


def test_a_clean_series_raises_nothing(tmp_path):
    for seed in range(5):
        assert monitor_over(clean_series(seed=seed), tmp_path / str(seed)) == []


STALLED = ("diversity_collapse", "entropy_collapse")  # quiet while the reward climbs (sharpening)


@pytest.mark.parametrize("kind", sorted(PLANTED))
def test_each_detector_fires_on_its_planted_anomaly(kind, tmp_path):
    key, value, n = PLANTED[kind]
    series = clean_series()
    for row in series[-n:]:
        row[key] = value
    if kind in STALLED:
        learning = [dict(row) for row in series]
        assert monitor_over(learning, tmp_path / "learning") == []
        for row in series:
            row["reward/mean"] = 0.2 + (row["reward/mean"] - 0.2) / 10  # a run that stopped learning
    past, now = series[:-1], series[-1]
    assert DETECTORS[kind](past, now, AlarmsConfig()) is not None
    assert DETECTORS[kind](clean_series()[:-1], clean_series()[-1], AlarmsConfig()) is None
    fired = monitor_over(series, tmp_path)
    assert len(fired) == 1 and fired[0][1] == kind, fired  # its own detector only, once (cooldown)
    assert fired[0][0] >= len(series) - n  # not before the anomaly


def test_cooldown_warmup_and_the_events_file(tmp_path):
    series = clean_series(30)
    for row in series[8:]:
        row["diversity/repetition"] = 0.9  # a lasting condition
    series[1]["loss/total"] = math.inf  # nan ignores the warmup
    fired = monitor_over(series, tmp_path, AlarmsConfig(cooldown=10))
    # repetition is smoothed over 5 steps: above 0.5 from the third repeating step on
    assert fired == [(1, "nan"), (10, "repetition"), (20, "repetition")]
    events = read_jsonl(tmp_path / "events.jsonl")
    assert [set(e) for e in events] == [{"step", "kind", "value", "threshold", "message"}] * 3
    assert events[2]["value"] == pytest.approx(0.9) and events[2]["threshold"] == 0.5


def test_repetition_rate():
    assert repetition_rate(["abababab"]) == pytest.approx(0.6)  # 5 4-grams, 2 distinct
    assert repetition_rate(["abcdefgh", "42"]) == 0.0  # all distinct; "42" has no 4-gram
    assert repetition_rate([]) == 0.0
    assert repetition_rate(["aaaaaaaaaa"]) == pytest.approx(6 / 7)


def test_stop_on_rejects_an_unknown_kind_with_a_suggestion():
    with pytest.raises(ConfigError, match="did you mean 'kl_explosion'"):
        resolve({"alarms": {"stop_on": ["kl_explsion"]}})
    assert resolve({"alarms": {"stop_on": ["nan", "reward_cliff"]}}).alarms.stop_on == ["nan", "reward_cliff"]


# Real tiny runs. Each setting below fired its alarm on every seed tried (0-3 or 0-5).


def test_low_temperature_collapses_answer_diversity(tmp_path, make_cfg):
    cfg = make_cfg(steps=6, eval={"every": 100}, sampling={"temperature": 0.05}, alarms={"warmup": 3})
    summary = train(cfg, tmp_path)
    events = read_jsonl(tmp_path / "events.jsonl")
    assert (3, "diversity_collapse") in [(e["step"], e["kind"]) for e in events]
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["alarm/count"] for r in rows] == [sum(e["step"] == s for e in events) for s in range(6)]
    assert summary.alarms["diversity_collapse"] == 1 and summary.stopped is False


def test_small_beta_high_lr_explodes_kl(tmp_path, make_cfg):
    cfg = make_cfg(steps=6, eval={"every": 100}, kl={"beta": 1e-3}, optim={"lr": 1e-2}, alarms={"warmup": 3})
    train(cfg, tmp_path)
    assert "kl_explosion" in {e["kind"] for e in read_jsonl(tmp_path / "events.jsonl")}


def test_beta_zero_high_lr_repeats_and_stop_on_ends_the_run(tmp_path, make_cfg):
    # beta 0 has no reference, so no KL to watch: the collapse shows as looping output ("343434...").
    cfg = make_cfg(steps=20, checkpoint_every=100, eval={"every": 100}, kl={"beta": 0.0},
                   optim={"lr": 5e-2, "grad_clip": None}, sampling={"max_new_tokens": 24, "temperature": 0.5},
                   alarms={"stop_on": ["repetition"]})
    summary = train(cfg, tmp_path)
    stop = next(e for e in read_jsonl(tmp_path / "events.jsonl") if e["kind"] == "repetition")
    assert summary.stopped is True and summary.stop_reason == f"repetition at step {stop['step']}"
    assert stop["step"] < 19
    assert read_jsonl(tmp_path / "metrics.jsonl")[-1]["step"] == stop["step"]
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["stopped"] is True and saved["stop_reason"] == summary.stop_reason
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=False)["next_step"] == stop["step"] + 1


def test_resume_cuts_events_and_rebuilds_the_history(tmp_path, make_cfg):
    cfg = make_cfg(steps=10, checkpoint_every=3, eval={"every": 100}, sampling={"temperature": 0.05},
                   alarms={"warmup": 2, "cooldown": 3})
    train(cfg, tmp_path / "once")

    def crash(step, metrics):
        if step == 7:  # the checkpoint resumes at step 6: steps 6 and 7 are logged, then cut
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "twice", on_step=crash)
    train(cfg, tmp_path / "twice")
    once, twice = (read_jsonl(tmp_path / d / "events.jsonl") for d in ("once", "twice"))
    assert len(once) >= 3
    assert [(e["step"], e["kind"]) for e in twice] == [(e["step"], e["kind"]) for e in once]
