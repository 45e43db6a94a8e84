"""Exact canonical polynomials: equal values have equal forms, and every bound holds under attack."""

import time
from fractions import Fraction

import pytest

from grpo_lab.rewards.algebra import MAX_CHARS, constant, describe, polynomial


@pytest.mark.parametrize(
    "a, b",
    [("2+2", "4"), ("1 + x", "x+1"), ("(x+1)^2", "x^2+2x+1"), ("(a-b)(a+b)", "a^2-b^2"), ("x \\cdot 2", "2x"),
     ("\\frac{6}{4}", "1.5"), ("\\frac12", "0.5"), ("\\dfrac{x}{2}", "x/2"), ("2^{10}", "1024"), ("2^{-2}", "0.25"),
     ("(1/2)^{-3}", "8"), ("0^0", "1"),
     ("x**2", "x^2"), ("-x^2", "-(x^2)"), ("xy", "y x"), ("2(x+1)", "2x+2"), ("3 \\times 4", "12"),
     ("12 \\div 4", "3"), ("1,000 + 1", "1001"), ("$x+1$", "1+x"), ("\\left(x+1\\right)^{2}", "(x+1)(1+x)"),
     ("2-2", "0"), ("x - x", "0"), ("0.1 + 0.2", "0.3"), ("(x^2-1)/2", "x^2/2 - 1/2")],
)
def test_equal_values_have_one_form(a, b):
    assert polynomial(a) is not None and polynomial(a) == polynomial(b)


@pytest.mark.parametrize(
    "a, b",
    [("x+1", "x+2"), ("(x+1)^2", "x^2+1"), ("2x", "x^2"), ("0.1 + 0.2", "0.30000000000000004"), ("x", "y"), ("2", "-2")],
)
def test_different_values_have_different_forms(a, b):
    assert polynomial(a) != polynomial(b)


@pytest.mark.parametrize(
    "text",
    ["3 4", "3 (4)", "2 \\frac{1}{2}", "2\\frac{1}{2}", "\\sqrt{2}", "\\pi", "1/x", "x^{-1}", "x^y", "1/0", "x^1.5",
     "apples", "3 +", "(x+1", "x+1)", "", " ", "1,2", "x = 1", "3!", "|x|", "x^{9}", "0^{-1}", "2^{300}", "2^{1000}"],
)
def test_outside_the_language_is_no_form(text):
    assert polynomial(text) is None


def test_constants_and_spellings():
    assert constant(polynomial("2^{-2} + 1")) == Fraction(5, 4) and constant(polynomial("x")) is None
    assert constant(polynomial("x - x")) == 0 and constant(None) is None
    assert describe(polynomial("(x+1)^2")) == "x^2 + 2*x + 1" and describe(polynomial("1 - y")) == "-y + 1"
    assert describe(polynomial("x/2")) == "1/2*x" and describe(polynomial("0")) == "0"


HOSTILE = ["(a+b+c+d+e+f+g+h)^8", "(x+1)^8 (y+1)^8 (z+1)^8", "(x+y+z)^8 (x-y-z)^8", "3^{999}",
           "(" * 120 + "1" + ")" * 120, "9" * (MAX_CHARS - 1), "x^12*x^12*x^12",
           "(x+1)^12*(y+1)^12", "((2^12)^12)^12", "1," * 119, "xyz^12^12^12", "2^" * 100 + "2", "-" * 200 + "1",
           "\\frac{" * 40 + "1" + "}{2}" * 40, "x" * 300, "(x+y+z)^12/3^12"]


def test_every_bound_holds_and_an_attack_costs_about_what_an_honest_answer_does():
    honest = ["x^2+2x+1", "(x+1)^2", "\\frac{3}{4}", "2+2", "x+4", "0.75", "(a-b)(a+b)", "2^{10}"] * 40
    hostile = HOSTILE * (len(honest) // len(HOSTILE))

    def cost(batch):
        start = time.perf_counter()
        forms = [polynomial(text) for text in batch]
        return time.perf_counter() - start, forms

    honest_s, honest_forms = cost(honest)
    hostile_s, hostile_forms = cost(hostile)
    assert all(f is not None for f in honest_forms) and all(f is None for f in hostile_forms)
    assert hostile_s < 20 * honest_s + 0.05  # generous: this machine is shared
