"""The variance budget: known components are recovered, and the best design moves the right way."""

import numpy as np
import pytest

from grpo_lab.analysis import variance


def cell(rng, n=6, P=200, sd_w=0.03, sd_e=0.15, sd_v=0.04, arms=8):
    u = rng.normal(0, 0.2, P)
    out = {}
    for i in range(arms):
        key = "baseline" if i == 0 else f"t{i}"
        Y = 0.4 + u + rng.normal(0, sd_v, P) + rng.normal(0, sd_w, (n, 1)) + rng.normal(0, sd_e, (n, P))
        out[key] = (tuple(range(n)), Y)
    return out


def test_components_recover_the_simulated_variances():
    est = {k: [] for k in ("sigma2_w", "sigma2_e", "sigma2_v")}
    rng = np.random.default_rng(0)
    for _ in range(40):
        c = variance.components(cell(rng))
        for k in est:
            est[k].append(c[k])
    assert np.mean(est["sigma2_e"]) == pytest.approx(0.15**2, rel=0.03)
    assert np.mean(est["sigma2_w"]) == pytest.approx(0.03**2, rel=0.2)
    assert np.mean(est["sigma2_v"]) == pytest.approx(0.04**2, rel=0.2)


def test_best_design_follows_the_classic_allocation_without_arm_by_problem_noise():
    c = {"sigma2_w": 0.02**2, "sigma2_e": 0.3**2, "sigma2_v": 0.0, "problems": 200, "seeds": 2.0}
    b = variance.budget(c, hours_train=0.01, hours_eval=0.001, delta=0.01)
    classic = np.sqrt(c["sigma2_e"] * 0.01 / (c["sigma2_w"] * 0.001 / 200))
    assert classic / 2 <= b["best_problems"] <= classic * 2
    assert b["hours_best"] <= b["hours_now"]
    cheaper = variance.budget(c, hours_train=0.01, hours_eval=0.0001, delta=0.01)
    assert cheaper["best_problems"] > b["best_problems"]  # cheaper eval: evaluate on more problems


def test_shares_split_an_arm_variance_into_seeds_and_eval():
    c = {"sigma2_w": 0.0, "sigma2_e": 0.1, "sigma2_v": 0.001, "problems": 100, "seeds": 4.0}
    assert variance.budget(c, 0.01, 0.001, 0.02)["share_eval"] == pytest.approx(1.0)
    c = {**c, "sigma2_w": 0.01}
    b = variance.budget(c, 0.01, 0.001, 0.02)
    assert b["share_seed"] == pytest.approx((0.01 / 4) / (0.01 / 4 + 0.1 / 400 + 0.001 / 100))
    assert b["share_seed"] + b["share_eval"] == pytest.approx(1.0)


def test_budget_frame_reads_run_folders(tmp_path):
    import json

    rng = np.random.default_rng(1)
    runs = []
    for key, (seeds, Y) in cell(rng, n=3, P=30, arms=3).items():
        for s, row in zip(seeds, Y):
            folder = tmp_path / f"{key}-{s}"
            (folder / "eval").mkdir(parents=True)
            rows = [{"task": "math", "uid": f"p{i}", "samples": 4, "passes": int(np.clip(round(4 * y), 0, 4)),
                     "reward_mean": 0.0} for i, y in enumerate(row)]
            (folder / "eval" / "problems-000010.json").write_text(json.dumps({"step": 9, "rows": rows}))
            (folder / "summary.json").write_text(json.dumps(
                {"device_hours": 0.02, "device_hours_by_phase": {"train": 0.018, "eval": 0.002}}))
            runs.append(({"model": "tiny", "task": "math", "tricks": "" if key == "baseline" else key, "seed": s}, folder))
    frame = variance.budget_frame(runs, delta=0.05)
    assert frame.height == 1 and frame["problems"][0] == 30 and frame["seeds"][0] == 3
    assert 0 <= frame["share_seed"][0] <= 1 and frame["hours_best"][0] <= frame["hours_now"][0]
