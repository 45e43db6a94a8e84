"""Sandbox: correct scoring, partial credit, deadlines, dedup, and refusal without bubblewrap."""

import os
import signal
import threading
import time
import warnings

import pytest

from grpo_lab.rewards.sandbox import (
    Sandbox,
    SandboxError,
    UnsafeSandboxWarning,
    compile_test,
    run_tests,
)
from grpo_lab.tasks.code import CodeTask
from tests.rewards.processes import template_pid

FAST = 0.5  # per-program timeout used here to keep the suite quick


def test_correct_partial_and_broken_programs():
    programs = [
        ("def f(x):\n    return x + 1", ["f(1) == 2", "assert f(2) == 3", "f(0) == 1"]),
        ("def f(x):\n    return x + 1", ["f(1) == 2", "f(2) == 4", "assert f(3) == 5, 'msg'"]),
        ("def f(x) return", ["f(1) == 2"]),
        ("f = lambda x: 1 / x", ["f(0) == 0", "f(1) == 1"]),
        ("x = 1", []),
        ("x = 1", ["undefined_name", "x == 1"]),
        # the body fails late: what it defined before still earns credit
        ("def f(x):\n    return 2 * x\nraise RuntimeError", ["f(2) == 4"]),
        # values of every plain type travel: tuples, sets, dicts, bytes, nested
        ("def f():\n    return [(1, 'a'), {2}, {'k': (3,)}, b'x', None, 1.5]",
         ["f() == [(1, 'a'), {2}, {'k': (3,)}, b'x', None, 1.5]", "f()[0] == (1, 'a')"]),
    ]
    assert run_tests(programs, timeout_s=FAST) == [1.0, pytest.approx(1 / 3), 0.0, 0.5, 0.0, 0.5, 1.0, 1.0]


def test_empty_batch():
    assert run_tests([]) == []


def test_a_hang_keeps_the_tests_answered_before_it():
    programs = [
        # hangs in C at test 2, where no timer signal could interrupt it
        ("k = 1\ndef hang():\n    return sum(range(10**13))", ["k == 1", "hang() > 0", "k == 1"]),
        ("b = 2", ["b == 2"]),
    ]
    start = time.monotonic()
    assert run_tests(programs, timeout_s=FAST) == [pytest.approx(1 / 3), 1.0]
    assert time.monotonic() - start < 5


def test_identical_programs_run_once_and_share_their_score():
    sandbox = Sandbox("bwrap", workers=2)
    try:
        code, tests = "x = 1", [compile_test("x == 1")]
        results = sandbox.run([(code, tests)] * 8 + [(code + "\n", tests)], FAST)
        assert results == [[True]] * 9
        assert sandbox.programs_run == 2
    finally:
        sandbox.close()


def test_no_state_carries_from_one_program_to_the_next():
    sandbox = Sandbox("bwrap", workers=1)  # one at a time: a shared process would show it
    try:
        poison = "import math, builtins\nmath.pi = 3\nbuiltins.len = lambda x: 0\nx = 1"
        honest = "import math\ndef f():\n    return [math.pi, len([1, 2])]"
        tests = [compile_test("x == 1")], [compile_test("f() == [3.141592653589793, 2]")]
        assert sandbox.run([(poison, tests[0]), (honest, tests[1])] * 3, FAST) == [[True]] * 6
    finally:
        sandbox.close()


def test_step_sized_batches_reuse_one_template():
    sandbox = Sandbox("bwrap", workers=2)
    try:
        programs = [(f"def f(x):\n    return x * {i}", [compile_test(f"f(2) == {2 * i}")]) for i in range(64)]
        assert sandbox.run(programs, 2.0) == [[True]] * 64
        first = sandbox._proc.pid
        assert sandbox.run(programs[:8], 2.0) == [[True]] * 8
        assert sandbox._proc.pid == first
    finally:
        sandbox.close()


def test_a_dead_template_is_restarted_once():
    sandbox = Sandbox("bwrap", workers=2)
    try:
        program = [("x = 1", [compile_test("x == 1")])]
        assert sandbox.run(program, FAST) == [[True]]
        sandbox._proc.kill()
        sandbox._proc.wait()
        assert sandbox.run(program, FAST) == [[True]]
    finally:
        sandbox.close()


