"""Logic task: puzzle correctness checked independently, splits, scoring, loader."""

import json
import re

import pytest

from grpo_lab.tasks.base import Task
from grpo_lab.tasks.logic import LogicTask, normalize_answer

REGISTERS = ("compact", "natural")
LEVELS = (0, 1, 2)


def test_is_a_task():
    assert isinstance(LogicTask(), Task) and LogicTask().name == "logic"


@pytest.mark.parametrize("register", REGISTERS)
def test_problems_are_deterministic_and_seed_dependent(register):
    task = LogicTask(register)
    a = task.problems("test", 20, seed=9)
    assert a == LogicTask(register).problems("test", 20, seed=9)
    assert a != task.problems("test", 20, seed=10)


@pytest.mark.parametrize("register", REGISTERS)
@pytest.mark.parametrize("level", LEVELS)
def test_train_and_test_are_disjoint(register, level):
    task = LogicTask(register)
    train = task.problems("train", 300, seed=0, difficulty=level)
    test = task.problems("test", 300, seed=0, difficulty=level)
    assert test
    assert not {p.uid for p in train} & {p.uid for p in test}
    assert not {p.prompt for p in train} & {p.prompt for p in test}


@pytest.mark.parametrize("register", REGISTERS)
@pytest.mark.parametrize("level", LEVELS)
def test_solutions_score_full_reward(register, level):
    task = LogicTask(register)
    problems = task.problems("train", 50, seed=4, difficulty=level) + task.problems("test", 10, seed=4, difficulty=level)
    for problem, score in zip(problems, task.score(problems, [p.solution for p in problems])):
        assert (score.reward, score.format_ok) == (1.0, True), problem


def brute_force_extreme(facts: list[str], want_max: bool) -> str:
    """The unique item that no fact places above (max) or below (min) another."""
    below, above = set(), set()
    for fact in facts:
        a, op, b = fact[0], fact[1], fact[2]
        small, big = (a, b) if op == "<" else (b, a)
        below.add(small)
        above.add(big)
    candidates = (above | below) - (below if want_max else above)
    assert len(candidates) == 1
    return candidates.pop()


@pytest.mark.parametrize("level", LEVELS)
def test_compact_answers_are_right(level):
    problems = LogicTask("compact").problems("train", 200, seed=0, difficulty=level)
    orderings = [p for p in problems if ";" in p.prompt]
    booleans = [p for p in problems if ";" not in p.prompt]
    assert orderings and booleans
    for p in orderings:
        *facts, query = p.prompt[:-1].split(";")
        assert len(facts) == level + 1
        assert p.target == brute_force_extreme(facts, query == "max")
    for p in booleans:
        python = p.prompt[:-1].replace("!", " not ").replace("&", " and ").replace("|", " or ")
        python = python.replace("T", "True").replace("F", "False")
        assert p.target == ("T" if eval(python) else "F")
        assert len(re.findall("[TF]", p.prompt)) == level + 2


def test_natural_boolean_answers_match_python():
    for p in LogicTask("natural").problems("train", 300, seed=0):
        if p.prompt.startswith("Evaluate"):
            expression = p.prompt.split(": ", 1)[1].split(". Is it", 1)[0]
            assert p.target == str(eval(expression))


def test_compact_sizes():
    for p in LogicTask("compact").problems("train", 300, seed=0):
        assert len(p.prompt) <= 40 and len(p.solution) == 1 and p.prompt.isascii()


def test_compact_scoring_is_exact():
    task = LogicTask("compact")
    problems = task.problems("train", 100, seed=0, difficulty=1)
    letter = next(p for p in problems if ";" in p.prompt)
    flag = next(p for p in problems if ";" not in p.prompt)
    other = "F" if flag.target == "T" else "T"
    cases = [(letter, letter.target), (letter, f" {letter.target}\n"), (letter, letter.target.upper()),
             (letter, letter.target + letter.target), (flag, flag.target), (flag, other), (flag, "True"), (flag, "")]
    scores = task.score([p for p, _ in cases], [c for _, c in cases])
    assert [s.reward for s in scores] == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    assert [s.format_ok for s in scores] == [True, True, False, False, True, True, False, False]


def test_natural_scoring_normalises_and_needs_a_mark():
    task = LogicTask("natural")
    problems = task.problems("train", 100, seed=0, difficulty=0)
    person = next(p for p in problems if p.target not in ("True", "False"))
    flag = next(p for p in problems if p.target in ("True", "False"))
    cases = [
        (person, f"<answer>{person.target.lower()}.</answer>", 1.0, True),
        (person, f"I think the answer is {person.target}", 0.0, False),  # no tag, no box: no answer
        (person, "<answer>Nobody</answer>", 0.0, True),
        (flag, f"<answer>{flag.target.upper()}</answer>", 1.0, True),
        (flag, f"\\boxed{{{flag.target[0]}}}", 1.0, True),
        (flag, "<answer>maybe</answer>", 0.0, True),
        (flag, "", 0.0, False),
    ]
    scores = task.score([c[0] for c in cases], [c[1] for c in cases])
    assert [(s.reward, s.format_ok) for s in scores] == [(c[2], c[3]) for c in cases]
    assert scores[0].answer == person.target.lower()


def test_normalize_answer():
    assert normalize_answer(" Yes. ") == "true" and normalize_answer("F") == "false"
    assert normalize_answer("'Bob'") == "bob" and normalize_answer("  ") is None and normalize_answer(None) is None


def test_loader(tmp_path):
    path = tmp_path / "logic.jsonl"
    records = [{"question": f"Is {i} even?", "answer": "yes" if i % 2 == 0 else "no"} for i in range(40)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    task = LogicTask("natural", data_path=str(path))
    train, test = task.problems("train", 40, seed=0), task.problems("test", 40, seed=0)
    assert test and not {p.prompt for p in train} & {p.prompt for p in test}
    p = train[0]
    assert task.score([p, p], [f"<answer>{'true' if p.target == 'yes' else 'false'}</answer>", "<answer>?</answer>"])[0].reward == 1.0
    assert [s.reward for s in task.score([p, p], [p.solution, "<answer>?</answer>"])] == [1.0, 0.0]
