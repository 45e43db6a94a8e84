"""Ctrl-C on a sweep: it stops within seconds with one line saying how to resume, no traceback on
the screen or in the attempt logs, and its open attempts are recorded as interrupted."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.execution.sweeps import write_matrix
from tests.execution.test_sweep_kill import heartbeat_step, state

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def ignore_sigint() -> None:
    """What a non-interactive shell does to a job it starts with '&'."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


# Ctrl-C in a terminal signals the driver and its workers (one process group); `kill -INT` of a
# driver started in the background by a script reaches a process that inherited SIGINT ignored
@pytest.mark.parametrize("decide, background", [(False, False), (True, True)])
def test_ctrl_c_stops_the_sweep_with_one_line_and_no_traceback(tmp_path, decide, background):
    matrix = write_matrix(tmp_path, "killme", seeds=[0, 1], tricks=["baseline"], steps=400)
    ws = tmp_path / "ws"
    cmd = [sys.executable, "-m", "grpo_lab.cli", "sweep", str(matrix), "--workspace", str(ws), "--skip-preflight",
           *(["--decide", "--budget", "1"] if decide else [])]
    log = tmp_path / "out.log"
    driver = subprocess.Popen(cmd, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
                              preexec_fn=ignore_sigint if background else None)
    try:
        deadline = time.time() + 600
        while not any(heartbeat_step(ws, rid) >= 3 for rid, *_ in (state(ws) if (ws / "registry.db").exists() else [])):
            assert driver.poll() is None and time.time() < deadline, log.read_text()
            time.sleep(0.3)
        if background:
            os.kill(driver.pid, signal.SIGINT)
        else:
            os.killpg(driver.pid, signal.SIGINT)
        t0 = time.time()
        assert driver.wait(timeout=60) == 130
        assert time.time() - t0 < 30
    finally:
        if driver.poll() is None:  # it ignored the signal: nothing of it may outlive the test
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    lines = log.read_text().splitlines()
    assert lines[-1] == "interrupted: 0 runs finished, re-run the same command to resume"
    assert "Traceback" not in log.read_text()
    for attempt_log in ws.glob("runs/*/attempt-*.log"):
        assert "KeyboardInterrupt" not in attempt_log.read_text()
    assert {a[0] for *_, attempts in state(ws) for a in attempts} == {"interrupted"}
