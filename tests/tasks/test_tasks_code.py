"""Code task: generators, splits, sandbox-backed partial-credit scoring, MBPP loader."""

import json

import pytest

from grpo_lab.tasks import code as code_module
from grpo_lab.tasks._code_families import FAMILIES
from grpo_lab.tasks.base import Problem, Task
from grpo_lab.tasks.code import CodeTask, expression_draft

REGISTERS = ("compact", "natural")
LEVELS = (0, 1, 2)


def compact_problem(expression: str) -> Problem:
    return CodeTask("compact")._problem("train", expression_draft(expression, level=1))


def test_is_a_task():
    assert isinstance(CodeTask(), Task) and CodeTask().name == "code"


@pytest.mark.parametrize("register", REGISTERS)
def test_problems_are_deterministic_and_seed_dependent(register):
    task = CodeTask(register)
    a = task.problems("train", 15, seed=5)
    assert a == CodeTask(register).problems("train", 15, seed=5)
    assert a != task.problems("train", 15, seed=6)


@pytest.mark.parametrize("register", REGISTERS)
@pytest.mark.parametrize("level", LEVELS)
def test_train_and_test_are_disjoint(register, level):
    task = CodeTask(register)
    train = task.problems("train", 200, seed=0, difficulty=level)
    test = task.problems("test", 200, seed=0, difficulty=level)
    assert test
    assert not {p.uid for p in train} & {p.uid for p in test}
    assert not {p.prompt for p in train} & {p.prompt for p in test}
    assert not {p.solution for p in train} & {p.solution for p in test}


@pytest.mark.parametrize("register", REGISTERS)
@pytest.mark.parametrize("level", LEVELS)
def test_solutions_pass_every_test(register, level):
    task = CodeTask(register)
    problems = task.problems("train", 30, seed=2, difficulty=level) + task.problems("test", 8, seed=2, difficulty=level)
    for problem, score in zip(problems, task.score(problems, [p.solution for p in problems])):
        assert (score.reward, score.format_ok) == (1.0, True), problem
        assert score.components["correct"] == 1.0


def test_compact_shape_and_hidden_tests():
    for p in CodeTask("compact").problems("train", 200, seed=0):
        assert len(p.prompt) <= 40 and len(p.solution) <= 12 and p.prompt.isascii()
        assert p.prompt.startswith("f(0)=") and p.prompt.endswith(";f(x)=")
        assert len(p.target) == 5 and "f(4)==" in p.target[-1]  # f(3), f(4) are never shown
        assert "f(3)" not in p.prompt


def test_every_natural_family_can_be_drawn_and_has_tests():
    task = CodeTask("natural")
    drawn = {p.uid.split("/")[-1].split(":")[0] for s in ("train", "test") for p in task.problems(s, 300, seed=0)}
    assert drawn == {f.fid for f in FAMILIES}


def test_compact_partial_credit():
    p = compact_problem("3*x+1")  # f(0..4) = 1, 4, 7, 10, 13
    completions = ["3*x+1", "3*x + 1  # same", "x+1", "3*x", "x*x+2*x+1", "3*x+", "", "1/0"]
    scores = CodeTask("compact").score([p] * len(completions), completions)
    assert [s.reward for s in scores] == [1.0, 1.0, 0.2, 0.0, 0.4, 0.0, 0.0, 0.0]
    assert [s.format_ok for s in scores] == [True, True, True, True, True, False, False, True]
    assert scores[0].answer == scores[1].answer  # formatting does not split answers


def test_line_through_two_points_gets_partial_credit_on_quadratics():
    p = compact_problem("x*x+3")  # 3, 4, 7, 12, 19
    assert CodeTask("compact").score([p], ["x+3"])[0].reward == pytest.approx(0.4)


def test_compact_code_cannot_escape_the_lambda():
    p = compact_problem("3*x+1")
    sneaky = "1)\nf = lambda x: 3*x+1\n("
    assert CodeTask("compact").score([p], [sneaky])[0].reward == 0.0


