"""Answer extraction, comparison by value and format helpers: the edge cases that decide a math reward."""

import pytest

from grpo_lab.rewards.extract import (
    all_boxed,
    all_tagged,
    extract_hash,
    extract_tagged,
    lone_number,
    marked_answers,
    normalize_number,
    same_value,
    show,
    value_of,
)
from grpo_lab.rewards.format import (
    called_names,
    defined_names,
    fenced_code,
    has_answer_tags,
    has_boxed,
    is_integer,
    normalize_code,
    parses_as_expression,
)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("1,000", "1000"), ("3.0", "3"), ("-0", "0"), ("-0.0", "0"), ("+5", "5"),
        ("0.50", "0.5"), (".5", "0.5"), ("-.25", "-0.25"), ("$1,234.50", "1234.5"),
        ("12%", "12"), ("42.", "42"), (" 7 ", "7"), ("1e3", None), ("1e5000", None), ("1E100000000", None),
            ("1" * 65, None), ("18\\%", "18"), ("\u221218", "-18"), ("18€", "18"), ("£18", "18"),
            ("1 000", "1000"), ("1\u2009000 000", "1000000"), ("1 0", None), ("12 3456", None),
            ("**18**", "18"), ("`18`", "18"), ("\\mathbf{18}", "18"), ("1/4", "0.25"),
        ("2/3", "2/3"), ("\\frac{3}{4}", "0.75"), ("-1,000,000", "-1000000"),
        ("abc", None), ("", None), ("3/0", None), ("1 2", None), (None, None), ("inf", None),
    ],
)
def test_normalize_number(raw, expected):
    assert normalize_number(raw) == expected


def test_tagged_takes_last_closed_tag_and_tolerates_truncation():
    assert extract_tagged("<answer>1</answer> wait <ANSWER> 2 </answer>") == "2"
    assert extract_tagged("reasoning <answer>17") == "17"
    assert extract_tagged("no tags here") is None
    assert extract_tagged("<answer>\n3\n</answer>") == "3"
    assert all_tagged("<answer>1</answer> x <answer>2</answer> <answer>3") == ["1", "2", "3"]
    assert all_tagged("<answer>1</answer> <answer></answer>") == ["1", ""]


def test_boxes_are_found_nested_escaped_and_in_order():
    assert all_boxed(r"\boxed{1} then \boxed{\frac{1}{2}}") == ["1", r"\frac{1}{2}"]
    assert all_boxed(r"\boxed{{a}{b}}") == ["{a}{b}"]
    assert all_boxed(r"\boxed{\boxed{4}}") == [r"\boxed{4}", "4"]
    assert all_boxed(r"\boxed{\{1, 2\}} \fbox{3}") == [r"\{1, 2\}", "3"]
    assert all_boxed(r"\boxed{unclosed") == [] and all_boxed("nothing") == []
    assert all_boxed(r"\boxed{1} \boxed{unclosed") == ["1"]


def test_hash_marker_reads_to_end_of_line():
    assert extract_hash("work\n#### 1,234\nextra") == "1,234"
    assert extract_hash("no marker") is None


@pytest.mark.parametrize(
    "text, marks",
    [
        ("5 \\boxed{6}\n#### 7\n<answer>8</answer> 9", ["8", "6", "7"]),
        ("#### 7 <answer>7</answer>", ["7", "7 <answer>7</answer>"]),  # a #### mark runs to the line's end
        (r"<answer>\boxed{ 4 }</answer> so \boxed{4}", ["4"]),  # a tag holding a box is the box
        ("<answer>4</answer> <answer> 4 </answer>", ["4"]),  # repeats are one answer
        (r"\boxed{3} or \boxed{4}", ["3", "4"]),
        ("<answer>3</answer> <answer>4", ["3", "4"]),
        ("<answer></answer> <answer>  </answer> \\boxed{}", []),
        ("The answer is 3. 4", []),  # unmarked text holds no answer
    ],
)
def test_marked_answers_are_every_distinct_mark(text, marks):
    assert marked_answers(text) == marks


def test_hash_marks_can_be_left_out():
    assert marked_answers("#### 7") == ["7"] and marked_answers("#### 7", hash_marks=False) == []


