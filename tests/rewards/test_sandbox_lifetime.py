"""No program outlives its verdict: escapers are gone before scores return, mates keep theirs.

An escaper is a correct program that patches the harness's own ``os.write`` so that, at its
end mark, it keeps running instead of exiting: it spins, closes its socket and spins, sleeps
holding memory, or tries to fork. Each first takes ``MARK_MB`` of memory it touches, so a
survivor shows in its resident size. Checked from the host right after ``run`` returns: no
process of the sandbox (listed in its cgroup) holds that memory, the cgroup is back to its
memory, honest batch-mates keep their exact scores, and the next honest batch costs what an
honest batch costs.
"""

import os
import statistics
import subprocess
import time

import pytest

from grpo_lab.rewards.sandbox import Sandbox, compile_test, wire

TIMEOUT = 1.0
MARK_MB = 48
HONEST = [("def add(a, b):\n    return a + b", ["add(1, 2) == 3", "assert add(-1, 1) == 0"]),
          ("def add(a, b):\n    return a - b", ["add(1, 2) == 3", "add(0, 0) == 0"])]
ESCAPE = """import os, time
_write = os.write
def write(fd, data):
    if data == b"E":
        {at_end}
        held = b"x" * ({mb} << 20)
        {then}
    return _write(fd, data)
os.write = write
def add(a, b):
    return a + b
# {n}"""
SPIN = "while True:\n            pass"
FORKS = "for _ in range(50):\n            try:\n                os.fork()\n            except OSError:\n" \
        "                pass\n        " + SPIN
ESCAPERS = {
    "spin": ("_write(fd, data)", MARK_MB, SPIN),
    "close-then-spin": ("os.close(fd)", MARK_MB, SPIN),
    "sleep-holding-memory": ("_write(fd, data)", 120, "while True:\n            time.sleep(1)"),
    "fork": ("_write(fd, data)", MARK_MB, FORKS),
}


def escapers(copies: int = 2) -> list[tuple[str, list[str]]]:
    return [(ESCAPE.format(at_end=a, mb=mb, then=t, n=f"{name} {i}"), HONEST[0][1])
            for name, (a, mb, t) in ESCAPERS.items() for i in range(copies)]


def compiled(programs):
    return [(c, [compile_test(t) for t in ts]) for c, ts in programs]


def rates(box, programs) -> list[float]:
    return [sum(p) / len(p) for p in box.run(compiled(programs), TIMEOUT)]


def rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):  # gone, or a zombie (no VmRSS)
        return 0.0


def held(box) -> list[float]:
    """Resident MB of every process in the sandbox's cgroup, now."""
    return [rss_mb(pid) for pid in box.group.pids()]


@pytest.fixture(params=["bwrap", "unsafe-local"])
def box(request):
    made = Sandbox(request.param, memory_mb=256, workers=4)
    yield made
    made.close()


def honest_batch_seconds(box, honest, reps: int = 3) -> float:
    times = []
    for _ in range(reps):
        start = time.monotonic()
        assert rates(box, honest) == [1.0, 0.5] * (len(honest) // 2)
        times.append(time.monotonic() - start)
    return statistics.median(times)


def test_escapers_are_gone_before_their_scores_return_and_cost_nothing_after(box):
    honest = [(c + f"\n# {i}", t) for i in range(8) for c, t in HONEST]
    before = honest_batch_seconds(box, honest)
    assert box.group is not None, "this machine has writable cgroups: the sandbox must use one"
    baseline_bytes = box.group.usage()
    mixed = honest[:8] + escapers()
    assert rates(box, mixed) == [1.0, 0.5] * 4 + [1.0] * len(escapers())
    # right after run returns: every escaper's process is gone (each held MARK_MB or more)
    assert max(held(box)) < MARK_MB / 2, held(box)
    assert box.strays == 0
    if baseline_bytes is not None:
        assert box.group.usage() < baseline_bytes + (MARK_MB << 20)  # 8 escapers held 600 MB
    after = honest_batch_seconds(box, [(c + " again", t) for c, t in honest])
    assert after <= 3 * before + 0.05, (before, after)
    time.sleep(0.5)  # nothing comes back later either
    assert max(held(box)) < MARK_MB / 2


def test_the_cgroup_holds_only_the_template_and_its_idle_children_after_a_batch(box):
    rates(box, HONEST + escapers(copies=1))
    expected = box._template.base + len(box._idle) + len(box._warming) + box._owed
    deadline = time.monotonic() + 10
    while len(box.group.pids()) < expected and time.monotonic() < deadline:
        time.sleep(0.05)  # the children ordered for the next batch are forked meanwhile
    assert len(box.group.pids()) == expected


def test_a_process_no_child_accounts_for_is_killed_with_the_whole_cgroup(box):
    rates(box, HONEST)
    intruder = subprocess.Popen(box.group.join_prefix() + ["sleep", "60"])  # as if a program had escaped
    try:
        deadline = time.monotonic() + 5
        while intruder.pid not in box.group.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        first = box._proc
        assert rates(box, HONEST) == [1.0, 0.5]  # the batch's scores stand
        assert box.strays == 1
        assert intruder.wait(timeout=10) == -9 and first.poll() is not None
        assert rates(box, HONEST) == [1.0, 0.5] and box.strays == 1  # a fresh template
    finally:
        intruder.kill()
        intruder.wait()


def test_each_child_gets_cpu_time_just_past_its_deadline(box):
    limit = "import resource\ndef limit():\n    return resource.getrlimit(resource.RLIMIT_CPU)"
    for timeout in (TIMEOUT, 2.5):
        cpu = wire.cpu_limit(timeout, box.stretch)
        assert cpu == -(-timeout * box.stretch // 1) + 1
        programs = compiled([(limit, [f"limit() == ({cpu}, {cpu})"])])
        assert box.run(programs, timeout) == [[True]]


def test_closing_the_sandbox_removes_its_cgroup():
    box = Sandbox("bwrap", workers=2)
    rates(box, HONEST)
    dirs = list(box.group.layout.dirs.values())
    assert all(os.path.isdir(d) for d in dirs)
    box.close()
    assert not any(os.path.exists(d) for d in dirs)


def host_pid(box, pid: int) -> int:
    """Host pid of the sandbox process whose pid in the sandbox's namespace is ``pid``."""
    for candidate in box.group.pids():
        with open(f"/proc/{candidate}/status") as f:
            nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        if int(nspid[-1]) == pid:
            return candidate
    raise LookupError(pid)


def test_idle_children_killed_from_outside_are_dropped_and_the_batch_scores_exactly(box):
    rates(box, HONEST)
    deadline = time.monotonic() + 10
    while len(box.group.pids()) < box._template.base + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    victims = []
    with box._lock:  # the children ordered after the last batch, received now
        box._start_polling()
        box._receive_children()
        victims = [c[0] for c in [*box._idle, *box._warming.values()]][:2]  # ready or warming up
    hosts = [host_pid(box, pid) for pid in victims]
    for pid in hosts:  # as the OOM killer would, while the trainer generates
        os.kill(pid, 9)
    while set(hosts) & set(box.group.pids()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)  # the template reports them reaped
    assert victims and rates(box, [(c + f"\n# {i}", t) for i in range(6) for c, t in HONEST]) == [1.0, 0.5] * 6
    assert not {c[0] for c in [*box._idle, *box._warming.values()]} & set(victims) and box.strays == 0
