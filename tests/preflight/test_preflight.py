"""Preflight on the real tiny models: reward-signal flags, diversity collapse, environment pins, CLI."""

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from grpo_lab.cli import app
from grpo_lab.util.environment import environment
from grpo_lab.preflight import preflight
from grpo_lab.preflight.env_checks import environment_checks
from grpo_lab.preflight.reward_signal import Component, component_stats, reward_checks
from grpo_lab.preflight.targets import matrix_configs
from grpo_lab.spec.config import load_config
from grpo_lab.spec.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[2]
TINY_FAST = str(ROOT / "tests" / "data" / "tiny-fast.yaml")


def verdicts(result) -> dict[str, str]:
    return {c.name: c.verdict for c in result.checks}


def outlier_verdict(values: torch.Tensor) -> str:
    checks = reward_checks({"main": Component("main", values)}, {"main": component_stats(values)})
    return {c.name: c.verdict for c in checks}["reward/main: outliers"]


def test_component_stats_quantiles_and_outliers():
    ramp = torch.arange(100, dtype=torch.float32) * 1e-3  # 100 distinct small values
    one_spike = ramp.clone()
    one_spike[-1] = 50.0
    s = component_stats(one_spike.view(25, 4))
    assert s["n"] == 100 and s["q50"] == pytest.approx(0.0495, abs=1e-6) and s["q05"] < s["q95"]
    assert s["extreme_outliers"] == 1 and s["tukey_outliers"] == 1 and s["zero_var_share"] == 0.0
    assert outlier_verdict(one_spike.view(25, 4)) == "yellow"  # 1%: worth a look
    three_spikes = ramp.clone()
    three_spikes[-3:] = 50.0
    assert outlier_verdict(three_spikes.view(25, 4)) == "red"  # 3% beyond |z| > 4
    assert outlier_verdict(ramp.view(25, 4)) == "green"


def test_sparse_binary_reward_is_not_an_outlier():
    rare = torch.zeros(125, 8)
    rare[::25, 0] = 1.0  # 5 successes in 1000: |z| ~ 14, yet the reward's only signal
    checks = {c.name for c in reward_checks({"main": Component("main", rare)}, {"main": component_stats(rare)})}
    assert "reward/main: outliers" not in checks


def test_constant_main_reward_is_red():
    flat = torch.full((16, 8), 0.25)
    checks = {c.name: c for c in reward_checks({"main": Component("main", flat)}, {"main": component_stats(flat)})}
    assert checks["reward/main: variance"].verdict == "red"
    assert checks["reward/main: zero-variance groups"].verdict == "red"  # every group ties


def test_shaping_that_outweighs_the_task_reward_is_red(make_cfg):
    # A length penalty of 1 per token over 1 token, folded into the main reward: its spread
    # (completion lengths vary by several tokens) swamps the 0/1 task reward's.
    cfg = make_cfg(sampling={"group_size": 8}, reward={"length": {"kind": "piecewise", "upper": 1, "coef": 1.0}})
    r = preflight(cfg, samples=64, diversity_prompts=8)
    v = verdicts(r)
    assert v["reward/length_piecewise: vs task std"] == "red" and r.red
    assert v["reward/task: variance"] == "green"
    assert r.stats["reward"]["length_piecewise"]["std"] > r.stats["reward"]["task"]["std"] > 0


def test_low_temperature_collapses_diversity(make_cfg):
    r = preflight(make_cfg(sampling={"group_size": 8, "temperature": 0.1}))
    assert verdicts(r)["diversity: unique-answer ratio"] == "red" and r.red
    d = r.stats["diversity"]
    assert d["groups"] == len(d["groups_detail"]) == 20 and len(d["groups_detail"][0]["completions"]) == 8
    assert d["unique_answer_ratio"] < 0.6 and d["zero_var_share"] >= 0.5


def test_default_tiny_math_config_passes():
    r = preflight(load_config(ROOT / "experiments" / "configs" / "tiny-math.yaml"), samples=128)
    assert not r.red, [c for c in r.checks if c.verdict == "red"]
    assert r.stats["setup"]["samples"] == 128 and r.stats["setup"]["temperature"] == 1.0
    assert r.stats["reward"]["main"]["std"] > 0.3
    json.dumps(r.to_dict())  # the report is plain JSON


def test_environment_mismatch_warns_with_both_versions():
    env = environment()
    checks = {c.name: c for c in environment_checks(env, {"torch": "0.0.1", "python": env["python"]})}
    torch_check = checks["env: torch"]
    assert torch_check.verdict == "yellow"
    assert "0.0.1" in torch_check.value and env["torch"] in torch_check.value
    assert checks["env: python"].verdict == "green"


def test_matrix_runs_once_per_model_and_task_on_its_baseline():
    configs = matrix_configs(load_matrix(ROOT / "matrices" / "quickstart.yaml"))
    assert [(c.model, c.task, c.tricks) for c in configs] == [("tiny", "math", [])]


def test_cli_exits_1_on_red_and_writes_json(tmp_path):
    pin = tmp_path / "pin.json"
    pin.write_text(json.dumps({"torch": "0.0.1"}))
    out = tmp_path / "pf.json"
    res = CliRunner().invoke(app, ["preflight", "--model", TINY_FAST, "--task", "math", "--set", "levels=2",
                                   "--set", "sampling.temperature=0.1", "--samples", "1000", "--pin", str(pin),
                                   "--out", str(out)])
    assert res.exit_code == 1, res.output
    doc = json.loads(out.read_text())
    checks = {c["name"]: c for c in doc["results"][0]["checks"]}
    assert doc["red"] and checks["diversity: unique-answer ratio"]["verdict"] == "red"
    assert checks["env: torch"]["verdict"] == "yellow" and "0.0.1" in checks["env: torch"]["value"]
