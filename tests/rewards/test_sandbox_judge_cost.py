"""The judge's cost is bounded by the data's size: values built to make decoding or comparing
slow (sets and dicts whose items share one hash, deep nesting, huge ints) cost about what
honest data of their size costs, and scale linearly; honest tests judge as before.

Python hashes an int by its value modulo 2**61 - 1, so ``k * (2**61 - 1)`` all hash to 0: a
set of 8,000 of them took 3-7 s to build in the trainer before the judge refused them.
"""

import json
import statistics
import subprocess
import sys
import time

import pytest

from grpo_lab.rewards.sandbox import Sandbox, compile_test
from grpo_lab.rewards.sandbox.grading import judge, verdicts
from grpo_lab.rewards.sandbox.values import MAX_SAME_HASH, parse_line, shallow

M = 2 ** 61 - 1


def line(value) -> bytes:
    return json.dumps([0, [value]]).encode()


# each builds n items as a child could write them (raw bytes: it need not use the encoder),
# hostile or as honest data of the same shape and size
PAYLOADS = {
    "colliding set": lambda n, m: line({"set": [k * m for k in range(1, n + 1)]}),
    "colliding set, groups at the cap": lambda n, m: line(
        {"set": [k * m + j for k in range(1, n // MAX_SAME_HASH + 1) for j in range(MAX_SAME_HASH)]}),
    "colliding frozenset": lambda n, m: line({"frozenset": [-k * m for k in range(1, n + 1)]}),
    "colliding dict": lambda n, m: line({"dict": [[k * m, k] for k in range(1, n + 1)]}),
    "colliding tuples": lambda n, m: line(
        {"set": [{"tuple": [k * m, j * m]} for k in range(n // 8) for j in range(8)]}),
    "colliding frozensets": lambda n, m: line({"set": [{"frozenset": [k * m]} for k in range(1, n + 1)]}),
    "deep nesting": lambda n, m: (b"[0, [" + b"[" * (20 * n) + b"]" * (20 * n) + b"]]" if m == M
                                  else b"[0, [[" + b",".join([b"[]"] * (20 * n)) + b"]]]"),
    "deep tagged nesting": lambda n, m: (b"[0, [" + b'{"tuple": [' * (4 * n) + b"]}" * (4 * n) + b"]]" if m == M
                                         else line([{"tuple": []}] * (4 * n))),
    "huge ints": lambda n, m: line([int("9" * 4299)] * (n // 200) if m == M else [12345678] * (n * 5)),
    "ints past the digit limit": lambda n, m: (b"[0, [[" + b",".join([b"7" * (5000 if m == M else 4000)] * (n // 200))
                                               + b"]]]"),
}
HONEST_M = 10 ** 18 + 7  # as many digits as M, and distinct hashes
TESTS = (compile_test("f(1) == {1, 2}"),)


def seconds(fn, reps: int = 15) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("attack", PAYLOADS)
def test_hostile_values_cost_linear_time_and_what_honest_data_of_their_shape_costs(attack):
    small, large, honest = PAYLOADS[attack](1000, M), PAYLOADS[attack](8000, M), PAYLOADS[attack](8000, HONEST_M)
    assert len(large) < 1 << 19 and len(honest) < 1 << 19
    assert verdicts(TESTS, large) == [False]
    t_small, t_large = seconds(lambda: verdicts(TESTS, small)), seconds(lambda: verdicts(TESTS, large))
    t_honest = seconds(lambda: verdicts(TESTS, honest))
    assert t_large < 20 * t_small + 1e-3, (t_small, t_large)  # 8x the items: 64x if quadratic
    assert t_large < 2 * t_honest + 1e-3, (t_honest, t_large)  # 3-7 s before, against 1 ms


def test_honest_sets_dicts_and_ints_judge_as_python_would():
    assert judge(compile_test("set(f(1)) == {1, 2}"), [[2, 1, 2, 1] * 1000])  # duplicates are no crowd
    assert judge(compile_test("f(1) == {-1, -2}"), [{"set": [-1, -2]}])  # hash(-1) == hash(-2)
    assert judge(compile_test("f(1) == {2 ** 61, 1}"), [{"set": [1, 2 ** 61]}])  # also one hash
    assert judge(compile_test("isinstance(f(1), set) and isinstance(f(2), (dict, frozenset))"),
                 [{"set": [1]}, {"dict": [[1, 2]]}])
    assert not judge(compile_test("isinstance(f(1), set)"), [[1]])
    assert judge(compile_test("dict(zip(f(1), f(2))) == {'a': 1, 'b': 2}"), [["a", "b"], [1, 2]])
    assert judge(compile_test("sorted(f(1), key=frozenset) == [[1], [1, 2]]"), [[[1, 2], [1]]])
    assert judge(compile_test("int(f(1)) == 12"), ["12"])
    assert judge(compile_test("f(1) == 10 ** 4000 - 1"), [int("9" * 4000)])


def test_crowded_hashes_fail_the_test_whatever_builds_them():
    crowd = [k * M for k in range(1, MAX_SAME_HASH + 2)]
    assert judge(compile_test(f"len(f(1)) == {MAX_SAME_HASH}"), [{"set": crowd[:-1]}])
    assert not judge(compile_test("len(f(1)) > 0"), [{"set": crowd}])
    assert not judge(compile_test("len(set(f(1))) > 0"), [crowd])
    assert not judge(compile_test("sorted(f(1), key=frozenset) == []"), [[crowd]])
    assert not judge(compile_test("dict(f(1)) == {}"), [[[k, 0] for k in crowd]])
    assert not judge(compile_test("int(f(1)) == 0"), ["9" * 5000])


@pytest.mark.parametrize("text, ok", [
    (b"[0, [1]]", True),
    (b"[0, [" + b"[" * 300 + b"]" * 300 + b"]]", True),
    (b"[0, [" + b"[" * 400 + b"]" * 400 + b"]]", False),
    (b'[0, ["' + b"[" * 5000 + b'"]]', True),  # brackets inside a string are text
    (b'[0, ["\\"' + b"[" * 5000 + b'"]]', True),
    (b'[0, ["\\\\", ' + b"[" * 400 + b"]" * 400 + b"]]", False),  # an escaped backslash, then the string ends
    (b"[0, [" + b"[" * 5000, False),  # unclosed: the scanner would recurse before it fails
    (b"]]]" + b"[" * 5000, False),
])
def test_nesting_is_measured_on_the_structure_only(text, ok):
    assert shallow(text) is ok


RAISED_LIMIT = """import json, sys, time
sys.setrecursionlimit(1_000_000)  # with this limit json.loads of 200,000 nested brackets overflows the C stack
from grpo_lab.rewards.sandbox.values import parse_line
deep = [b"[0, [" + b"[" * 200000 + b"]" * 200000 + b"]]", b"[0, [" + b'{"tuple": [' * 40000 + b"]}" * 40000 + b"]]",
        b"[0, [" + b"[" * 250000, b'[0, ["' + b"[" * 1000 + b'", ' + b"[" * 100000 + b"]" * 100000 + b"]]"]
for payload in deep:
    try:
        parse_line(payload)
        raise SystemExit("parsed")
    except ValueError:
        pass
def seconds(line):
    start = time.perf_counter()
    for _ in range(5):
        parse_line(line)
    return time.perf_counter() - start
pairs = lambda n: json.dumps([0, [{"dict": [[k, str(k)] for k in range(n)]}]]).encode()
print(json.dumps([seconds(pairs(1000)), seconds(pairs(8000))]))
"""


def test_a_trainer_with_a_raised_recursion_limit_refuses_deep_nesting_in_linear_time():
    done = subprocess.run([sys.executable, "-c", RAISED_LIMIT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])  # -11 without the check
    small, large = json.loads(done.stdout)
    assert large < 20 * small + 5e-3


def test_a_message_that_is_not_utf8_json_is_refused_before_it_is_scanned():
    utf16 = "[0, [1]]".encode("utf-16-le")  # json.loads(bytes) would read it as UTF-16
    with pytest.raises(ValueError):
        parse_line(utf16)


FORGE = """import os, stat
def add(a, b):
    return a + b
work = sum(i * i for i in range(400000))
payload = {payload}
for fd in range(3, 32):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            for test in range(2):
                os.write(fd, payload)
            os._exit(0)
    except OSError:
        pass"""
HONEST = ("def add(a, b):\n    return a + b\nwork = sum(i * i for i in range(400000))",  # about 40 ms
          ["add(1, 2) == 3", "assert add(-1, 1) == 0"])
FORGED = {  # built in the child: under 256 KB of messages
    "colliding set": "b'[0, [{\"set\": [' + ','.join(str(k * (2 ** 61 - 1)) for k in range(1, 5000)).encode()"
                     " + b']}]]'",
    "colliding dict": "b'[0, [{\"dict\": [' + ','.join(f'[{k * (2 ** 61 - 1)}, 0]' for k in range(1, 4000)).encode()"
                      " + b']}]]'",
    "deep nesting": "b'[0, [' + b'[' * 60000 + b']' * 60000 + b']]'",
    "huge ints": "b'[0, [[' + b','.join([b'9' * 4299] * 28) + b']]]'",
}


@pytest.mark.parametrize("attack", FORGED)
def test_a_batch_of_hostile_values_costs_what_an_honest_batch_costs(attack):
    box = Sandbox("bwrap", workers=4)
    try:
        honest = [(HONEST[0] + f"\n# {i}", HONEST[1]) for i in range(8)]
        hostile = honest[:4] + [(FORGE.format(payload=FORGED[attack]) + f"\n# {i}", HONEST[1]) for i in range(4)]
        times = {"honest": [], "hostile": []}
        box.run([(c, [compile_test(t) for t in ts]) for c, ts in honest], 2.0)  # the template's start
        for _ in range(5):  # side by side, A B A B
            for name, batch in (("honest", honest), ("hostile", hostile)):
                compiled = [(c, [compile_test(t) for t in ts]) for c, ts in batch]
                start = time.monotonic()
                rates = [sum(p) / len(p) for p in box.run(compiled, 2.0)]
                times[name].append(time.monotonic() - start)
                assert rates == [1.0] * 4 + ([1.0] * 4 if name == "honest" else [0.0] * 4)
        ratio = statistics.median(times["hostile"]) / statistics.median(times["honest"])
        assert ratio <= 2, times
    finally:
        box.close()
