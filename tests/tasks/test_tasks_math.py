"""Math task: generators, splits, scoring and the GSM8K-format loader."""

import json

import pytest

from grpo_lab.tasks import make_task
from grpo_lab.tasks.base import Task
from grpo_lab.tasks.math import MathTask

REGISTERS = ("compact", "natural")
LEVELS = (0, 1, 2)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def gsm8k_records(n):
    return [{"question": f"Q{i}: Sam has {i} apples and gets 2 more. How many?",
             "answer": f"{i} + 2 = <<{i}+2={i + 2}>>{i + 2} apples\n#### {i + 2:,}"} for i in range(n)]


def test_is_a_task():
    task = MathTask()
    assert isinstance(task, Task)
    assert (task.name, task.register, task.levels) == ("math", "compact", 3)


@pytest.mark.parametrize("register", REGISTERS)
def test_problems_are_deterministic_and_seed_dependent(register):
    task = MathTask(register)
    a = task.problems("train", 20, seed=3)
    assert a == MathTask(register).problems("train", 20, seed=3)
    assert a != task.problems("train", 20, seed=4)
    assert task.problems("train", 20, seed=3, difficulty=1) != a


@pytest.mark.parametrize("register", REGISTERS)
@pytest.mark.parametrize("level", LEVELS)
def test_train_and_test_are_disjoint(register, level):
    task = MathTask(register)
    train = task.problems("train", 300, seed=0, difficulty=level)
    test = task.problems("test", 300, seed=0, difficulty=level)
    assert test, "every level needs test problems"
    assert not {p.uid for p in train} & {p.uid for p in test}
    assert not {p.prompt for p in train} & {p.prompt for p in test}
    assert all("/train/" in p.uid for p in train) and all("/test/" in p.uid for p in test)
    assert {p.difficulty for p in train} == {level}


@pytest.mark.parametrize("register", REGISTERS)
def test_uid_is_derived_from_content(register):
    task = MathTask(register)
    by_uid = {}
    for seed in range(3):
        for p in task.problems("train", 100, seed=seed):
            assert by_uid.setdefault(p.uid, p) == p  # one uid never names two problems
    assert len({p.prompt for p in by_uid.values()}) == len(by_uid)


def test_small_level_is_distinct_until_exhausted_then_repeats_within_split():
    task = MathTask("compact")
    problems = task.problems("test", 200, seed=0, difficulty=0)  # only ~20 exist
    distinct = {p.uid for p in problems}
    assert 10 <= len(distinct) <= 40
    assert len({p.uid for p in problems[: len(distinct)]}) == len(distinct)
    train_uids = {p.uid.replace("/train/", "/") for p in task.problems("train", 200, seed=0, difficulty=0)}
    assert not {u.replace("/test/", "/") for u in distinct} & train_uids


@pytest.mark.parametrize("register", REGISTERS)
@pytest.mark.parametrize("level", LEVELS)
def test_solutions_score_full_reward(register, level):
    task = MathTask(register)
    problems = task.problems("train", 40, seed=1, difficulty=level) + task.problems("test", 10, seed=1, difficulty=level)
    for problem, score in zip(problems, task.score(problems, [p.solution for p in problems])):
        assert (score.reward, score.format_ok) == (1.0, True), problem
        assert score.answer == problem.target


def test_compact_sizes_fit_a_tiny_char_model():
    task = MathTask("compact")
    for p in task.problems("train", 300, seed=0):
        assert len(p.prompt) <= 40 and len(p.solution) <= 12 and p.prompt.isascii()
        assert p.prompt.endswith("=")
        assert all(len(tok) == 1 for tok in p.prompt[:-1].replace("*", "+").replace("-", "+").split("+"))


def test_compact_levels_shape():
    task = MathTask("compact")
    ops = lambda p: sum(p.prompt.count(c) for c in "+-*")
    assert {ops(p) for p in task.problems("train", 50, seed=0, difficulty=0)} == {1}
    assert {ops(p) for p in task.problems("train", 50, seed=0, difficulty=1)} == {2}
    assert {ops(p) for p in task.problems("train", 50, seed=0, difficulty=2)} <= {2, 3}
    assert any("*" in p.prompt for p in task.problems("train", 50, seed=0, difficulty=2))


