"""prompt_shots' demonstrations: solved training problems of each task, shown before its own prompts,
never a test problem."""

import pytest

from grpo_lab.spec.config import RunConfig
from grpo_lab.tasks import make_task, task_options
from grpo_lab.trainer.setup import demonstrations, eval_problems


def natural_tasks(cfg: RunConfig) -> dict:
    return {n: make_task(n, register="natural", **task_options(cfg, n)) for n in cfg.tasks}


def test_each_task_shows_its_own_training_problems_whatever_the_seed():
    cfg = RunConfig(model="smollm2-135m", task=["math", "logic"], difficulty=0, prompt_shots=2,
                    eval={"problems": 400, "samples": 1, "k": [1]})
    tasks = natural_tasks(cfg)
    shots = demonstrations(cfg, tasks)
    assert sorted(shots) == ["logic", "math"] and all(len(set(pairs)) == 2 for pairs in shots.values())
    assert all("number inside" in prompt for prompt, _ in shots["math"])  # math's instruction asks for a number
    assert not any("number inside" in prompt for prompt, _ in shots["logic"])
    assert all("<answer>" in solution for pairs in shots.values() for _, solution in pairs)  # the marks graded
    tests = {p.prompt for probs in eval_problems(cfg, tasks).values() for p in probs}
    assert len(tests) > 20 and not tests & {prompt for pairs in shots.values() for prompt, _ in pairs}
    assert demonstrations(cfg.model_copy(update={"seed": 7}), tasks) == shots


def test_a_task_without_solutions_to_show_is_refused(monkeypatch):
    cfg = RunConfig(model="smollm2-135m", difficulty=0, prompt_shots=1)
    tasks = natural_tasks(cfg)
    unsolved = [p.__class__(**{**p.__dict__, "solution": " "}) for p in tasks["math"].problems("train", 8, seed=0)]
    monkeypatch.setattr(tasks["math"], "problems", lambda *a, **k: unsolved)
    with pytest.raises(ValueError, match="prompt_shots: task math has 0 training problems with a solution"):
        demonstrations(cfg, tasks)
