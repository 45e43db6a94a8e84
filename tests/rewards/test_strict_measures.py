"""The hedge measures of rewards/strict.py: what counts as a candidate, relative to the reference."""

import pytest

from grpo_lab.rewards.strict import (
    ALL,
    MAX_MARKS,
    Counts,
    counts,
    grade,
    is_name,
    names_more,
    one_sided,
    readable_latex,
    shape,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("4", Counts(0, 1, 0, 1, 0)), ("3 or 4", Counts(1, 1, 0, 2, 1)), ("3 OR 4", Counts(1, 1, 0, 2, 1)),
        ("\\pm 4", Counts(1, 1, 0, 1, 0)), ("±4", Counts(1, 1, 0, 1, 0)), ("4 +/- 1", Counts(1, 1, 0, 2, 0)),
        ("x = 3 \\text{ or } x = 4", Counts(1, 1, 0, 2, 3)), ("3, 4", Counts(0, 2, 1, 2, 0)),
        ("1,000", Counts(0, 1, 0, 1, 0)), ("1,000, 2", Counts(0, 2, 1, 2, 0)), ("\\{4\\}", Counts(0, 1, 1, 1, 0)),
        ("\\{3, 4\\}", Counts(0, 2, 1, 2, 0)), ("(1, 2]", Counts(0, 2, 1, 2, 0)), ("(4)", Counts(0, 1, 0, 1, 0)),
        ("f(3, 4)", Counts(0, 1, 0, 2, 1)), ("3\n4", Counts(0, 2, 1, 2, 0)), ("4,", Counts(0, 1, 0, 1, 0)),
        ("\\frac{1}{2}", Counts(0, 1, 0, 2, 0)), ("color", Counts(0, 1, 0, 0, 1)), ("\\lor", Counts(0, 1, 0, 0, 0)),
        ("3 \\text{, } 4", Counts(0, 2, 1, 2, 0)), ("$3, 4$", Counts(0, 2, 1, 2, 0)),
    ],
)
def test_counts(text, expected):
    assert counts(text) == expected


def test_shapes():
    assert shape("\\{1, 2\\}") == ("set", "{", "}", ("1", "2"))
    assert shape("{1, 2}") == ("set", "{", "}", ("1", "2")) and shape("{4}").kind == "scalar"
    assert shape("(1, 2]") == ("tuple", "(", "]", ("1", "2")) and shape("(1)(2)").kind == "scalar"
    assert shape("\\left(1, 2\\right)") == ("tuple", "(", ")", ("1", "2"))
    assert shape("1, 2") == ("list", "", "", ("1", "2")) and shape("(1, 2), (3, 4)").items == ("(1, 2)", "(3, 4)")


def test_a_reference_that_names_several_candidates_allows_as_many():
    assert names_more("3 or 4", "4") and not names_more("x = 1 or x = 2", "x = 2 or x = 1")
    assert names_more("1, 2, 3", "1, 2") and not names_more("2, 1", "1, 2")
    assert names_more("\\{4\\}", "4") and not names_more("\\{4\\}", "\\{1, 2\\}")
    assert not names_more("288 apples", "288") and names_more("288 apples", "288", ALL)
    assert names_more("288 290", "288", ALL) and not names_more("290", "288", ALL)


def test_latex_a_lenient_parser_could_split_is_unreadable():
    readable = ["\\frac{\\sqrt{3}}{2}", "|x - 1|", "5\\text{ cm}", "\\{1, 2\\}", "\\binom{5}{2}", "90^\\circ",
                "90^{\\circ}", "\\$4", "$4$", "\\left(1 + 2\\right) \\cdot 3", "3 \\cdot -4", "\\mathbf{18}",
                "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}"]
    unreadable = ["3 \\quad 4", "3 \\\\ 4", "3 & 4", "3 \\& 4", "3 | 4", "3 ... 4", "3 … 4", "3 \\to 4", "3 \\dots 4",
                  "3 \\otimes 4", "3 \\hspace{1cm} 4", "\\begin{pmatrix} 1 \\end{pmatrix} & 2", "3 $ 4",
                  "3 \\left( 4 \\right.", "3 \\left( 4", "3 \\div\\div 4", "3 ** 4", "3 \\sqrt{} 4", "3 \\boxed{} 4",
                  *[f"3 \\{c} 4" for c in ("cup", "cap", "setminus", "in", "notin", "subset", "subseteq", "circ", "gcd",
                                             "max", "lim", "sum", "prod", "emptyset", "langle", "lceil", "vec", "bar",
                                             "hat", "tilde", "choose", "le", "approx")]]
    assert all(readable_latex(t) for t in readable) and not any(readable_latex(t) for t in unreadable)


def test_a_command_the_reference_uses_is_readable():
    # what would be a second value beside the first is the reference's own notation
    pairs = [("x \\in [1, 2]", "x \\in [1, 2]"), ("\\langle 1, 2 \\rangle", "\\langle 1, 2 \\rangle"),
             ("A \\cup B", "B \\cup A"), ("\\bar{x}", "\\bar{x}"), ("\\gcd(4, 6)", "\\gcd(6, 4)"),
             ("\\left. \\frac{x}{2} \\right)", "\\left. \\frac{y}{2} \\right)")]
    assert all(readable_latex(t, r) for t, r in pairs)
    assert not any(readable_latex(t, "4") for t, _ in pairs)


def test_an_equation_states_one_value_only_with_a_name_on_the_left():
    assert all(one_sided(t) for t in ("4", "x = 4", "f(x) = x+1", "a_1 = 2", "\\theta = \\pi", "y_{10} = 3"))
    assert not any(one_sided(t) for t in ("3 = 4", "x = 3 = 4", "2+2 = 4", "x + 1 = 5"))
    assert is_name(" x ") and not is_name("xy") and not is_name("3")


def test_grade_needs_every_mark_right_and_few_marks():
    right = lambda mark: (mark == "4", mark)
    assert grade(["4"], "4", right) == (1.0, "4")
    assert grade(["4", "3"], "4", right) == (0.0, "3") and grade(["3", "4"], "4", right) == (0.0, "3")
    assert grade([], "4", right) == (0.0, None) and grade(["3 or 4"], "4", lambda m: (True, m)) == (0.0, None)
    always = lambda mark: (True, mark)
    assert grade(["4"] * MAX_MARKS, "4", always)[0] == 1.0 and grade(["4"] * (MAX_MARKS + 1), "4", always)[0] == 0.0
