"""The local runner: each attempt in its own `python -m grpo_lab.execution.worker` process.

A process per attempt isolates threads, memory and CUDA state, and lets a run be given its GPUs
through CUDA_VISIBLE_DEVICES. Workers get SIGKILL when the driver dies (Linux PDEATHSIG), so a
killed sweep leaves nothing running behind it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from grpo_lab.execution.runners.base import Job, Outcome, outcome_from
from grpo_lab.rundir import RunDir


def visible_gpus() -> list[int]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [int(x) for x in env.split(",") if x.strip().isdigit()]
    try:
        import torch

        return list(range(torch.cuda.device_count()))
    except Exception:  # a broken CUDA install means no GPUs to hand out, not a crashed sweep
        return []


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LocalRunner:
    name = "local"

    def __init__(self, slots: int | None = None, gpus: list[int] | None = None):
        self.free_gpus = list(gpus) if gpus is not None else visible_gpus()
        # CPU: one run per core keeps the box busy, each on its share of the cores (worker_env)
        self.slots = slots or (len(self.free_gpus) or max(1, (os.cpu_count() or 2)))
        self.procs: dict[str, tuple[Job, subprocess.Popen, list[int], float, object]] = {}

    def worker_env(self, gpus: list[int]) -> dict[str, str]:
        """A worker's environment: its GPUs, or on CPU its share of the cores as torch's thread count
        (OMP_NUM_THREADS, unless the user set it). A model card without cpu_threads leaves threads to
        torch, whose default is every core: two SmolLM2 training processes on two cores then made
        0.56x the passes a second they make on a core each (benchmarks/cpu_threads.py)."""
        env = dict(os.environ)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
        else:
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // self.slots)))
        return env

    def submit(self, job: Job) -> None:
        gpus: list[int] = []
        if self.free_gpus:
            if job.devices > len(self.free_gpus):
                raise RuntimeError(f"run {job.run_id} needs {job.devices} GPUs, {len(self.free_gpus)} are free")
            gpus, self.free_gpus = self.free_gpus[: job.devices], self.free_gpus[job.devices:]
        env = self.worker_env(gpus)
        log = open(RunDir(job.run_dir).attempt_log(job.attempt), "ab")
        cmd = [sys.executable, "-m", "grpo_lab.execution.worker", str(job.run_dir), str(job.attempt), str(job.devices),
               *([str(job.eval_samples)] if job.eval_samples else [])]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
        self.procs[job.run_id] = (job, proc, gpus, time.time(), log)

    def poll(self, timeout: float) -> list[Outcome]:
        deadline = time.time() + timeout
        while True:
            done = [rid for rid, (_, p, *_) in self.procs.items() if p.poll() is not None]
            if done or time.time() >= deadline or not self.procs:
                return [self._collect(rid) for rid in done]
            time.sleep(0.2)

    def _collect(self, run_id: str) -> Outcome:
        job, proc, gpus, t0, log = self.procs.pop(run_id)
        log.close()
        self.free_gpus += gpus
        result = RunDir(job.run_dir).result(job.attempt)
        tail = _tail(RunDir(job.run_dir).attempt_log(job.attempt))
        return outcome_from(job, result, f"worker exited with code {proc.returncode} and no result:\n{tail}",
                            time.time() - t0)

    def job_id(self, run_id: str) -> str | None:
        return None  # a worker dies with its driver (PDEATHSIG): nothing outlives it to adopt

    def adopt(self, job: Job, job_id: str) -> bool:
        return False

    def close(self) -> None:
        for job, proc, *_ in self.procs.values():
            proc.terminate()  # SIGTERM: the worker checkpoints at its next step boundary
        for job, proc, _, _, log in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()
        self.procs.clear()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
