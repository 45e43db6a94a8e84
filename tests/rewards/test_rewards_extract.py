"""Answer extraction and format helpers: the edge cases that decide a math reward."""

import pytest

from grpo_lab.rewards.extract import (
    extract_answer,
    extract_boxed,
    extract_hash,
    extract_number,
    extract_tagged,
    last_number,
    last_word,
    normalize_number,
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
        ("12%", "12"), ("42.", "42"), (" 7 ", "7"), ("1e3", "1000"), ("1/4", "0.25"),
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


def test_boxed_handles_nested_braces_and_picks_last():
    assert extract_boxed(r"\boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert extract_boxed(r"\boxed{{a}{b}}") == "{a}{b}"
    assert extract_boxed(r"\boxed{unclosed") is None
    assert extract_boxed("nothing") is None


def test_hash_marker_reads_to_end_of_line():
    assert extract_hash("work\n#### 1,234\nextra") == "1,234"
    assert extract_hash("no marker") is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("10-3=7", "7"), ("so x=-3", "-3"), ("f(2)-1", "1"), ("list 1,2,3", "3"),
        ("I have 1,000 apples", "1,000"), ("The answer is 42.", "42"), ("pi is 3.14", "3.14"),
        ("none", None), ("a2b", "2"),
    ],
)
def test_last_number(text, expected):
    assert last_number(text) == expected


def test_extraction_priority_tags_boxed_hash_last_number():
    assert extract_answer(r"5 \boxed{6} #### 7 <answer>8</answer> 9") == "8"
    assert extract_answer(r"5 \boxed{6} #### 7 9") == "6"
    assert extract_answer("5 #### 7\n9") == "7"
    assert extract_answer("5 then 9") == "9"
    assert extract_answer("no answer") is None


def test_extract_number_reads_numbers_inside_wordy_answers():
    assert extract_number("<answer>8 apples</answer>") == "8"
    assert extract_number("<answer>$1,000.00</answer>") == "1000"
    assert extract_number(r"\boxed{\frac{1}{2}}") == "0.5"
    assert extract_number("<answer>none</answer>") is None
    assert extract_number("Total: 3 + 4 = 7.") == "7"


def test_last_word():
    assert last_word("The tallest is Bob.") == "Bob"
    assert last_word("123 !") is None


def test_format_helpers():
    assert is_integer(" -12\n") and is_integer("0")
    assert not is_integer("12 apples") and not is_integer("1.0") and not is_integer("") and not is_integer("--1")
    assert has_answer_tags("x <answer>1</answer>") and not has_answer_tags("<answer>1")
    assert has_boxed(r"\boxed{2}") and not has_boxed("boxed 2")
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
