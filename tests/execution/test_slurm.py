"""Sweeps through a real Slurm cluster (the `slurm` fixture: munged, slurmctld, slurmd on this box),
submitted with real sbatch by the project's SlurmRunner: job arrays and a job per run, scancel
mid-run, and a driver killed with kill -9 while its jobs are queued and running; and a DeepSpeed
run over two srun tasks."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.base import SlurmOptions
from grpo_lab.execution.final_evals import run_final_evals
from grpo_lab.execution.runners.slurm import SlurmRunner
from grpo_lab.execution.sweep import SweepOptions, execute_sweep, open_sweep, plan_for
from grpo_lab.rundir import RunDir
from tests.execution.sweeps import write_matrix

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
FOUR = {"seeds": [0, 1], "tricks": ["baseline", {"singles": ["ema_reference"]}]}  # 4 cells
OVERHEAD = 45  # seconds a job spends outside execute: sbatch script, srun, Python and torch imports


def options(**over) -> SlurmOptions:
    return SlurmOptions(cluster="slurm", cpus_per_task=1, gpus_per_node=0, timeout_min=10, partition="debug", **over)


def open_matrix(tmp_path: Path, name: str, retries: int = 1, **matrix):
    path = write_matrix(tmp_path, name, **matrix)
    opts = SweepOptions(workspace=tmp_path / "ws", retries=retries)
    session = reg.connect(reg.default_url(opts.workspace))()
    return session, open_sweep(session, plan_for(path, opts), path, opts, env={}), opts


def elapsed(job: dict[str, str]) -> float:
    return (datetime.fromisoformat(job["EndTime"]) - datetime.fromisoformat(job["StartTime"])).total_seconds()


def heartbeat(run_dir: Path) -> dict:
    try:
        return json.loads((run_dir / "heartbeat.json").read_text())
    except (OSError, ValueError):
        return {}


def test_four_cell_job_array_finishes(slurm, tmp_path):
    session, sweep, opts = open_matrix(tmp_path, "array", **FOUR)
    runner = SlurmRunner(options(array=True), opts.workspace, slots=4)
    try:
        result = execute_sweep(session, sweep, runner, opts)
        # --decide's eval-only attempts, as one more array on the cluster
        failed = run_final_evals(sweep, runner, {(c.model, c.task): 4 for c in sweep.cells}, say=lambda s: None)
    finally:
        runner.close()
    assert result.counts["finished"] == 4, [c.run.error for c in sweep.cells]
    assert failed == {} and all(RunDir(c.run.out_dir).final_eval(4) is not None for c in sweep.cells)
    job_ids = [c.run.attempts[-1].job_id for c in sweep.cells]
    assert len({j.split("_")[0] for j in job_ids}) == 1 and len(set(job_ids)) == 4  # one array, a task per run
    ended = slurm.completed()
    for cell in sweep.cells:
        attempt = cell.run.attempts[-1]
        assert attempt.runner == "slurm" and attempt.status == "finished"
        assert json.loads((Path(cell.run.out_dir) / "summary.json").read_text())["run_id"] == cell.run_id
        assert ended[attempt.job_id]["JobState"] == "COMPLETED"


def when(run_dir: Path, attempt: int, step: int, action) -> threading.Thread:
    """Call action() once the heartbeat of `attempt` reaches `step`."""
    def watch():
        deadline = time.time() + 300
        while time.time() < deadline:
            beat = heartbeat(run_dir)
            if beat.get("attempt") == attempt and beat.get("step", 0) >= step:
                return action()
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def scancel(slurm) -> None:
    for job in slurm.run("squeue", "-h", "-n", "grpo-lab", "-o", "%i").split():
        slurm.run("scancel", job)


def kill_job_processes(ws: Path) -> None:
    """SIGKILL the job's Python, as an OOM kill or a lost node does: Slurm sees the job fail."""
    found = subprocess.run(["pgrep", "-f", f"submitit.core._submit {ws}"], capture_output=True, text=True)
    for pid in found.stdout.split():
        os.kill(int(pid), signal.SIGKILL)