def test_natural_fences_prose_and_names(monkeypatch):
    monkeypatch.setattr(code_module, "NATURAL_TIMEOUT_S", 0.5)
    task = CodeTask("natural")
    p = next(p for p in task.problems("train", 300, seed=0) if p.uid.endswith("/add:5"))
    good = "def add_5(x):\n    return x + 5\n"
    completions = [
        f"Sure!\n```python\n{good}```\nThis adds five.",
        good,  # no fence: the whole text still runs, but the format is off
        "```python\ndef plus(x):\n    return x + 5\n```",  # wrong name
        "```python\ndef add_5(x):\n    return x + 4\n```",
        "```python\ndef add_5(x):\n    while True: pass\n```",
        f"I think it is\n{good}",  # prose without a fence: does not parse
    ]
    scores = task.score([p] * len(completions), completions)
    assert [s.reward for s in scores] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert [s.format_ok for s in scores] == [True, False, False, True, True, False]


def test_unparsable_expressions_never_reach_the_sandbox():
    task = CodeTask("compact")
    problems = task.problems("train", 16, seed=0)
    sandbox = task._sandbox()
    before = sandbox.programs_run
    task.score(problems, [p.solution for p in problems[:8]] + ["(("] * 8)
    assert sandbox.programs_run - before == len({p.solution for p in problems[:8]})
    task.score(problems[:2], ["((", "))"])
    assert sandbox.programs_run - before == len({p.solution for p in problems[:8]})


def test_mbpp_loader(tmp_path):
    records = [
        {"task_id": i, "text": f"Write a function to add {i} to a number.",
         "code": f"def add(x):\n    return x + {i}", "test_list": [f"assert add(1) == {1 + i}", f"assert add(0) == {i}"],
         "test_setup_code": "import math" if i == 0 else ""}
        for i in range(30)
    ]
    path = tmp_path / "mbpp.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    task = CodeTask("natural", data_path=str(path))
    train, test = task.problems("train", 30, seed=0), task.problems("test", 30, seed=0)
    assert test and not {p.prompt for p in train} & {p.prompt for p in test}
    assert len({p.uid for p in train}) + len({p.uid for p in test}) == 30
    everything = train + test
    p = everything[0]
    assert "```python" in p.prompt and p.target[-1].split("\n")[-1] not in p.prompt  # only the first test is shown
    assert p.prompt.startswith("Write a function to add") and p.target[0].split("\n")[-1] in p.prompt
    scores = task.score(everything, [p.solution for p in everything])
    assert all(s.reward == 1.0 and s.format_ok for s in scores)
    with_setup = [p for p in everything if p.target[0].startswith("import math\n")]
    assert len(with_setup) >= 1 and "import math" not in with_setup[0].prompt


def test_mbpp_loader_without_code_and_bad_records(tmp_path):
    path = tmp_path / "nocode.jsonl"
    path.write_text(json.dumps({"text": "t", "test_list": ["assert f() == 1"], "split": "train"}) + "\n")
    (p,) = CodeTask("natural", data_path=str(path)).problems("train", 1, seed=0)
    assert p.solution == "" and p.target == ["assert f() == 1"]
    bad = tmp_path / "notests.jsonl"
    bad.write_text(json.dumps({"text": "t", "test_list": []}) + "\n")
    with pytest.raises(ValueError, match="without tests"):
        CodeTask("natural", data_path=str(bad))


def test_a_data_file_test_the_grader_cannot_judge_fails_at_load(tmp_path):
    path = tmp_path / "loose.jsonl"
    record = {"text": "t", "test_list": ["assert all(f(x) == x for x in range(3))"], "split": "train"}
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(ValueError, match=r"all\(f\(x\) == x"):
        CodeTask("natural", data_path=str(path))


def test_a_data_file_whose_expected_value_comes_from_setup_fails_at_load(tmp_path):
    # the candidate runs before the test's setup values are read, so it could rebind EXPECTED
    path = tmp_path / "setup.jsonl"
    record = {"text": "factorial", "test_list": ["assert fact(5) == EXPECTED"], "test_setup_code": "EXPECTED = 120",
              "split": "train"}
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(ValueError, match=r"record 'factorial'.*expected side 'EXPECTED'"):
        CodeTask("natural", data_path=str(path))
