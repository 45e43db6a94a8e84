"""The configs a user copies load, and their tasks build (no model is loaded)."""

import pytest

from grpo_lab.spec.config import load_config
from grpo_lab.tasks import make_task
from grpo_lab.tasks import task_options
from tests.conftest import ROOT


@pytest.mark.parametrize("name", ["smollm2-gsm8k-style", "smollm2-rg", "smollm2-humaneval"])
def test_shipped_config_loads_and_its_tasks_build(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # paths in the configs are relative to the project
    cfg = load_config(ROOT / "experiments" / "configs" / f"{name}.yaml")
    for task_name in cfg.tasks:
        task = make_task(task_name, "natural", **task_options(cfg, task_name))
        train = task.problems("train", 4, seed=0)
        assert train and all(s.reward == 1.0 for s in task.score(train, [p.solution for p in train]))
