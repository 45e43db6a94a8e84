"""A run that taught nothing says why, from its own metrics."""

from typer.testing import CliRunner

from grpo_lab.analysis.run_diagnosis import diagnose, diagnose_run
from tests.conftest import TINY_FAST


def steps(n=4, **metrics):
    row = {"reward/mean": 0.3, "reward/zero_std_frac": 0.4, "format/ok_frac": 0.9, "samples/total": 16, **metrics}
    return [dict(row) for _ in range(n)]


def test_a_run_that_learnt_needs_no_diagnosis():
    assert diagnose(0.05, steps(), 40) is None
    # a gain beyond NO_GAIN is learning, however thin its signal was
    assert diagnose(0.20, steps(**{"reward/zero_std_frac": 0.9}), 3) is None
    assert diagnose(0.20, steps(**{"reward/zero_std_frac": 0.97, "reward/mean": 0.3}), 3) is None
    assert diagnose(0.0, [], 0) is None  # nothing logged: nothing to say


def test_each_cause_is_named_with_its_numbers():
    fmt = diagnose(0.0, steps(**{"format/ok_frac": 0.0}), 10, compact_only=True)
    assert "answer format" in fmt.cause and "compact prompts" in fmt.advice
    wrong = diagnose(0.0, steps(**{"reward/zero_std_frac": 1.0, "reward/mean": 0.0}), 0)
    assert "100% of groups" in wrong.cause and "never solved" in wrong.cause and "chat template" in wrong.advice
    assert "prompt_shots: 1" in wrong.advice
    right = diagnose(0.06, steps(**{"reward/zero_std_frac": 1.0, "reward/mean": 0.98}), 0)
    assert "already solved" in right.cause and "harder" in right.advice  # no signal: whatever the eval did
    mixed = diagnose(0.0, steps(**{"reward/zero_std_frac": 0.96, "reward/mean": 0.3}), 100)
    assert "by every sample or by none" in mixed.cause and "already" not in mixed.cause
    thin = diagnose(0.0, steps(), 3)  # 3 of 64 samples moved the policy
    assert "3 of 64 samples (5%)" in thin.cause and "group_size" in thin.advice
    short = diagnose(0.01, steps(), 40)
    assert "60% of groups" in short.cause and "+0.010 in 4 steps" in short.cause and "longer" in short.advice


def test_grpo_lab_run_says_why_a_run_on_a_reward_that_never_pays_taught_nothing(tmp_path):
    from grpo_lab.cli import app

    out = tmp_path / "run"
    args = ["run", "--out", str(out), "--set", f"model={TINY_FAST}", "--set", "steps=2",
            "--set", "reward.function=tests/plugins/rewards_file.py:zero",
            "--set", "sampling.prompts_per_step=4", "--set", "sampling.group_size=4",
            "--set", "eval.every=2", "--set", "eval.problems=8", "--set", "eval.samples=2"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    why = diagnose_run(out)
    assert why is not None and "100% of groups" in why.cause and "never solved" in why.cause
    assert "compact prompts" in why.advice  # the tiny model's card
    assert "taught nothing: 100% of groups" in " ".join(res.output.split())
    assert " s/step" in res.output  # the progress line states the time a step takes
