"""Two sweep drivers on one registry: one runs, the other ends naming it, and nothing is lost."""

import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.lease import DriverBusy, Lease
from grpo_lab.execution.tracking import Tracker
from tests.execution.sweeps import write_matrix

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_drivers_started_together_lose_nothing(tmp_path, registry_url):
    matrix = write_matrix(tmp_path, "twice", seeds=[0, 1], tricks=["baseline"])
    ws = tmp_path / "ws"
    cmd = [sys.executable, "-m", "grpo_lab.cli", "sweep", str(matrix), "--workspace", str(ws), "--db", registry_url,
           "--skip-preflight", "--max-parallel", "1"]
    logs = [tmp_path / f"driver{i}.log" for i in range(2)]
    env = {**os.environ, "COLUMNS": "300"}
    drivers = [subprocess.Popen(cmd, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env) for log in logs]
    codes = [d.wait(timeout=600) for d in drivers]
    assert sorted(codes) == [0, 2], [log.read_text()[-2000:] for log in logs]
    winner, loser = (0, 1) if codes[0] == 0 else (1, 0)
    said = logs[loser].read_text()
    assert "another sweep driver is running" in said and f"pid {drivers[winner].pid}" in said
    assert socket.gethostname() in said and "Traceback" not in said

    with reg.connect(registry_url)() as s:
        sweep = reg.get_sweep(s, "twice")
        assert sweep.status == "finished" and len(sweep.cells) == 2
        assert all(c.run.status == "finished" and len(c.run.attempts) == 1 for c in sweep.cells)
        parent_id = sweep.mlflow_parent_id
    tracker = Tracker(f"sqlite:///{ws / 'mlflow.db'}")
    assert tracker.client.get_run(parent_id).info.status == "FINISHED"
    kids = tracker.client.search_runs([tracker.experiment_id], f"tags.`mlflow.parentRunId` = '{parent_id}'")
    assert len(kids) == 2 and len(tracker.client.search_runs([tracker.experiment_id])) == 3

    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)  # the lease was released
    assert again.returncode == 0 and "executed 0 attempt(s)" in again.stdout


def test_lease_names_a_live_holder_and_takes_over_a_dead_one(tmp_path):
    Session = reg.connect(f"sqlite:///{tmp_path / 'registry.db'}")
    with Session() as s:
        s.add(reg.DriverLease(id=1, token="other", pid=4242, host="node-7", sweep="big"))
        s.commit()
    with pytest.raises(DriverBusy, match="pid 4242 on host node-7, sweep 'big'"):
        Lease(Session, "mine")
    with Session() as s:  # the same holder, silent for longer than STALE: it died with its node
        s.get(reg.DriverLease, 1).beat_at = reg.now() - timedelta(minutes=5)
        s.commit()
    lease = Lease(Session, "mine")
    with pytest.raises(DriverBusy, match=f"pid {os.getpid()} on host {socket.gethostname()}"):
        Lease(Session, "third")
    lease.release()
    with Session() as s:  # a holder on this host whose process is gone is taken over at once
        s.add(reg.DriverLease(id=1, token="dead", pid=2**22 + 7, host=socket.gethostname(), sweep="killed"))
        s.commit()
    Lease(Session, "mine").release()


@pytest.mark.slow
def test_mlflow_store_created_by_two_processes_at_once(tmp_path):
    code = "import sys; from grpo_lab.execution.tracking import Tracker; Tracker(sys.argv[1])"
    for i in range(2):
        uri = f"sqlite:///{tmp_path / f'mlflow{i}.db'}"
        procs = [subprocess.Popen([sys.executable, "-c", code, uri], cwd=ROOT, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        errors = [p.communicate(timeout=300)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], errors


def test_status_after_a_killed_driver_shows_its_local_runs_interrupted_not_running(tmp_path):
    from typer.testing import CliRunner

    from grpo_lab.cli import app
    from tests.execution.test_registry import _open

    ws = tmp_path / "ws"
    ws.mkdir()
    session, sweep = _open(tmp_path, reg.default_url(ws), "killed", seeds=[0])
    local, slurm = (c.run for c in sorted(sweep.cells, key=lambda c: c.position))
    reg.begin_attempt(session, local, "local", "h", 0)
    reg.begin_attempt(session, slurm, "slurm", "h", 0).job_id = "12345"  # its job may outlive the driver
    session.add(reg.DriverLease(id=1, token="dead", pid=2**22 + 7, host=socket.gethostname(), sweep="killed"))
    session.commit()

    def status(*args: str) -> str:
        res = CliRunner().invoke(app, ["status", *args, "--workspace", str(ws)])
        assert res.exit_code == 0, res.output
        return res.output

    rows = {line.split("│")[1].strip(): line for line in status("killed").splitlines() if "│" in line}
    assert "interrupted" in rows[local.run_id] and "re-run the sweep to resume" in rows[local.run_id]
    assert "running" in rows[slurm.run_id]
    counts = next(line for line in status().splitlines() if "killed" in line).split("│")
    assert [c.strip() for c in counts[2:4]] == ["1", "1"]  # pending, running
    session.get(reg.DriverLease, 1).pid = os.getpid()  # a live driver: its runs are running
    session.commit()
    assert "interrupted" not in status("killed")
    counts = next(line for line in status().splitlines() if "killed" in line).split("│")
    assert [c.strip() for c in counts[2:4]] == ["0", "2"]