def test_compact_scoring_and_format():
    task = MathTask("compact")
    p = task.problems("train", 1, seed=0, difficulty=1)[0]
    t = p.target
    completions = [t, f" {t}\n", str(int(t) + 1), f"{t} apples", "", "x", f"{t}.0"]
    scores = task.score([p] * len(completions), completions)
    assert [s.reward for s in scores] == [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]
    assert [s.format_ok for s in scores] == [True, True, True, False, False, False, False]
    assert [s.answer for s in scores] == [t, t, str(int(t) + 1), t, None, "x", t]  # "x" is a polynomial
    assert scores[0].components == {"correct": 1.0, "format": 1.0}
    assert scores[2].components == {"correct": 0.0, "format": 1.0}


def test_natural_scoring_and_format():
    task = MathTask("natural")
    p = task.problems("train", 1, seed=0, difficulty=0)[0]
    right, wrong = p.target, str(int(p.target) + 1)
    completions = [f"<answer>{right}</answer>", f"\\boxed{{{right}}}", f"The answer is {right}.",
                   f"<answer>{wrong}</answer>", f"<answer>{right}.0</answer>", "no idea"]
    scores = task.score([p] * len(completions), completions)
    assert [s.reward for s in scores] == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0]  # an unmarked answer earns nothing
    assert [s.format_ok for s in scores] == [True, True, False, True, True, False]


def test_score_requires_matching_lengths():
    task = MathTask()
    with pytest.raises(ValueError):
        task.score(task.problems("train", 2, seed=0), ["1"])


def test_mixed_and_default_difficulty():
    assert {p.difficulty for p in MathTask().problems("train", 60, seed=0)} == {0, 1, 2}
    assert {p.difficulty for p in MathTask(difficulty=2).problems("train", 20, seed=0)} == {2}
    assert {p.difficulty for p in MathTask(levels=1).problems("train", 20, seed=0)} == {0}


@pytest.mark.parametrize(
    "kwargs", [{"register": "chat"}, {"levels": 0}, {"levels": 4}, {"difficulty": 3}, {"levels": 2, "difficulty": 2}]
)
def test_bad_arguments_fail(kwargs):
    with pytest.raises(ValueError):
        MathTask(**kwargs)


def test_bad_split_and_difficulty_fail():
    with pytest.raises(ValueError, match="split"):
        MathTask().problems("dev", 1, seed=0)
    with pytest.raises(ValueError, match="difficulty"):
        MathTask().problems("train", 1, seed=0, difficulty=5)


def test_gsm8k_loader_splits_by_hash(tmp_path):
    path = write_jsonl(tmp_path / "gsm.jsonl", gsm8k_records(60))
    task = make_task("math", "natural", data_path=path)
    train = task.problems("train", 100, seed=0)
    test = task.problems("test", 20, seed=0)
    assert not {p.prompt for p in train} & {p.prompt for p in test}
    assert len({p.uid for p in train}) + len({p.uid for p in test}) == 60
    p = test[0]
    assert "<answer></answer>" in p.prompt and p.prompt.startswith("Q")
    assert p.target == str(int(p.prompt[1 : p.prompt.index(":")]) + 2)
    assert "<<" not in p.solution and p.solution.endswith(f"<answer>{p.target}</answer>")
    assert task.score([p], [p.solution])[0].reward == 1.0
    assert task.problems("test", 20, seed=0) == test
    assert len({p.uid for p in task.problems("train", 5, seed=0)}) == 5  # no repeats while possible


def test_gsm8k_loader_split_placeholder_and_fields(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", gsm8k_records(5))
    write_jsonl(tmp_path / "test.jsonl", [{"question": "1+1=", "answer": "2", "difficulty": 1}])
    task = MathTask("compact", data_path=str(tmp_path / "{split}.jsonl"))
    assert task.levels == 2
    assert [(p.prompt, p.solution, p.difficulty) for p in task.problems("test", 2, seed=0)] == [("1+1=", "2", 1)] * 2
    assert len({p.uid for p in task.problems("train", 5, seed=0)}) == 5
    with pytest.raises(ValueError, match="difficulty"):
        task.problems("test", 1, seed=0, difficulty=0)

    records = [dict(r, split="test") for r in gsm8k_records(4)]
    by_field = MathTask("compact", data_path=write_jsonl(tmp_path / "marked.jsonl", records))
    assert len(by_field.problems("test", 4, seed=0)) == 4
    assert by_field.problems("train", 0, seed=0) == []


def test_loader_reports_bad_files(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "#### 1"}\n{not json\n')
    with pytest.raises(ValueError, match=":2:"):
        MathTask(data_path=str(bad))
    no_number = write_jsonl(tmp_path / "nonum.jsonl", [{"question": "q", "answer": "#### many"}])
    with pytest.raises(ValueError, match="numeric"):
        MathTask(data_path=no_number)