@pytest.mark.parametrize(
    "text, number",
    [("8 apples", "8"), ("The answer is 8.", "8"), ("$1,000.00", "1000"), ("5\\text{ cm}", "5"),
     ("answer: -3", "-3"), ("not 8", None), ("8 thousand", None), ("about 8", None), ("8 and 9", None),
     ("x 8", None), ("8x", None), ("4!", None), ("none", None)],
)
def test_lone_number_is_one_number_among_plain_words(text, number):
    value = lone_number(text)
    assert (normalize_number(str(value)) if value is not None else None) == number


@pytest.mark.parametrize(
    "answer, target, equal",
    [
        ("2+2", "4", True), ("2*(3+4)/7", "2", True), ("1 + x", "x+1", True), ("(x+1)^2", "x^2+2x+1", True),
        ("1, 2", "\\{1,2\\}", True), ("2, 1", "1, 2", True), ("\\{2, 1\\}", "1, 2", True),
        ("x = 4", "4", True), ("\\frac{8}{2}", "4", True), ("4.0", "4", True), ("2-2", "0", True),
        ("(1, 2]", "(1,2]", True), ("[1, 2]", "(1,2]", False), ("(2, 1)", "(1, 2)", False),
        ("3, 4", "4", False), ("\\{4\\}", "4", False), ("3 4", "4", False), ("34", "4", False),
        ("x < 4", "4", False), ("x \\approx 4", "4", False), ("\\sqrt{16}", "4", False), ("2x", "2", False),
        ("2\\frac{1}{2}", "1", False), ("1, 2, 3", "1, 2", False), ("x^99", "x^99", False),
    ],
)
def test_same_value(answer, target, equal):
    assert same_value(answer, target) is equal


def test_values_show_one_spelling():
    assert [show(value_of(t)) for t in ("2+2", "1 + x", "0.50", "2, 1", "\\{1\\}", "(1, 2]")] == [
        "4", "x + 1", "0.5", "1, 2", "{1}", "(1, 2]"]


def test_format_helpers():
    assert is_integer(" -12\n") and is_integer("0")
    assert not is_integer("12 apples") and not is_integer("1.0") and not is_integer("") and not is_integer("--1")
    assert has_answer_tags("x <answer>1</answer>") and not has_answer_tags("<answer>1")
    assert not has_answer_tags("<answer></answer>") and not has_answer_tags("<answer> \n </answer>")
    assert has_answer_tags("<answer></answer> <answer>2</answer>")
    assert has_boxed(r"\boxed{2}") and not has_boxed("boxed 2")
    assert not has_boxed(r"\boxed{}") and not has_boxed(r"\boxed{  }") and not has_boxed(r"\boxed{2")
    assert parses_as_expression("3*x+1") and parses_as_expression(" x ")
    assert not parses_as_expression("x=1") and not parses_as_expression("") and not parses_as_expression("3*")


def test_fenced_code_prefers_python_and_ignores_prose():
    text = "Here:\n```text\nnot code\n```\nand\n```python\ndef f():\n    return 1\n```\nDone."
    assert fenced_code(text) == "def f():\n    return 1\n"
    assert fenced_code("```\nx = 1\n```") == "x = 1\n"
    assert fenced_code("```python\nunclosed") is None
    assert fenced_code("def f(): pass") is None


def test_defined_and_called_names():
    code = "import math\nfrom os import path as p\nclass A: pass\ndef f(x):\n    return g(x)\nh = lambda: 1\n"
    assert defined_names(code) == {"math", "p", "A", "f", "h"}
    assert defined_names("def (") == set()
    assert called_names(["assert f(1) == 2", "g(h(3))", "not python ("]) == {"f", "g", "h"}


def test_normalize_code_ignores_formatting_only():
    assert normalize_code("3*x +1  # c") == normalize_code("3 * x + 1")
    assert normalize_code("3*x+2") != normalize_code("3*x+1")
    assert normalize_code(" broken ( ") == "broken ("


def test_tags_and_boxes_cost_what_the_text_is_long():
    import time

    honest = "work " * 4000 + "<answer>4</answer>"
    hostile = ["<answer>" * 4000, "\\boxed{" * 4000, "<answer>" * 2000 + "</answer>" * 2000]

    def cost(text):
        start = time.perf_counter()
        marked_answers(text), has_answer_tags(text), has_boxed(text)
        return time.perf_counter() - start

    baseline = min(cost(honest) for _ in range(3))
    assert all(min(cost(text) for _ in range(3)) < 20 * baseline + 0.01 for text in hostile)
    assert all_tagged("<answer>" * 3 + "x") == ["<answer><answer>x"] and all_tagged("<answer>x", closed_only=True) == []
