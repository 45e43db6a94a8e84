"""One contract, every task: built-ins in both registers, the rg: family, HumanEval, a plugin class
named by its import path, and whatever is installed in the grpo_lab.tasks entry point group."""

import math
import os

import pytest

from grpo_lab.tasks import make_task
from grpo_lab.tasks.base import Problem, Score
from grpo_lab.tasks.registry import installed_entry_points
from tests.conftest import ROOT

GEO = "examples/plugin/grpo_geo/tasks.py:GeoTask"  # relative to the project root
TASKS = [(name, register) for name in ("math", "code", "logic") for register in ("compact", "natural")] + [
    ("humaneval", "natural"), ("rg:leg_counting", "natural"), ("rg:basic_arithmetic", "compact"),
    ("rg:knights_knaves", "natural"), (GEO, "compact"), (GEO, "natural"),
] + [(name, "compact") for name in sorted(installed_entry_points())]
ODD = ["", "42", "<answer>x</answer>", "```python\ndef f(x):\n    return x\n```", "\\boxed{3}", "True"]
N = 12


def _task(name, register):
    here = os.getcwd()
    os.chdir(ROOT)  # file plugins load relative to the working directory
    try:
        return make_task(name, register, **({"sandbox": "bwrap"} if name in ("code", "humaneval") else {}))
    finally:
        os.chdir(here)


@pytest.fixture(scope="module", params=TASKS, ids=lambda p: f"{p[0].rsplit('/', 1)[-1]}-{p[1]}")
def task(request):
    return _task(*request.param)


def test_splits_are_disjoint(task):
    train, test = task.problems("train", 3 * N, seed=1), task.problems("test", N, seed=1)
    assert {p.uid for p in train}.isdisjoint(p.uid for p in test)
    assert {p.prompt for p in train}.isdisjoint(p.prompt for p in test)


def test_problems_are_a_function_of_the_seed(task):
    a, b = task.problems("train", N, seed=3), task.problems("train", N, seed=3)
    assert [p.uid for p in a] == [p.uid for p in b] and [p.prompt for p in a] == [p.prompt for p in b]
    assert all(isinstance(p, Problem) and p.task == task.name for p in a)
    assert all(0 <= p.difficulty < task.levels for p in a)
    for level in range(task.levels):
        assert {p.difficulty for p in task.problems("train", 4, seed=3, difficulty=level)} == {level}


def _batch(task):
    problems = task.problems("train", N // 2, seed=5)
    completions = [p.solution for p in problems] + ODD
    return (problems + problems[: len(ODD)])[: len(completions)], completions


def test_scores_are_in_unit_interval_with_a_format_flag(task):
    problems, completions = _batch(task)
    scores = task.score(problems, completions)
    assert len(scores) == len(completions)
    for s in scores:
        assert isinstance(s, Score) and isinstance(s.format_ok, bool)
        assert math.isfinite(s.reward) and 0.0 <= s.reward <= 1.0
    solved = [s.reward for s, p, c in zip(scores, problems, completions) if c == p.solution and p.solution]
    assert solved and all(r == 1.0 for r in solved)  # a problem's own solution earns full reward


def test_batched_scoring_equals_one_by_one(task):
    problems, completions = _batch(task)
    together = task.score(problems, completions)
    alone = [task.score([p], [c])[0] for p, c in zip(problems, completions)]
    assert [(s.reward, s.format_ok, s.answer) for s in together] == [(s.reward, s.format_ok, s.answer) for s in alone]