def test_scancel_preempts_a_killed_job_is_interrupted_and_the_next_sweep_resumes(slurm, tmp_path):
    steps = 24
    session, sweep, opts = open_matrix(tmp_path, "cancel", retries=0, tricks=["baseline"], steps=steps,
                                       checkpoint_every=5)
    run = sweep.cells[0].run
    run_dir = Path(run.out_dir)
    runner = SlurmRunner(options(), opts.workspace, slots=1)
    when(run_dir, 1, 3, lambda: scancel(slurm))  # SIGTERM to the job, as a preemption sends
    when(run_dir, 2, 7, lambda: kill_job_processes(opts.workspace))  # no chance to checkpoint
    try:
        first = execute_sweep(session, sweep, runner, opts)
    finally:
        runner.close()
    assert first.counts["pending"] == 1, [(a.status, a.start_step, a.job_id, a.error) for a in run.attempts]
    preempted, interrupted = run.attempts
    assert (preempted.status, interrupted.status) == ("preempted", "interrupted"), run.attempts[-1].error
    assert preempted.gpu_hours > 0 and interrupted.gpu_hours > 0  # both attempts' hours are kept
    assert interrupted.start_step >= 3  # resumed where the preemption checkpointed, not from step 0
    assert "left the queue without a result" in interrupted.error

    runner = SlurmRunner(options(), opts.workspace, slots=1)
    try:
        again = execute_sweep(session, sweep, runner, opts)
    finally:
        runner.close()
    assert again.counts["finished"] == 1
    last = run.attempts[-1]
    assert last.status == "finished" and last.start_step >= interrupted.start_step
    logged = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert logged == list(range(steps))  # no step logged twice, none missing


def cli_sweep(matrix: Path, ws: Path, profile: Path, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "grpo_lab.cli", "sweep", str(matrix), "--workspace", str(ws), "--runner", str(profile),
           "--skip-preflight"]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "COLUMNS": "200"})


def attempts(ws: Path, name: str) -> list[list[tuple]]:
    with reg.connect(reg.default_url(ws))() as s:
        sweep = reg.get_sweep(s, name)
        if sweep is None:
            return []
        return [[(a.status, a.job_id, a.gpu_hours, a.started_at) for a in c.run.attempts] for c in sweep.cells]


def test_kill_9_driver_then_restart_adopts_live_jobs(slurm, tmp_path):
    matrix = write_matrix(tmp_path, "adopt", **FOUR, steps=8)
    ws, profile = tmp_path / "ws", tmp_path / "slurm.yaml"
    profile.write_text("kind: slurm\nmax_parallel: 4\nslurm:\n  cluster: slurm\n  partition: debug\n"
                       "  cpus_per_task: 1\n  gpus_per_node: 0\n  timeout_min: 10\n")
    driver = cli_sweep(matrix, ws, profile, tmp_path / "first.log")
    deadline = time.time() + 300
    while time.time() < deadline:  # every cell submitted, some running, some still queued
        rows = attempts(ws, "adopt") if (ws / "registry.db").exists() else []
        queued = slurm.run("squeue", "-h", "-t", "PD", "-o", "%i").split()
        if len(rows) == 4 and all(r and r[-1][1] for r in rows) and queued:
            break
        assert driver.poll() is None, (tmp_path / "first.log").read_text()
        time.sleep(0.2)
    else:
        pytest.fail("the driver did not submit every cell in time")
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    submitted = {r[-1][1] for r in rows}
    assert set(slurm.run("squeue", "-h", "-o", "%i").split()) <= submitted  # the jobs outlived their driver

    again = cli_sweep(matrix, ws, profile, tmp_path / "second.log")
    assert again.wait(timeout=600) == 0, (tmp_path / "second.log").read_text()
    rows = attempts(ws, "adopt")
    said = (tmp_path / "second.log").read_text()[-3000:]
    assert all(len(r) == 1 and r[0][0] == "finished" for r in rows), (rows, said)  # adopted, none submitted twice
    ended = slurm.completed()
    assert {r[0][1] for r in rows} == submitted and submitted <= set(ended), (rows, sorted(ended), said)
    for (status, job, hours, _), in rows:  # the job's elapsed time covers the attempt's own wall time
        wall = hours * 3600
        assert wall - 1 <= elapsed(ended[job]) <= wall + OVERHEAD, (job, wall, ended[job])
    assert_mlflow_complete(ws, "adopt")


