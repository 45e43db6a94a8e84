"""Run untrusted Python (model completions) against test strings, away from this process.

A GRPO step scores ~64 completions and one interpreter start per completion is too slow on
small machines, so a batch shares ONE child process (see ``_sandbox_child.py``): each
program gets a fresh globals dict and its own timer, and the child streams progress over a
dedicated pipe. When the child dies or hangs as a whole, the program that was running is
blamed (it keeps the tests it had already passed) and the rest are re-run in a new child,
so one bad program cannot zero the others.

What the sandbox guards is the host: no network, no writes outside a fresh temporary
working directory, no deletion, no new processes or threads, bounded memory, CPU, file size
and wall time. The child runs ``python -I -S``: only the standard library is importable,
which is all MBPP-style code needs and keeps heavy imports out of the memory limit. It is
not a tamper-proof judge: code running in the child can fake its own tests (return an
object whose ``__eq__`` is always true) and, knowing the progress protocol, write lines for
its batch-mates; no model is likely to find that, but an adversarial one could. Running the
trainer as root weakens the file-system guard to the audit hook alone, since root ignores
file permissions and RLIMIT_NPROC.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

_CHILD = str(Path(__file__).with_name("_sandbox_child.py"))
# An interpreter start under load can take seconds; it is only waited for this long when
# the child is truly stuck before its first job.
_STARTUP_S = 15.0


class SandboxError(RuntimeError):
    """The sandbox itself is broken (the child never reached user code)."""


@dataclass
class _Outcome:
    """What one child reported before it exited or was killed."""

    passed: dict[int, int] = field(default_factory=dict)
    finished: set[int] = field(default_factory=set)
    running: int | None = None
    started_any: bool = False
    stderr: str = ""

    def feed(self, line: bytes, limits: dict[int, int]) -> None:
        """Apply one progress line; malformed or out-of-range lines are ignored, since user
        code could write to the pipe too."""
        parts = line.split()
        try:
            kind, index = parts[0], int(parts[1])
        except (IndexError, ValueError):
            return
        if index not in limits:
            return
        if kind == b"S":
            self.running, self.started_any = index, True
        elif kind == b"P" and len(parts) == 3 and parts[2].isdigit():
            self.passed[index] = min(int(parts[2]), limits[index])
        elif kind == b"D" and index == self.running:
            self.finished.add(index)
            self.running = None


def run_tests(
    programs: list[tuple[str, list[str]]], timeout_s: float = 2.0, memory_mb: int = 256
) -> list[float]:
    """Fraction of tests passed per program, in input order.

    Each program is Python source; each test is an ``assert`` statement or a boolean
    expression evaluated in the program's globals. ``timeout_s`` bounds one program
    including all its tests; a program with no tests scores 0.0 without being run.
    """
    passed = [0] * len(programs)
    pending = [i for i, (_, tests) in enumerate(programs) if tests]
    while pending:
        out = _run_child(programs, pending, timeout_s, memory_mb)
        for i, k in out.passed.items():
            passed[i] = k
        done = out.finished | ({out.running} if out.running is not None else set())
        pending = [i for i in pending if i not in done]
        if pending and out.running is None:
            # Nobody to blame (the child died between jobs): isolate every remaining program.
            for i in pending:
                passed[i] = _run_alone(programs, i, timeout_s, memory_mb)
            break
    return [passed[i] / len(tests) if tests else 0.0 for i, (_, tests) in enumerate(programs)]


def _run_alone(programs: list[tuple[str, list[str]]], i: int, timeout_s: float, memory_mb: int) -> int:
    """Tests passed by program i in a child of its own; raises if the child never starts it."""
    out = _run_child(programs, [i], timeout_s, memory_mb)
    if not out.started_any:
        raise SandboxError(f"sandbox child failed before running any code:\n{out.stderr}")
    return out.passed.get(i, 0)


def _run_child(
    programs: list[tuple[str, list[str]]], indices: list[int], timeout_s: float, memory_mb: int
) -> _Outcome:
    """Run the given programs in one child, watching it until it exits or goes quiet."""
    limits = {i: len(programs[i][1]) for i in indices}
    payload = json.dumps({
        "timeout_s": timeout_s,
        "memory_mb": memory_mb,
        "cpu_s": int(timeout_s * len(indices)) + 2,
        "jobs": [[i, programs[i][0], programs[i][1]] for i in indices],
    }).encode()
    out = _Outcome()
    with tempfile.TemporaryDirectory(prefix="grpo-sandbox-") as workdir, tempfile.TemporaryFile() as err:
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", _CHILD, str(write_fd)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err,
                cwd=workdir, pass_fds=(write_fd,), start_new_session=True,
                env={"PATH": os.defpath, "HOME": workdir, "TMPDIR": workdir, "LC_ALL": "C.UTF-8"},
            )
        finally:
            os.close(write_fd)
        try:
            _send(proc, payload)
            _watch(read_fd, out, limits, timeout_s)
        finally:
            os.close(read_fd)
            _kill(proc)
        err.seek(0)
        out.stderr = err.read()[-4000:].decode(errors="replace")
    return out


def _send(proc: subprocess.Popen, payload: bytes) -> None:
    """Hand the jobs over stdin; a child that died at once shows up later as no progress."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
    except BrokenPipeError:
        pass


def _watch(read_fd: int, out: _Outcome, limits: dict[int, int], timeout_s: float) -> None:
    """Read progress lines until EOF or silence.

    The silence allowance after any line is the per-program timeout plus slack: the child's
    own timer stops pure-Python loops, so only C-level hangs or a dead timer reach it.
    """
    poller = select.poll()
    poller.register(read_fd, select.POLLIN)
    quiet_s = timeout_s + max(1.0, timeout_s)
    deadline = time.monotonic() + _STARTUP_S
    buffer = b""
    while (left := deadline - time.monotonic()) > 0:
        if not poller.poll(int(left * 1000) + 1):
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:
            return
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            out.feed(line, limits)
        deadline = time.monotonic() + quiet_s


def _kill(proc: subprocess.Popen) -> None:
    """Kill the child's whole process group (it leads its own session) and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()
