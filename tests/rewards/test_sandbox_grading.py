"""Trusted grading: which parts of a test the candidate computes, and judging its values here."""

import json

import pytest

from grpo_lab.rewards.sandbox.grading import (
    BadTestError,
    compile_test,
    decode,
    judge,
    parse_line,
)


@pytest.mark.parametrize("test, setup, holes", [
    ("f(1) == 2", "", ("f(1)",)),
    ("assert f(2) == 3, 'msg'", "", ("f(2)",)),
    ("assert set(pairs([1, 2])) == {(1, 2)}", "", ("pairs([1, 2])",)),
    ("assert math.isclose(area(2), 12.56, rel_tol=0.01)", "", ("area(2)",)),
    ("assert not is_even(3)", "", ("is_even(3)",)),
    ("assert f(1) == 2 and g(2) == 3", "", ("f(1)", "g(2)")),
    ("assert f([1, 2])[0] == 1", "", ("f([1, 2])",)),
    ("assert f(2) ** 2 == 4", "", ("f(2) ** 2",)),  # power stays in the candidate's deadline
    ("assert sorted(x for x in f(3)) == [1]", "", ("[x for x in f(3)]",)),
    ("assert [f(x) for x in range(3)] == [0, 1, 2]", "", ("[f(x) for x in range(3)]",)),
    ("import math\nxs = [1, 2]\nassert f(xs) == 3", "import math\nxs = [1, 2]", ("f(xs)",)),
    ("done", "", ("done",)),
    ("True", "", ()),
])
def test_holes_are_the_candidate_parts_and_setup_is_kept(test, setup, holes):
    compiled = compile_test(test)
    assert compiled.setup == setup
    assert compiled.holes == holes


@pytest.mark.parametrize("test", [
    "assert all(f(x) == x for x in range(3))",  # the comparison would run on candidate objects
    "assert list(map(lambda x: f(x) > 0, [1]))[0]",
    "for x in range(3): pass",
    "assert f(1) ==",
])
def test_tests_the_grader_cannot_judge_are_refused_when_loaded(test):
    with pytest.raises(BadTestError, match="test|comparison"):
        compile_test(test)


def test_judge_compares_decoded_values_with_python_semantics():
    assert judge(compile_test("f(1) == 2"), [2])
    assert judge(compile_test("f(1) == 2"), [2.0])  # 2 == 2.0, as an assert would have it
    assert not judge(compile_test("f(1) == (1, 2)"), [[1, 2]])  # a list is not a tuple
    assert judge(compile_test("f(1) == (1, 2)"), [{"tuple": [1, 2]}])
    assert judge(compile_test("set(f(1)) == {3, 4}"), [[4, 3]])
    assert judge(compile_test("f(1) == {'a': {1}}"), [{"dict": [["a", {"set": [1]}]]}])
    assert judge(compile_test("math.isclose(f(1), 3.14159, rel_tol=1e-3)"), [3.1416])
    assert judge(compile_test("assert not is_even(3)"), [False])
    assert not judge(compile_test("assert not is_even(3)"), [True])


def test_anything_but_plain_tagged_data_fails_the_test():
    test = compile_test("f(1) == 2")
    assert not judge(test, [{"error": "ZeroDivisionError"}])
    assert not judge(test, [{"__eq__": "always"}])
    assert not judge(test, [{"tuple": [2], "extra": 1}])
    assert not judge(test, None)  # the child could not evaluate this test
    assert not judge(test, [2, 2])  # more values than holes
    assert not judge(compile_test("f(1) == {1}"), [{"set": [[1]]}])  # unhashable element


def test_decode_rebuilds_every_tagged_type_and_refuses_bare_non_finite():
    data = [{"tuple": [1, "a"]}, {"frozenset": [2]}, {"bytes": "6869"}, {"complex": [1.0, -2.0]},
            {"float": "inf"}, None, True]
    assert decode(data) == [(1, "a"), frozenset({2}), b"hi", complex(1, -2), float("inf"), None, True]
    with pytest.raises(ValueError):
        parse_line(b"[0, [NaN]]")
    assert parse_line(json.dumps([3, [1]]).encode()) == (3, [1])
    with pytest.raises(ValueError):
        parse_line(b'{"0": [1]}')


@pytest.mark.parametrize("test, value", [
    ("f(3) % 2 == 1", "%300000000d"),  # a candidate string as a format: 300 MB
    ("list(range(f(1))) == []", 10 ** 12),
    ("sum(f(1)) == 0", [[0]] * 50_000),  # summing lists is quadratic
    ("sum(f(1), []) == []", [[0]] * 50_000),
    ("bytes(f(1)) == b''", 10 ** 10),
    ("round(5, f(1)) == 5", -10 ** 8),
    ("f(1) + 'x' == 'x'", 10 ** 6),  # mixed types: refused, not coerced
])
def test_the_judge_refuses_work_a_candidate_value_could_make_unbounded(test, value):
    import tracemalloc

    compiled = compile_test(test)
    tracemalloc.start()
    try:
        verdict = judge(compiled, [value])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert verdict is False and peak < 8 << 20


def test_the_judge_still_does_the_arithmetic_tests_use():
    assert judge(compile_test("f(7) % 2 == 1"), [3])
    assert judge(compile_test("abs(f(1) - 2.5) < 1e-9"), [2.5])
    assert judge(compile_test("f(1) + [3] == [1, 2, 3]"), [[1, 2]])
    assert judge(compile_test("set(f(1)) - {1} == {2}"), [[1, 2]])
    assert judge(compile_test("sum(f(1)) == 6"), [[1, 2, 3]])
    assert judge(compile_test("list(range(f(1))) == [0, 1]"), [2])
    assert judge(compile_test("round(f(1), 2) == 3.14"), [3.14159])
    assert judge(compile_test("math.isclose(math.sqrt(f(1)), 2.0)"), [4])


@pytest.mark.parametrize("test, message", [
    ("EXPECTED = 120\nassert fact(5) == EXPECTED", "expected side 'EXPECTED'"),
    ("assert fact(5) == EXPECTED", "expected side 'EXPECTED'"),
    ("expected = [1, 2]\nassert f(2) == expected[0]", r"expected side 'expected\[0\]'"),
    ("from fractions import Fraction\nassert f(1) == Fraction(1, 3)", "expected side 'Fraction"),
    ("assert '%d' % f(1) == '5'", "formats candidate values"),
    ("assert math.factorial(f(3)) == 6", "math.factorial is not one"),
])
def test_tests_whose_expected_side_the_candidate_could_shape_are_refused(test, message):
    with pytest.raises(BadTestError, match=message):
        compile_test(test)


@pytest.mark.parametrize("test", [
    "x = [3, 1, 2]\nassert f(x) == [1, 2, 3]",  # a setup input, a literal expected value
    "assert len(f(4)) == len(set(f(4)))",  # both sides call the candidate: a property test
    "import math\nassert math.isclose(area(1), 3.14159, rel_tol=1e-3)",
])
def test_setup_inputs_and_property_tests_still_load(test):
    compile_test(test)
