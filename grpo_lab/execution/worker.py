"""One attempt of one run, wherever it executes (a local subprocess, a Ray task, a Slurm job).

The attempt trains (or resumes from the folder's checkpoint) and writes only into its run folder:
a heartbeat after every step and a result file at the end. The run folder is locked for the
attempt's lifetime, and a folder that already holds the run's summary is reported finished
without training: this is what guarantees a finished run is never executed twice, even when a
killed sweep left an orphaned attempt behind.

Preemption is a signal: SIGTERM (what Slurm, Kubernetes and `kill` send before SIGKILL), SIGUSR1
(`--signal=USR1@60`) or SIGUSR2 (submitit's default time-limit signal). The attempt then
checkpoints at the next step boundary, reports `preempted` and exits with PREEMPTED_EXIT; the
sweep resubmits it without counting it against --retries.

Screening (`sweep --screen`) pauses a run at a rung: the driver writes the step into the run
folder (rundir.STOP_AT); the attempt stops there the way a preemption does (checkpoint at the step
boundary) and reports `paused`; a later attempt without the file resumes the same run from there.

`execute_attempt` is the attempt itself, shared by the runners (through `execute`, which adds the
signals) and by tune (tune/trial.py, whose pruning ends an attempt by an exception of its own).
"""

from __future__ import annotations

import fcntl
import signal
import socket
import threading
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from pathlib import Path

from grpo_lab.rundir import CONFIG, LOCK, RunDir, Summary
from grpo_lab.spec.config import RunConfig

PREEMPT_SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
PREEMPTED_EXIT = 75  # EX_TEMPFAIL: try again later, which is what the sweep does

class Paused(Exception):
    """The run reached the step the sweep's screening asked it to pause at (rundir.STOP_AT): it
    checkpointed there; the run continues from it when the sweep extends it."""

    def __init__(self, step: int):
        super().__init__(f"paused at step {step} (a screening rung)")
        self.step = step


OnStep = Callable[[int, dict], None]  # (step, its metrics) after every step; may raise to end the attempt
Ends = Mapping[type[Exception], str]  # an exception type raised during training -> the attempt's status


@contextmanager
def preemptible():
    """A callable that turns true once a preemption signal arrives, for the attempt's lifetime.
    Signal handlers belong to the main thread; elsewhere (a threaded executor) the attempt is
    simply not preemptible and the signal keeps its old meaning."""
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    previous = {sig: signal.signal(sig, lambda signum, _frame: caught.append(signum)) for sig in PREEMPT_SIGNALS}
    try:
        yield lambda: bool(caught)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def locked(run_dir: Path):
    """Exclusive lock on the run folder; waits for an orphaned attempt to end first."""
    with open(RunDir(run_dir) / LOCK, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def finished_summary(run_dir: Path) -> Summary | None:
    """The run's summary if a previous attempt completed it, else None."""
    folder = RunDir(run_dir)
    summary, config = folder.summary(), folder.config()
    if summary and config and summary.run_id == _run_id(config):
        return summary
    return None


def _run_id(config: dict) -> str:
    return RunConfig.model_validate(config).run_id()


def processes(cfg, devices: int) -> int:
    """Training processes for a run given `devices` GPUs: one per GPU for a DeepSpeed run on a
    machine with that many, else one (a torch-backend run trains on one device)."""
    import torch

    if cfg.backend.name == "deepspeed" and devices > 1 and torch.cuda.device_count() >= devices:
        return devices
    return 1


def train_launched(cfg, run_dir: Path, n: int) -> Summary:
    """A data-parallel run: torchrun starts n ranks; rank 0 writes run_dir as one process would."""
    import subprocess

    from grpo_lab.trainer.launch import command

    done = subprocess.run(command(RunDir(run_dir) / CONFIG, run_dir, n), check=False)
    summary = RunDir(run_dir).summary()
    if done.returncode != 0 or summary is None:
        raise RuntimeError(f"{n}-process training exited with code {done.returncode}; see the attempt log")
    return summary


def execute(run_dir: str | Path, attempt: int | str, devices: int = 1, eval_samples: int | None = None) -> dict:
    """The runners' entry point: execute_attempt, preemptible by a signal (module docstring)."""
    with preemptible() as preempt:
        return execute_attempt(run_dir, attempt, devices, preempt=preempt, final_samples=eval_samples)


def execute_attempt(run_dir: str | Path, attempt: int, devices: int = 1, on_step: OnStep | None = None,
                    preempt: Callable[[], bool] | None = None, ends: Ends | None = None,
                    final_samples: int | None = None) -> dict:
    """Run attempt `attempt` of the run whose resolved config is run_dir/config.json on `devices`
    GPUs (the runner has made them visible). Returns (and writes to run_dir/result-<attempt>.json)
    {attempt, host, status, error, summary (its JSON form), wall_seconds, reused} and start_step
    (where it resumed) once it trained a step.

    status is finished, stopped (an alarm in stop_on ended it), failed, preempted (`preempt()`
    turned true: checkpointed, to be resumed), paused (at the screening's step, result["paused_at"]), or what `ends` maps an exception raised during
    training (by `on_step`, say) to: such an attempt ended as its caller meant, not by a fault.
    `final_samples` (the sweep's eval design): the final policy is evaluated again with that many
    completions per problem (trainer/final_eval.py): at the end of training, in its process, or
    from the final checkpoint of a run finished before (the eval-only attempt the driver asks for);
    result["final_eval"] says how that went, and its failure does not fail a finished run."""
    from grpo_lab.trainer.grpo import Preempted

    ends = {Paused: "paused", Preempted: "preempted", **(ends or {})}
    run_dir = Path(run_dir)
    t0 = time.time()
    result = {"attempt": attempt, "host": socket.gethostname(), "error": None, "summary": None}
    with locked(run_dir):
        reused = None
        try:
            summary = reused = finished_summary(run_dir)
            if summary is None and isinstance(attempt, str):
                raise RuntimeError(f"eval-only attempt {attempt}: {run_dir} holds no finished run to evaluate")
            if summary is None:
                summary = _train(run_dir, t0, result, devices, on_step, preempt, final_samples)
            if final_samples:
                result["final_eval"] = _final_eval(run_dir, final_samples, in_attempt=reused is None)
            result["summary"] = summary.model_dump(mode="json")
            result["status"] = "stopped" if summary.stopped else "finished"
        except Exception as exc:  # reported to the caller, which records it and may retry
            ended = next((status for kind, status in ends.items() if isinstance(exc, kind)), None)
            result["status"] = ended or "failed"
            result["error"] = str(exc) if ended else f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=8)}"
        # A run finished by an attempt this registry no longer knows (a lost or new registry) is
        # accounted at what its summary says it cost, not the second spent finding it.
        result["wall_seconds"] = (reused.wall_seconds or 0.0) if reused else time.time() - t0
        result["reused"] = reused is not None
        RunDir(run_dir).write_result(attempt, result)
    return result


