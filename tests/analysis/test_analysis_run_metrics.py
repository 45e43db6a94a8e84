import json
import math

import numpy as np
import polars as pl
import pytest

from grpo_lab.analysis import run_metrics as rm


def test_smooth_is_a_centred_moving_average_shrinking_at_the_ends():
    y = np.array([0.0, 3.0, 6.0, 0.0, 3.0])
    # window 3: [mean(0,3), mean(0,3,6), mean(3,6,0), mean(6,0,3), mean(0,3)]
    assert rm.smooth(y, 3) == pytest.approx([1.5, 3.0, 3.0, 3.0, 1.5])
    assert rm.smooth(y, 1) == pytest.approx(y)


def test_steps_to_fraction_counts_steps_to_90_percent_of_the_gain():
    steps = np.arange(10, 15, dtype=float)
    y = np.array([0.2, 0.5, 0.8, 0.95, 1.0])  # gain 0.8, target 0.2 + 0.72 = 0.92: reached at index 3
    assert rm.steps_to_fraction(steps, y, window=1) == 3
    assert math.isnan(rm.steps_to_fraction(steps, y[::-1].copy(), window=1))  # no gain, no convergence
    batch = rm.steps_to_fraction(np.stack([steps, steps]), np.stack([y, y * 2]), window=1)
    assert batch.tolist() == [3, 3]


def test_reward_auc_is_the_mean_level_by_trapezoids():
    assert rm.reward_auc(np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 1.0])) == pytest.approx(0.75)
    assert rm.reward_auc(np.array([0.0, 2.0, 4.0]), np.array([0.0, 1.0, 1.0])) == pytest.approx(0.75)
    assert rm.reward_auc(np.array([7.0]), np.array([0.4])) == pytest.approx(0.4)


def test_oscillation_is_zero_on_a_line_and_measures_zigzag():
    assert rm.oscillation(np.arange(20, dtype=float) * 0.3, window=5) == pytest.approx(0.0, abs=1e-12)
    zigzag = np.array([1.0, -1.0] * 10)
    # interior: s_t = ±1/3 opposite to y_t, residual ±4/3 -> std 4/3
    assert rm.oscillation(zigzag, window=3) == pytest.approx(4 / 3)
    assert math.isnan(rm.oscillation(np.ones(3), window=5))


def test_length_slope_and_ratio():
    steps = np.arange(10, dtype=float)
    assert rm.slope(steps, 2 * steps + 1) == pytest.approx(200.0)  # per 100 steps
    y = np.array([10.0, 20.0] + [0.0] * 16 + [60.0, 30.0])  # first 10% mean 15, last 10% mean 45
    assert rm.end_ratio(y) == pytest.approx(3.0)


def test_stability_kernels():
    loss = np.array([0.0, 0.1, -0.1, 0.05, -0.05, 0.0, 3.0, 0.1])
    assert rm.spikes(loss) == 1
    assert rm.spikes(np.zeros(5)) == 0
    assert rm.explosion(np.array([1.0, 1.0, 2.0, 1.0, 5.0])) == pytest.approx(5.0)


def test_series_metrics_batches_runs_of_different_lengths_like_one_run_at_a_time():
    rng = np.random.default_rng(0)
    rows = []
    for run_id, T in (("a", 30), ("b", 30), ("c", 12)):
        reward = np.linspace(0, 1, T) + 0.05 * rng.normal(size=T)
        for t in range(T):
            rows.append({"run_id": run_id, "step": t, "reward/mean": reward[t], "length/mean": 10.0 + t,
                         "loss/total": rng.normal(), "adv/std": 1.0 + (t == 3),
                         "eval/pass@1": 0.1 * (t % 5) if t % 5 == 4 or t == T - 1 else None, "eval/pass@k": None})
    steps = pl.DataFrame(rows).with_columns(pl.lit(None, pl.Float64).alias("loss/policy"))
    out = {r["run_id"]: r for r in rm.series_metrics(steps).to_dicts()}
    for run_id in ("a", "c"):
        part = steps.filter(pl.col("run_id") == run_id)
        x, y = part["step"].to_numpy().astype(float), part["reward/mean"].to_numpy()
        assert out[run_id]["steps_to_90"] == rm.steps_to_fraction(x, y)
        assert out[run_id]["oscillation"] == pytest.approx(rm.oscillation(y))
        assert out[run_id]["length_slope"] == pytest.approx(100.0)
    assert out["c"]["pass@1"] == pytest.approx(0.1) and out["c"]["pass@1_best"] == pytest.approx(0.4)
    assert out["a"]["adv_explosion"] == pytest.approx(2.0)
    assert out["a"]["pass@k"] is None


def test_run_row_on_a_real_tiny_run(tiny_run):
    row = rm.run_row(tiny_run)
    summary = json.loads((tiny_run / "summary.json").read_text())
    assert row["run_id"] == summary["run_id"] and row["tricks"] == "baseline" and row["task"] == "math"
    assert row["seed"] == 0 and row["k"] == 2
    assert row["pass@1"] == pytest.approx(summary["final"]["eval/pass@1"])
    assert row["pass@k"] == pytest.approx(summary["final"]["eval/pass@2"])
    assert row["delta_pass@1"] == pytest.approx(summary["delta_pass@1"])
    assert 0 < row["sampling_share"] < 1 and row["effective_samples"] == summary["effective_samples"]
    assert row["alarms"] == 2 and row["alarm_kinds"] == "entropy_collapse+loss_spike"
    # an entropy alarm alone does not make a run collapsed: collapse.py's rule reads its pass@1
    base, final = summary["base"]["eval/pass@1"], summary["final"]["eval/pass@1"]
    assert row["collapsed"] is (final < base / 2 and base - final >= 0.02)
    if "device_hours" in summary:
        assert row["gpu_hours"] == pytest.approx(summary["device_hours"]) and row["cost_per_effective_sample"] > 0
    else:  # a summary from before cost accounting
        assert row["gpu_hours"] is None
    for key in ("reward_final", "reward_auc", "oscillation", "length_slope", "length_ratio", "pass@1_best"):
        assert isinstance(row[key], float), key


def test_steps_frame_reads_nan_metrics_and_keeps_curve_columns(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"task": ["math"], "eval": {"k": [1, 4]}}))
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 0, "reward/mean": 0.5, "length/mean": 3, "eval/pass@1": 0.1, "eval/pass@4": 0.3, '
        '"eval/math/pass@1": 0.1, "timing/rollout": 1.0}\n{"step": 1, "reward/mean": NaN, "length/mean": 4}\n')
    frame = rm.steps_frame({"r1": tmp_path})
    assert frame["run_id"].to_list() == ["r1", "r1"] and "timing/rollout" not in frame.columns
    assert frame["eval/pass@k"].to_list() == [0.3, None] and "eval/math/pass@1" in frame.columns
    assert math.isnan(frame["reward/mean"][1]) and frame["kl/mean"].null_count() == 2
    out = rm.series_metrics(frame).row(0, named=True)
    assert out["reward_final"] == pytest.approx(0.5)  # the NaN step is skipped
    assert out["steps_to_90"] is None and out["adv_explosion"] is None  # one step: no gain; no adv/std logged
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        rm.steps_frame({"r2": tmp_path / "nope"})
