"""Reward functions with TRL's signature: checked when the config loads and at every call."""

import math

import pytest
import torch

from grpo_lab.rewards import plugins
from grpo_lab.rollout.base import Rollout
from grpo_lab.spec.config import resolve
from grpo_lab.tasks import make_task
from grpo_lab.trainer.scoring import component_means, score_rollout
from grpo_lab.util.yamlio import ConfigError

FILE = "tests/plugins/rewards_file.py"


@pytest.mark.parametrize("function, message", [
    ("no_such_module:f", "no module named 'no_such_module'"),
    ("tests/plugins/missing.py:f", "no file 'tests/plugins/missing.py'"),
    (f"{FILE}:brevit", "has no 'brevit' (did you mean 'brevity'?)"),
    (f"{FILE}:no_columns", "takes no **columns"),
    (f"{FILE}:one_argument", "fewer than two positional arguments"),
    ("math", "expected 'module:name' or 'file.py:name'"),
])
def test_bad_functions_are_one_line_errors_naming_the_key(function, message):
    with pytest.raises(ConfigError) as info:
        resolve({"reward": {"functions": [{"function": f"{FILE}:brevity"}, {"function": function}]}})
    text = str(info.value)
    assert "field 'reward.functions.1.function'" in text and message in text and "\n" not in text
    with pytest.raises(ConfigError, match="field 'reward.function'"):
        resolve({"reward": {"function": function}})


def test_names_must_be_unique_and_not_builtin_metrics():
    with pytest.raises(ConfigError, match="two reward functions are named brevity"):
        resolve({"reward": {"functions": [{"function": f"{FILE}:brevity"}, {"function": f"{FILE}:brevity"}]}})
    with pytest.raises(ConfigError, match="'mean' is a built-in metric"):
        resolve({"reward": {"functions": [{"function": f"{FILE}:brevity", "name": "mean"}]}})


