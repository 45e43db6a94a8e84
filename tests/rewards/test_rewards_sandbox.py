"""Sandbox: correct scoring, isolation between programs, and refusal of host damage."""

import os
import socket
import subprocess
import time
import uuid

import pytest

from grpo_lab.rewards.sandbox import run_tests

FAST = 0.5  # per-program timeout used here to keep the suite quick
DONE = "\ndone = True"  # appended so a program only scores if its body ran to the end


def guarded(body: str) -> tuple[str, list[str]]:
    return body + DONE, ["done"]


def test_correct_partial_and_broken_programs():
    programs = [
        ("def f(x):\n    return x + 1", ["f(1) == 2", "assert f(2) == 3", "f(0) == 1"]),
        ("def f(x):\n    return x + 1", ["f(1) == 2", "f(2) == 4", "assert f(3) == 5, 'msg'"]),
        ("def f(x) return", ["f(1) == 2"]),
        ("f = lambda x: 1 / x", ["f(0) == 0", "f(1) == 1"]),
        ("x = 1", []),
        ("x = 1", ["x ==", "undefined_name"]),
    ]
    assert run_tests(programs, timeout_s=FAST) == [1.0, pytest.approx(1 / 3), 0.0, 0.5, 0.0, 0.0]


def test_empty_batch():
    assert run_tests([]) == []


def test_infinite_loop_is_stopped_and_batch_mates_still_score():
    programs = [
        ("a = 1", ["a == 1"]),
        ("while True:\n    pass", ["True"]),
        # Swallows the first timer tick with a bare except; the repeating tick or the
        # parent's watchdog must still end it.
        ("while True:\n    try:\n        while True: pass\n    except BaseException: pass", ["True"]),
        ("b = 2", ["b == 2"]),
    ]
    start = time.monotonic()
    assert run_tests(programs, timeout_s=FAST) == [1.0, 0.0, 0.0, 1.0]
    assert time.monotonic() - start < 10


def test_hang_in_c_code_keeps_earlier_tests_and_other_programs():
    # sum(range(...)) never returns to the interpreter loop, so only the parent's watchdog
    # can stop it: the child is killed and the remaining programs re-run in a new child.
    programs = [
        ("a = 1", ["a == 1"]),
        ("k = 1", ["k == 1", "sum(range(10**13)) > 0", "k == 1"]),
        ("b = 2", ["b == 2"]),
        ("c = 3", ["c == 3"]),
    ]
    assert run_tests(programs, timeout_s=FAST) == [1.0, pytest.approx(1 / 3), 1.0, 1.0]


def test_child_death_does_not_zero_others():
    programs = [("a = 1", ["a == 1"]), ("import os\nos._exit(3)", ["True"]), ("b = 2", ["b == 2"])]
    assert run_tests(programs, timeout_s=FAST) == [1.0, 0.0, 1.0]


def test_memory_and_disk_bombs_are_stopped():
    programs = [
        guarded("x = bytearray(4 * 1024 ** 3)"),
        guarded("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 6))"),
        guarded("with open('big', 'w') as f:\n    for _ in range(64):\n        f.write('x' * 10 ** 6)"),
        ("ok = sum(range(1000))", ["ok == 499500"]),
    ]
    assert run_tests(programs, timeout_s=2.0, memory_mb=256) == [0.0, 0.0, 0.0, 1.0]


def test_writes_outside_the_work_dir_are_refused():
    path = f"/tmp/grpo-sandbox-test-{uuid.uuid4().hex}"
    programs = [
        guarded(f"open({path!r}, 'w').write('x')"),
        guarded(f"open({path!r}, 'a').write('x')"),
        guarded(f"import os\nos.close(os.open({path!r}, os.O_WRONLY | os.O_CREAT))"),
        guarded(f"import pathlib\npathlib.Path({path!r}).write_text('x')"),
        guarded(f"import os\nos.chdir('/tmp')\nopen({os.path.basename(path)!r}, 'w').write('x')"),
        guarded(f"import os\nos.mkdir({path!r})"),
        guarded(f"open('../{os.path.basename(path)}', 'w').write('x')"),
        guarded(f"open('sub/../../{os.path.basename(path)}', 'w').write('x')"),
        # rebinding what a naive hook would call must not open a hole
        guarded(f"import os\nos.path.realpath = lambda p: os.getcwd()\nopen({path!r}, 'w').write('x')"),
        # inside the fresh working directory writing is fine
        ("open('scratch.txt', 'w').write('ok')", ["open('scratch.txt').read() == 'ok'"]),
    ]
    assert run_tests(programs, timeout_s=FAST) == [0.0] * 9 + [1.0]
    assert not os.path.exists(path)


def test_deleting_host_files_is_refused(tmp_path):
    victim = tmp_path / "keep.txt"
    victim.write_text("x")
    programs = [
        guarded(f"import os\nos.remove({str(victim)!r})"),
        guarded(f"import os\nos.rename({str(victim)!r}, {str(victim) + '.moved'!r})"),
        guarded(f"import shutil\nshutil.rmtree({str(tmp_path)!r})"),
    ]
    assert run_tests(programs, timeout_s=FAST) == [0.0, 0.0, 0.0]
    assert victim.read_text() == "x"


def test_network_connections_are_refused():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.3)
    port = server.getsockname()[1]
    programs = [
        guarded(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"),
        guarded(f"import socket\nsocket.socket().connect(('127.0.0.1', {port}))"),
        guarded(f"import _socket\ns = _socket.socket()\ns.connect(('127.0.0.1', {port}))"),
        guarded(f"import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/', timeout=1)"),
    ]
    try:
        assert run_tests(programs, timeout_s=2.0) == [0.0] * 4
        with pytest.raises(socket.timeout):
            server.accept()
    finally:
        server.close()


def test_processes_and_threads_are_refused():
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        programs = [
            guarded("import os\nos.system('true')"),
            guarded("import subprocess"),
            guarded("import os\nos.fork()"),
            guarded(f"import os, signal\nos.kill({sleeper.pid}, signal.SIGKILL)"),
            guarded("import threading\nthreading.Thread(target=print).start()"),
            guarded("import ctypes"),
            guarded("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))"),
        ]
        assert run_tests(programs, timeout_s=FAST) == [0.0] * 7
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_programs_are_isolated_from_each_other():
    programs = [
        ("import builtins\nbuiltins.len = None\nshared = 1", ["True"]),
        ("x = 0", ["len([1, 2]) == 2", "'shared' not in globals()"]),
    ]
    assert run_tests(programs, timeout_s=FAST) == [1.0, 1.0]


def test_printed_text_cannot_forge_results():
    # Results travel on a dedicated pipe; progress-like lines on stdout must be ignored.
    programs = [
        ("print('P 1 1')\nprint('D 1')\nimport sys\nsys.stdout.flush()", ["True"]),
        ("x = 0", ["x == 1"]),
    ]
    assert run_tests(programs, timeout_s=FAST) == [1.0, 0.0]


def test_a_step_sized_batch_runs_in_one_quick_child():
    programs = [(f"def f(x):\n    return x * {i}", [f"f(2) == {2 * i}", "f(0) == 0"]) for i in range(64)]
    start = time.monotonic()
    assert run_tests(programs) == [1.0] * 64
    assert time.monotonic() - start < 5