SLOW_ADD = "import time\ntime.sleep(0.3)\ndef add(a, b):\n    return a {op} b\n# {i}"


def _slow_batch(n: int) -> tuple[list, list[float]]:
    """n distinct programs that take 0.3 s each, alternately right and half right."""
    programs = [(SLOW_ADD.format(op="+" if i % 2 == 0 else "-", i=i), ["add(1, 2) == 3", "add(0, 0) == 0"])
                for i in range(n)]
    return [(c, [compile_test(t) for t in ts]) for c, ts in programs], [1.0 if i % 2 == 0 else 0.5 for i in range(n)]


@pytest.mark.parametrize("namespace", [False, True], ids=["template", "whole-namespace"])
def test_a_template_killed_mid_batch_is_replaced_and_every_program_scored_exactly(namespace):
    box = Sandbox("bwrap", workers=4)
    try:
        programs, expected = _slow_batch(8)
        box.run(programs[:1], 2.0)
        killer = threading.Timer(0.15, os.kill, (template_pid(box, namespace), signal.SIGKILL))
        killer.start()
        assert [sum(p) / len(p) for p in box.run(programs, 2.0)] == expected
        killer.join()
        assert box.templates_lost == 1 and box.scored_zero_alone == 0
    finally:
        box.close()


def test_a_stalled_template_is_replaced():
    box = Sandbox("bwrap", workers=4)
    box.stall_s = 2.0
    try:
        programs, expected = _slow_batch(8)
        box.run(programs[:1], 2.0)
        os.kill(template_pid(box), signal.SIGSTOP)  # it forks no more children
        for _ in range(2):  # the children forked ahead of need serve the first, none is left for the second
            assert [sum(p) / len(p) for p in box.run(programs, 2.0)] == expected
        assert box.templates_lost >= 1
    finally:
        box.close()


def test_without_bubblewrap_the_code_task_refuses_and_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no bwrap on it
    with pytest.raises(SandboxError, match="apt-get install bubblewrap.*unsafe-local"):
        CodeTask("compact")


def test_unsafe_local_warns_on_every_task_and_still_scores():
    with pytest.warns(UnsafeSandboxWarning):
        task = CodeTask("compact", sandbox="unsafe-local")
    with pytest.warns(UnsafeSandboxWarning):
        CodeTask("compact", sandbox="unsafe-local")
    problems = task.problems("train", 4, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnsafeSandboxWarning)
        assert [s.reward for s in task.score(problems, [p.solution for p in problems])] == [1.0] * 4


def test_a_checkout_under_tmp_stays_visible_inside_the_sandbox():
    # bwrap mounts in order: a tmpfs /tmp after the binds would hide a package installed under /tmp
    from grpo_lab.rewards.sandbox.isolation import command

    argv, _, _ = command("bwrap", 3, "{}")
    assert argv.index("--tmpfs") < argv.index("--ro-bind-try")


@pytest.mark.parametrize("mode", ["bwrap", "unsafe-local"])
def test_the_template_and_its_children_die_with_the_trainer(mode):
    import subprocess
    import sys

    script = ("import warnings; warnings.simplefilter('ignore')\n"
              "from grpo_lab.rewards.sandbox import Sandbox, compile_test\n"
              f"box = Sandbox({mode!r}, workers=2)\n"
              "box.run([('x = 1', [compile_test('x == 1')])] * 1 + [('y = 2', [compile_test('y == 2')])], 1.0)\n"
              "def tree(pid):\n"
              "    try:  # a child that just exited has no /proc entry left\n"
              "        kids = open(f'/proc/{pid}/task/{pid}/children').read().split()\n"
              "    except OSError:\n"
              "        kids = []\n"
              "    return [pid] + [p for k in kids for p in tree(int(k))]\n"
              "import time\n"
              "for _ in range(200):  # the children ordered for the next batch are forked meanwhile\n"
              "    pids = tree(box._proc.pid)\n"
              "    if len(pids) >= 3:\n"
              "        break\n"
              "    time.sleep(0.05)\n"
              "print(*pids, flush=True)\n"
              "import os; os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) >= 3  # the template (or bwrap) and forked children
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(map(_running, pids)):
        time.sleep(0.1)
    assert not any(map(_running, pids))


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