def assert_mlflow_complete(ws: Path, name: str) -> None:
    from mlflow import MlflowClient

    from grpo_lab.execution.tracking import default_tracking_uri

    with reg.connect(reg.default_url(ws))() as s:
        sweep = reg.get_sweep(s, name)
        parent, run_ids = sweep.mlflow_parent_id, {c.run_id for c in sweep.cells}
    client = MlflowClient(tracking_uri=default_tracking_uri(ws))
    experiments = [e.experiment_id for e in client.search_experiments()]
    kids = client.search_runs(experiments, f"tags.`mlflow.parentRunId` = '{parent}'")
    assert {k.data.tags["run_id"] for k in kids} == run_ids
    assert {k.data.tags["status"] for k in kids} == {"finished"}


def first_step(out: Path) -> dict:
    return json.loads((out / "metrics.jsonl").read_text().splitlines()[0])


def test_deepspeed_over_two_slurm_tasks_matches_one_process_first_step(slurm, tmp_path):
    pytest.importorskip("deepspeed", reason="deepspeed is not installed (pip install deepspeed)")
    import yaml

    from tests.conftest import tiny_cfg

    cfg = tiny_cfg(steps=1, eval={"every": 100}, backend={"name": "deepspeed", "zero_stage": 2})
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    # no launcher variables: the two tasks must find each other from Slurm's alone
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    launch = [sys.executable, "-m", "grpo_lab.trainer.launch", str(tmp_path / "run.yaml")]
    runs = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for cmd in ([*launch, str(tmp_path / "one")],  # side by side: the pair and the single run
                        ["srun", "--ntasks=2", "--cpus-per-task=1", "--kill-on-bad-exit=1", *launch, str(tmp_path / "two")])]
    for run in runs:
        _, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
    one, rank0, rank1 = (first_step(d) for d in (tmp_path / "one", tmp_path / "two", tmp_path / "two" / "rank1"))
    assert rank0["reward/mean"] == one["reward/mean"]  # rank 0 samples what the single process samples
    for key in ("loss/policy", "loss/total", "kl/mean"):  # the parity tolerance of tests/trainer/test_backend.py
        assert rank0[key] == pytest.approx(one[key], rel=1e-5, abs=1e-9), key
    assert rank0["train/grad_norm"] == rank1["train/grad_norm"]  # one all-reduced gradient: one process group
    assert rank0["reward/mean"] != rank1["reward/mean"] or rank0["loss/policy"] != rank1["loss/policy"]  # own prompts


def test_a_screened_sweep_pauses_and_resumes_through_slurm_jobs(slurm, tmp_path, monkeypatch):
    """--screen on Slurm: each rung's attempts are job-array tasks that pause at the rung and the
    next rung's jobs resume them (tests/execution/screened.py says what must hold)."""
    from tests.execution.screened import RUNGS, check_screened, force_drop, screen_matrix, screened_once

    force_drop(monkeypatch)
    ws = tmp_path / "ws"
    sweep, session, dropped = screened_once(screen_matrix(tmp_path), ws, RUNGS,
                                            lambda: SlurmRunner(options(array=True), ws, slots=2))
    check_screened(sweep, dropped)
    assert {a.runner for c in sweep.cells for a in c.run.attempts} == {"slurm"}
    assert all(a.job_id for c in sweep.cells for a in c.run.attempts)
    session.close()