def _final_eval(run_dir: Path, samples: int, in_attempt: bool) -> dict:
    """{samples, pass@1, reused (the record was there before this attempt)} or {samples, error}.
    `in_attempt`: this attempt trained the run, so its hours hold the eval (the record's are 0)."""
    from grpo_lab.trainer.final_eval import final_eval

    had = RunDir(run_dir).final_eval(samples) is not None
    try:
        record = final_eval(run_dir, samples, in_attempt)
    except Exception as exc:  # the driver asks again next wave; the trained run stays finished
        return {"samples": samples, "error": f"{type(exc).__name__}: {exc}"}
    return {"samples": samples, "pass@1": record["metrics"].get("eval/pass@1"), "reused": had}


def _train(run_dir: Path, t0: float, result: dict, devices: int, on_step: OnStep | None,
           preempt: Callable[[], bool] | None, final_samples: int | None = None) -> Summary:
    """Train (or resume) the run in run_dir: in this process with a heartbeat after every step,
    or as a data-parallel run under torchrun (which reports no steps to this process)."""
    from grpo_lab.trainer.executors import executor
    from grpo_lab.trainer.grpo import Preempted

    folder = RunDir(run_dir)
    if preempt is not None and preempt():  # the signal came while this attempt waited for the folder's lock
        raise Preempted(int((folder.heartbeat() or {}).get("step", 0)))
    cfg = RunConfig.model_validate(folder.config())
    n = processes(cfg, devices)
    if n > 1:
        if on_step is not None:
            warnings.warn(f"{run_dir}: a {n}-process run reports no steps to this process: its on_step hook "
                          "(tune's pruning) and heartbeats are off", stacklevel=2)
        return train_launched(cfg, run_dir, n)
    beat = {"attempt": result["attempt"], "started": t0, "host": result["host"], "steps": cfg.steps}
    stop_at = folder.stop_at()
    stop_at = stop_at if stop_at is not None and stop_at < cfg.steps else None
    paused: list[int] = []
    before = folder.result(result["attempt"] - 1) if isinstance(result["attempt"], int) else None
    if stop_at is not None and before and before.get("status") == "paused" and before.get("paused_at", -1) >= stop_at:
        result["paused_at"] = before["paused_at"]  # already there: training would overshoot the rung by a step
        raise Paused(before["paused_at"])

    def step_done(step: int, metrics: dict) -> None:
        # the first step of this attempt is where it resumed (its checkpoint's step)
        beat.setdefault("start_step", step)
        beat.setdefault("first_step_at", time.time())  # the live ETA's pace leaves out the setup before it
        result["start_step"] = beat["start_step"]
        folder.write_heartbeat({**beat, "updated": time.time(), "step": step + 1, "reward": metrics.get("reward/mean")})
        if on_step is not None:
            on_step(step, metrics)
        if stop_at is not None and step + 1 >= stop_at:
            paused.append(step + 1)

    def leave() -> bool:  # the trainer checkpoints and raises Preempted when this turns true after a step
        return bool(paused) or (preempt is not None and preempt())

    train = executor(cfg.trainer)  # grpo-lab's loop, or another trainer's (trainer/executors.py)
    try:
        return train(cfg, run_dir, on_step=step_done, preempt=leave, final_samples=final_samples)
    except Preempted:
        if paused:
            result["paused_at"] = paused[0]
            raise Paused(paused[0]) from None
        raise


if __name__ == "__main__":  # python -m grpo_lab.execution.worker RUN_DIR ATTEMPT DEVICES [EVAL_SAMPLES]
    # A Ctrl-C in the sweep's terminal reaches its workers too (one process group); the driver stops
    # them with SIGTERM, which checkpoints, instead of each dying mid-step with a traceback in its log.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    attempt = int(sys.argv[2]) if sys.argv[2].isdigit() else sys.argv[2]
    out = execute(sys.argv[1], attempt, int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else None)
    sys.exit({"failed": 1, "preempted": PREEMPTED_EXIT}.get(out["status"], 0))  # paused: 0, it did what it was asked