def _scored(cfg, completions, task=None):
    task = task or make_task("math", "compact")
    problems = task.problems("train", len(completions) // 2, seed=0)
    rollout = Rollout(prompt_ids=[[0]] * len(completions), completion_ids=[[0]] * len(completions),
                      logprobs=[[0.0]] * len(completions), stop=["eos"] * len(completions),
                      group=[i // 2 for i in range(len(completions))])

    class Codec:
        def decode(self, ids):
            return ""

    rollout.texts = lambda codec: list(completions)  # the decoded texts these tests score
    return problems, score_rollout({"math": task}, problems, rollout, Codec(), cfg, 0.0)


def test_weighted_functions_sum_into_main_and_shape_and_are_logged_apart():
    cfg = resolve({"reward": {"functions": [
        {"function": "task"}, {"function": f"{FILE}:brevity", "weight": 0.5},
        {"function": f"{FILE}:only_math", "role": "shape", "weight": 0.1}], "shape_mode": "after_norm"}})
    problems, scored = _scored(cfg, ["7", "seventy", "12", "1"])
    task_reward = [float(c == p.target) for p, c in zip([problems[0]] * 2 + [problems[1]] * 2, ["7", "seventy", "12", "1"])]
    expected = [t + 0.5 * float(len(c) <= 2) for t, c in zip(task_reward, ["7", "seventy", "12", "1"])]
    assert scored.main.flatten().tolist() == pytest.approx(expected)
    assert scored.shape.flatten().tolist() == pytest.approx([0.1, 0.0, 0.1, 0.1])
    means = component_means(scored.components)
    assert means["reward/brevity"] == pytest.approx(0.75) and means["reward/only_math"] == pytest.approx(0.75)
    assert set(means) == {"reward/task", "reward/brevity", "reward/only_math"}


def test_normalize_then_sum_z_scores_each_main_function_in_its_group_before_the_weighted_sum():
    cfg = resolve({"reward": {"combine": "normalize_then_sum", "functions": [
        {"function": "task"}, {"function": f"{FILE}:brevity", "weight": 0.5}]}})
    targets = [p.target for p in make_task("math", "compact").problems("train", 2, seed=0)]
    completions = [str(targets[0]), "seventy", "12", "1"]  # brevity 1, 0 in the first group, 1, 1 in the second
    problems, scored = _scored(cfg, completions)
    task = [float(c == p.target) for p, c in zip([problems[0]] * 2 + [problems[1]] * 2, completions)]
    brief = [float(len(c) <= 2) for c in completions]

    def pair_z(a, b):  # a group of two: +-1/sqrt(2), or 0 when both are equal
        return [0.0, 0.0] if a == b else [math.copysign(2 ** -0.5, a - b), math.copysign(2 ** -0.5, b - a)]

    expected = [t + 0.5 * b for i in (0, 2) for t, b in zip(pair_z(*task[i:i + 2]), pair_z(*brief[i:i + 2]))]
    assert task[0] == 1.0 and scored.main.flatten().tolist() == pytest.approx(expected, abs=1e-5)
    assert scored.raw.flatten().tolist() == pytest.approx([t + 0.5 * b for t, b in zip(task, brief)])  # logged: the sum


@pytest.mark.parametrize("name, message", [
    ("one_short", "returned 3 values for 4 completions"),
    ("not_a_number", "returned 'high' at position 0; expected a float or None"),
])
def test_broken_return_values_name_the_key(name, message):
    cfg = resolve({"reward": {"functions": [{"function": f"{FILE}:{name}"}]}})
    with pytest.raises(plugins.RewardFunctionError) as info:
        _scored(cfg, ["1", "2", "3", "4"])
    assert str(info.value) == f"reward.functions[0] ({FILE}:{name}) {message}"


def test_nan_reaches_the_metric_but_not_the_loss():
    cfg = resolve({"reward": {"function": f"{FILE}:nan_reward"}})
    _, scored = _scored(cfg, ["1", "2", "3", "4"])
    assert torch.isfinite(scored.main).all() and math.isnan(component_means(scored.components)["reward/nan_reward"])


def test_run_ids_follow_the_plugin_source(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("def r(prompts, completions, **kw):\n    return [1.0] * len(completions)\n")
    cfg = resolve({"reward": {"function": "mine.py:r"}})
    before = cfg.run_id()
    assert cfg.identity()["plugins"]["reward:mine.py:r"]["sha256"]
    (tmp_path / "mine.py").write_text("def r(prompts, completions, **kw):\n    return [0.0] * len(completions)\n")
    assert cfg.run_id() != before  # an edited reward is a new run


def test_a_task_reward_outside_the_unit_interval_names_the_task():
    from grpo_lab.tasks.base import Score
    from grpo_lab.tasks.math import MathTask

    class Broken(MathTask):
        def score(self, problems, completions):
            return [Score(math.nan, True, None)] * len(completions)

    with pytest.raises(ValueError, match=r"task 'math' scored nan on 'math/compact/train/.*must be in \[0, 1\]"):
        _scored(resolve({}), ["1", "2", "3", "4"], Broken())


def test_a_data_rows_fields_reach_reward_functions_as_columns(tmp_path):
    from grpo_lab.spec.sources import DataConfig

    path = tmp_path / "rows.jsonl"
    path.write_text('{"q": "One plus one?", "a": "2", "gold_text": "two", "s": "train"}\n'
                    '{"q": "Two plus two?", "a": "4", "gold_text": "four", "s": "train"}\n')
    task = make_task("math", "compact", data=DataConfig(path=str(path), prompt="q", answer="a", split="s"))
    cfg = resolve({"reward": {"function": f"{FILE}:by_gold"}})
    assert {p.columns["gold_text"] for p in task.problems("train", 2, seed=0)} == {"two", "four"}
    _, scored = _scored(cfg, ["two", "four", "two", "four"], task)  # one match in each group
    assert component_means(scored.components)["reward/by_gold"] == 0.5
    with pytest.raises(plugins.RewardFunctionError, match=r"reward.function \(.*by_gold\) needs column 'gold_text'"):
        _scored(cfg, ["1", "2", "3", "4"])  # generated problems have no such column
