"""math-verify for natural-register math: answers the exact value comparison cannot read and it can."""

import pytest

from grpo_lab.rewards.extract import value_of
from grpo_lab.tasks import make_task
from grpo_lab.tasks.base import Problem

pytest.importorskip("math_verify")

# (gold answer, completion): equal in value, unequal as normalised numbers.
EQUAL = [
    ("\\frac{1}{2}", "<answer>\\frac12</answer>"), ("\\sqrt{2}", "<answer>\\sqrt 2</answer>"),
    ("2\\sqrt{2}", "<answer>\\sqrt{8}</answer>"), ("\\{1,2,3\\}", "<answer>\\{3, 2, 1\\}</answer>"),
    ("(1,2]", "<answer>(1, 2]</answer>"), ("\\pi", "<answer>\\pi</answer>"), ("2\\pi", "<answer>2 \\pi</answer>"),
    ("x^2+2x+1", "<answer>(x+1)^2</answer>"), ("1,2", "<answer>2, 1</answer>"),
    ("\\frac{\\sqrt{3}}{2}", "<answer>\\frac{\\sqrt3}{2}</answer>"), ("10\\%", "<answer>10%</answer>"),
    ("\\infty", "<answer>\\infty</answer>"), ("-\\frac{3}{4}", "<answer>-0.75</answer>"),
    ("e^{2}", "<answer>e^2</answer>"), ("2^{10}", "<answer>1024</answer>"),
    ("\\sqrt{12}", "<answer>2\\sqrt{3}</answer>"), ("[0,1)", "<answer>[0, 1)</answer>"),
    ("x+y", "<answer>y+x</answer>"), ("1000", "<answer>10^3</answer>"),
    ("\\frac{5}{2}", "<answer>2\\frac{1}{2}</answer>"), ("\\text{(B)}", "<answer>B</answer>"),
    ("3\\sqrt{2}", "<answer>\\sqrt{18}</answer>"), ("\\log_2 8", "<answer>3</answer>"),
    ("\\sin(\\pi/6)", "<answer>\\frac{1}{2}</answer>"), ("(2,3)", "<answer>(2, 3)</answer>"),
    ("\\frac{\\pi}{2}", "<answer>\\pi/2</answer>"), ("\\frac{1}{\\sqrt{2}}", "<answer>\\frac{\\sqrt{2}}{2}</answer>"),
    ("2x", "<answer>x \\cdot 2</answer>"), ("a^2-b^2", "<answer>(a-b)(a+b)</answer>"),
    ("36", "<answer>6^2</answer>"), ("\\binom{5}{2}", "<answer>10</answer>"), ("4!", "<answer>24</answer>"),
    ("\\{-1, 1\\}", "<answer>\\{1,-1\\}</answer>"), ("5\\text{ cm}", "<answer>5 cm</answer>"),
    ("\\sqrt{3}", "<answer>3^{1/2}</answer>"), ("\\frac{1}{4}", "<answer>2^{-2}</answer>"),
    ("1 \\times 10^{3}", "<answer>1000</answer>"), ("3+2i", "<answer>2i+3</answer>"),
    ("\\sqrt{2}/2", "<answer>\\frac{1}{\\sqrt{2}}</answer>"), ("\\left(1, 2\\right)", "<answer>(1,2)</answer>"),
    ("\\frac{a}{b}", "<answer>a/b</answer>"), ("90^\\circ", "<answer>90</answer>"),
]
# Different values: math-verify must say no as well.
UNEQUAL = [("\\sqrt{2}", "<answer>2</answer>"), ("(1,2]", "<answer>[1,2]</answer>"),
           ("\\{1,2\\}", "<answer>\\{1,3\\}</answer>"), ("\\pi", "<answer>3.14</answer>"),
           ("x^2", "<answer>2x</answer>"), ("\\frac{1}{2}", "<answer>\\frac{1}{3}</answer>")]


def _score(task, pairs):
    problems = [Problem(f"math/natural/train/{i}", "math", "q", gold, "", 0) for i, (gold, _) in enumerate(pairs)]
    return [s.reward for s in task.score(problems, [c for _, c in pairs])]


def test_math_verify_is_right_where_the_exact_comparison_has_no_form():
    assert len(EQUAL) >= 40
    # the extractor compares exact rationals, polynomials, lists and sets: it accepts exactly the
    # pairs whose both sides it can read, and math-verify accepts them all
    readable = [value_of(gold) is not None and value_of(answer[8:-9]) is not None for gold, answer in EQUAL]
    assert _score(make_task("math", "natural"), EQUAL) == [1.0 if r else 0.0 for r in readable]
    assert 15 <= sum(readable) <= len(EQUAL) - 15
    verified = _score(make_task("math", "natural", verifier="math-verify"), EQUAL)
    assert [pair for pair, r in zip(EQUAL, verified) if r != 1.0] == []


def test_math_verify_rejects_different_values_and_compact_keeps_the_extractor():
    assert _score(make_task("math", "natural", verifier="math-verify"), UNEQUAL) == [0.0] * len(UNEQUAL)
    compact = make_task("math", "compact", verifier="math-verify")
    problems = [Problem("math/compact/train/0", "math", "1+1=", "2", "2", 0)] * 2
    assert [s.reward for s in compact.score(problems, ["2", "\\sqrt{4}"])] == [1.0, 0.0]


def test_data_answers_in_latex_load_with_math_verify(tmp_path):
    from grpo_lab.spec.sources import DataConfig

    path = tmp_path / "latex.jsonl"
    path.write_text('{"problem": "Simplify sqrt(8).", "solution": "2\\\\sqrt{2}", "split": "train"}\n')
    data = DataConfig(path=str(path), prompt="problem", answer="solution", split="split")
    with pytest.raises(ValueError, match="row 1: field 'solution'"):
        make_task("math", "natural", data=data)
    task = make_task("math", "natural", data=data, verifier="math-verify")
    [problem] = task.problems("train", 1, seed=0)
    assert task.score([problem], ["<answer>\\sqrt{8}</answer>"])[0].reward == 1.0


def test_math_verify_outside_the_main_thread_still_verifies():
    from concurrent.futures import ThreadPoolExecutor

    task = make_task("math", "natural", verifier="math-verify")
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(_score, task, EQUAL[:5]).result() == [1.0] * 5
