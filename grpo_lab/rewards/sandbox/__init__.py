"""Run untrusted Python (model completions) against tests, with grading it cannot forge.

Two guarantees, each from a different place:
- the host: every program runs in a process of its own, forked from a locked-down template
  inside bubblewrap that shows only the standard library (``isolation.py``), under a seccomp
  filter (``_seccomp.py``), hard rlimits and a wall-clock deadline fixed when it starts
  (``pool.py``); its process is killed, and seen reaped, before its score is returned, and the
  whole sandbox runs in a cgroup of its own where the machine allows (``template.py``,
  ``cgroup.py``);
- the verdict: the program's process only computes the values of the test inputs and sends
  them as plain data; expected values never enter it, and every comparison runs here, in the
  trainer (``grading.py``), at a cost linear in what it sent (``values.py``).

``run_tests(programs)`` is the one-call API; ``sandbox_for`` shares one template per
(isolation, memory) within a process.
"""

from __future__ import annotations

import atexit

from grpo_lab.rewards.sandbox.grading import BadTestError, compile_test
from grpo_lab.rewards.sandbox.isolation import (
    ISOLATIONS,
    SandboxError,
    UnsafeSandboxWarning,
    check,
)
from grpo_lab.rewards.sandbox.pool import Sandbox
from grpo_lab.rewards.sandbox.recovery import ForkSafeLock

__all__ = ["ISOLATIONS", "Sandbox", "SandboxError", "BadTestError", "UnsafeSandboxWarning",
           "check_for", "compile_test", "run_tests", "sandbox_for"]

_SANDBOXES: dict[tuple[str, int], Sandbox] = {}
_LOCK = ForkSafeLock()  # the trainer's threads may ask for the sandbox at once
SANDBOXED_TASKS = ("code", "humaneval")


def check_for(tasks: list[str], isolation: str, verifier: str = "extract") -> None:
    """Before anything is written: can this machine run the sandbox these tasks need? rg:<dataset>
    and math under math-verify score answers in the scoring worker (``rewards/scoring``), which
    runs in the same isolation."""
    if isolation == "unsafe-local":
        return
    if any(t in SANDBOXED_TASKS for t in tasks):
        check(isolation)
    if any(t.startswith("rg:") or (t == "math" and verifier == "math-verify") for t in tasks):
        from grpo_lab.rewards.scoring import check as check_scoring

        check_scoring(isolation)


def sandbox_for(isolation: str = "bwrap", memory_mb: int = 256) -> Sandbox:
    """The process-wide sandbox of this kind, started on first use."""
    key = (isolation, memory_mb)
    with _LOCK:
        if key not in _SANDBOXES:
            _SANDBOXES[key] = Sandbox(isolation, memory_mb)
        return _SANDBOXES[key]


@atexit.register
def _close_all() -> None:
    for sandbox in _SANDBOXES.values():
        sandbox.close()


def run_tests(programs: list[tuple[str, list[str]]], timeout_s: float = 2.0, memory_mb: int = 256,
              isolation: str = "bwrap") -> list[float]:
    """Fraction of tests passed per program, in input order.

    Each program is Python source; each test ends in ``assert EXPR`` or ``EXPR`` (see
    ``grading``). ``timeout_s`` bounds one program including all its tests; a program with no
    tests scores 0.0 without being run.
    """
    if not programs:
        return []
    compiled = [(code, [compile_test(t) for t in tests]) for code, tests in programs]
    passed = sandbox_for(isolation, memory_mb).run(compiled, timeout_s)
    return [sum(p) / len(p) if p else 0.0 for p in passed]
