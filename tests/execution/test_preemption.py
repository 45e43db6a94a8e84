"""Preemption is graceful: a signalled worker checkpoints at the step boundary, exits with its own
status, is recorded `preempted` (not a failure, not a try) and resumes to the very metrics of an
uninterrupted run."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.local import LocalRunner
from grpo_lab.execution.sweep import SweepOptions, execute_sweep, open_sweep, plan_for
from grpo_lab.execution.worker import PREEMPTED_EXIT, execute
from tests.conftest import tiny_cfg
from tests.execution.sweeps import write_matrix

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
STEPS = 12


def metrics(run_dir: Path) -> list[dict]:
    """Per-step metrics without wall-clock timings (the only values a resumed run may differ in)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(("timing/", "cpu/"))} for row in rows]  # clocks vary


def heartbeat_step(run_dir: Path) -> int:
    try:
        return json.loads((run_dir / "heartbeat.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return 0


def signal_at(run_dir: Path, step: int, sig: int, pid_of) -> threading.Thread:
    """Send `sig` to the process pid_of() once the run's heartbeat reaches `step`."""
    def watch():
        deadline = time.time() + 300
        while heartbeat_step(run_dir) < step and time.time() < deadline:
            time.sleep(0.05)
        for pid in pid_of():
            os.kill(pid, sig)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> list[dict]:
    """The uninterrupted run's metrics."""
    from grpo_lab.trainer.grpo import train

    out = tmp_path_factory.mktemp("reference")
    train(tiny_cfg(steps=STEPS, checkpoint_every=5), out)
    return metrics(out)


def test_sigusr1_checkpoints_exits_75_and_resumes_bit_identically(tmp_path, reference):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.json").write_text(json.dumps(tiny_cfg(steps=STEPS, checkpoint_every=5).model_dump(mode="json")))
    cmd = [sys.executable, "-m", "grpo_lab.execution.worker", str(run_dir), "1", "1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    signal_at(run_dir, 2, signal.SIGUSR1, lambda: [proc.pid]).join()
    assert proc.wait(timeout=300) == PREEMPTED_EXIT, proc.stderr.read().decode()[-2000:]
    first = json.loads((run_dir / "result-1.json").read_text())
    assert first["status"] == "preempted" and first["summary"] is None
    stopped_at = heartbeat_step(run_dir)
    assert 2 <= stopped_at < STEPS  # where the signal landed; the resume below starts exactly there
    assert not (run_dir / "summary.json").exists()

    second = execute(run_dir, 2)
    assert second["status"] == "finished" and second["start_step"] == stopped_at
    assert metrics(run_dir) == reference  # every step once, each with the uninterrupted run's values


def test_sigterm_under_a_sweep_is_preempted_and_not_a_retry(tmp_path, reference):
    matrix = write_matrix(tmp_path, "preempt", tricks=["baseline"], steps=STEPS, checkpoint_every=5)
    ws = tmp_path / "ws"
    opts = SweepOptions(workspace=ws, retries=0)  # a preemption counted as a try would leave the run failed
    session = reg.connect(reg.default_url(ws))()
    sweep = open_sweep(session, plan_for(matrix, opts), matrix, opts, env={})
    run_dir = Path(sweep.cells[0].run.out_dir)
    runner = LocalRunner(slots=1)
    # the runner's own pid: a pgrep under load could land after the last step
    signal_at(run_dir, 2, signal.SIGTERM, lambda: [proc.pid for _, proc, *_ in list(runner.procs.values())])
    try:
        result = execute_sweep(session, sweep, runner, opts)
    finally:
        runner.close()
    run = sweep.cells[0].run
    assert result.counts["finished"] == 1, run.error
    assert [a.status for a in run.attempts] == ["preempted", "finished"]
    assert run.attempts[0].gpu_hours > 0 and run.wasted_gpu_hours == 0  # its steps were all kept
    assert run.attempts[1].start_step >= 2
    assert metrics(run_dir) == reference


def test_sigterm_to_a_ray_worker_is_preempted_and_resumed(tmp_path, reference):
    ray = pytest.importorskip("ray")
    from grpo_lab.execution.runners.base import RayOptions
    from grpo_lab.execution.runners.ray_runner import RayRunner

    matrix = write_matrix(tmp_path, "raypreempt", tricks=["baseline"], steps=STEPS, checkpoint_every=5)
    opts = SweepOptions(workspace=tmp_path / "ws", retries=0)
    session = reg.connect(reg.default_url(opts.workspace))()
    sweep = open_sweep(session, plan_for(matrix, opts), matrix, opts, env={})
    run_dir = Path(sweep.cells[0].run.out_dir)

    def ray_task_worker() -> list[int]:  # Ray titles a worker process by the task it runs
        found = subprocess.run(["pgrep", "-f", "ray::execute"], capture_output=True, text=True)
        return [int(pid) for pid in found.stdout.split()]

    signal_at(run_dir, 2, signal.SIGTERM, ray_task_worker)
    runner = RayRunner(RayOptions(num_cpus=1))
    try:
        result = execute_sweep(session, sweep, runner, opts)
    finally:
        runner.close()
        ray.shutdown()
    run = sweep.cells[0].run
    assert result.counts["finished"] == 1, [(a.status, a.error) for a in run.attempts]
    assert [a.status for a in run.attempts] == ["preempted", "finished"]
    assert metrics(run_dir) == reference
