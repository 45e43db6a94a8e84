"""A sweep killed with SIGKILL and started again finishes, executing no finished run twice."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.screen import recorded
from tests.execution.sweeps import freeze_workers, poll_until, workers, write_matrix

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
STEPS = 48  # long enough that the second run cannot finish between two polls on an idle box


def start(matrix: Path, ws: Path, log: Path, *more: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "grpo_lab.cli", "sweep", str(matrix), "--workspace", str(ws), "--max-parallel", "1",
           *more]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "COLUMNS": "200"})


def state(ws: Path, name: str = "killme") -> list[tuple[str, str, list]]:
    Session = reg.connect(reg.default_url(ws))
    with Session() as s:
        sweep = reg.get_sweep(s, name)
        if sweep is None:
            return []
        return [(c.run_id, c.run.status, [(a.status, a.start_step, a.gpu_hours) for a in c.run.attempts])
                for c in sorted(sweep.cells, key=lambda c: c.position)]


def heartbeat_step(ws: Path, run_id: str) -> int:
    try:
        return json.loads((ws / "runs" / run_id / "heartbeat.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return 0


def wait_for_kill_point(driver: subprocess.Popen, ws: Path, name: str, log: Path, ready) -> list:
    """The sweep's rows (state()) once ready(rows) holds."""
    def rows():
        found = state(ws, name) if (ws / "registry.db").exists() else []
        return found if ready(found) else None
    return poll_until(driver, log, rows)


def test_kill_9_then_restart_runs_each_finished_run_once(tmp_path):
    matrix = write_matrix(tmp_path, "killme", seeds=[0, 1], tricks=["baseline"], steps=STEPS)
    ws = tmp_path / "ws"
    driver = start(matrix, ws, tmp_path / "first.log")
    # wait: first run finished, second one past its first checkpoint
    rows = wait_for_kill_point(driver, ws, "killme", tmp_path / "first.log", lambda rows: len(rows) == 2 and
                               rows[0][1] == "finished" and heartbeat_step(ws, rows[1][0]) >= 5)
    freeze_workers(ws)
    first_id, second_id = rows[0][0], rows[1][0]
    beat = heartbeat_step(ws, second_id)
    assert heartbeat_step(ws, second_id) < STEPS, "the second run ended before the kill point"
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    for _ in range(50):  # the worker gets SIGKILL from the kernel when its parent dies
        if not workers(ws):
            break
        time.sleep(0.2)
    assert not workers(ws), "a worker outlived its killed driver"

    again = start(matrix, ws, tmp_path / "second.log")
    assert again.wait(timeout=600) == 0, (tmp_path / "second.log").read_text()
    rows = dict((rid, (status, attempts)) for rid, status, attempts in state(ws))
    assert rows[first_id][0] == "finished" and len(rows[first_id][1]) == 1  # not executed twice
    status, attempts = rows[second_id]
    assert status == "finished" and [a[0] for a in attempts] == ["interrupted", "finished"]
    assert attempts[0][2] > 0  # the interrupted attempt's hours are kept
    # recorded where it resumed: its last checkpoint (every 2 steps; the kill may fall between the
    # heartbeat of a step and its checkpoint), not the heartbeat's step and not step 0
    assert attempts[1][1] >= 4 and attempts[1][1] % 2 == 0 and beat - 3 <= attempts[1][1] <= beat
    steps = [json.loads(line)["step"] for line in (ws / "runs" / second_id / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(STEPS))


def test_kill_9_mid_rung_then_restart_finishes_the_screening_training_no_step_twice(tmp_path):
    """--screen killed while its run trains toward the second rung (step 72): the restarted sweep
    does not decide the first rung again, resumes the run from its checkpoint to the second rung,
    then to the end; each step is in metrics.jsonl once. The rungs are far apart (steps 12 and 72 of
    96) so that a warm, idle box cannot train through the kill window between two polls."""
    matrix = write_matrix(tmp_path, "killscr", seeds=[0], tricks=["baseline"], steps=2 * STEPS,
                          eval={"every": 4, "problems": 8, "samples": 2, "k": [1, 2]})
    ws, screen = tmp_path / "ws", ("--screen", "--rungs", "0.125,0.75")
    driver = start(matrix, ws, tmp_path / "first.log", *screen)
    # wait: paused at step 12 (rung 1), resumed and past step 14
    rows = wait_for_kill_point(driver, ws, "killscr", tmp_path / "first.log", lambda rows: bool(rows) and
                               len(rows[0][2]) >= 2 and heartbeat_step(ws, rows[0][0]) >= 14)
    freeze_workers(ws)
    run_id = rows[0][0]
    assert heartbeat_step(ws, run_id) < 72, "the run reached the second rung before the kill point"
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()

    again = start(matrix, ws, tmp_path / "second.log", *screen)
    assert again.wait(timeout=600) == 0, (tmp_path / "second.log").read_text()
    (_, status, attempts), = state(ws, "killscr")
    assert status == "finished" and [a[0] for a in attempts] == ["paused", "interrupted", "paused", "finished"]
    assert [a[1] for a in attempts][:2] == [0, 12] and attempts[3][1] == 72
    assert attempts[1][2] > 0  # the interrupted attempt's hours are kept
    with reg.connect(reg.default_url(ws))() as s:
        record = recorded(reg.get_sweep(s, "killscr"))
    assert [r["step"] for r in record["rungs"]] == [12, 72]
    steps = [json.loads(line)["step"] for line in (ws / "runs" / run_id / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(2 * STEPS))
