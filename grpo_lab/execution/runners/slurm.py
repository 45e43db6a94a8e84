"""The Slurm runner, through submitit: a job per attempt, or one job array for the pending runs.

sbatch settings come from the profile (runners/slurm.yaml). With `cluster: local` (or no sbatch
on the machine) submitit's local executor runs the same jobs as subprocesses.

On Slurm a job's end is read from `squeue` (one call per poll for all jobs) and the result file
submitit writes, not from `sacct`: clusters without accounting (no slurmdbd) have no sacct, and
a job that vanished without a result (scancel, node failure, time limit) must still end its
attempt. Jobs outlive the driver, so each attempt's job id goes into the registry and a
restarted driver adopts the ones still queued or running instead of submitting them again.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from grpo_lab.execution.runners.base import Job, Outcome, SlurmOptions, outcome_from
from grpo_lab.execution.worker import execute
from grpo_lab.rundir import RunDir


def live_jobs() -> set[str] | None:
    """Ids of the jobs Slurm still holds (pending, running, completing), array tasks as
    ARRAY_TASK; None when squeue cannot answer (the controller is busy or down): assume all live."""
    try:
        out = subprocess.run(["squeue", "-h", "-r", "-o", "%i"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(out.stdout.split()) if out.returncode == 0 else None


class SlurmRunner:
    name = "slurm"

    def __init__(self, opts: SlurmOptions, workspace: Path, slots: int | None = None):
        try:
            import submitit
        except ImportError:
            raise RuntimeError("runner slurm needs submitit: pip install 'grpo-lab[slurm]'") from None
        self.submitit = submitit
        cluster = opts.cluster or ("slurm" if shutil.which("sbatch") else "local")
        self.folder = Path(workspace) / opts.folder / "%j"
        self.executor = submitit.AutoExecutor(folder=str(self.folder), cluster=cluster)
        self.opts, self.cluster = opts, cluster
        self.slots = slots or (64 if cluster == "slurm" else 2)
        self.jobs: dict = {}  # submitit job -> (Job, start time)
        self.queue: list[Job] = []
        self.adoptable: set[str] | None = None  # the queue when the first adoption asked (one squeue call)

    def _params(self, devices: int) -> dict:
        o = self.opts
        params = {"timeout_min": o.timeout_min, "cpus_per_task": o.cpus_per_task, "tasks_per_node": 1,
                  "nodes": 1, "name": "grpo-lab"}
        if self.cluster == "slurm":
            params.update({"slurm_array_parallelism": self.slots, "slurm_signal_delay_s": o.signal_delay_s})
            gpus = devices if o.gpus_per_node is None else o.gpus_per_node
            if gpus:  # --gpus-per-node is refused outright on a cluster without GPU gres
                params["gpus_per_node"] = gpus
            params.update({f"slurm_{k}": v for k, v in
                           {"partition": o.partition, "account": o.account, "qos": o.qos}.items() if v})
            if o.mem_gb:
                params["mem_gb"] = o.mem_gb
            if o.additional:
                params["slurm_additional_parameters"] = dict(o.additional)
        return params

    def submit(self, job: Job) -> None:
        if self.opts.array:
            self.queue.append(job)  # flushed as one array at the next poll
            return
        self.executor.update_parameters(**self._params(job.devices))
        self._track([job], [self.executor.submit(execute, str(job.run_dir), job.attempt, job.devices,
                                                   job.eval_samples)])

    def _flush(self) -> None:
        if not self.queue:
            return
        jobs, self.queue = self.queue, []
        self.executor.update_parameters(**self._params(max(j.devices for j in jobs)))
        with self.executor.batch():
            handles = [self.executor.submit(execute, str(j.run_dir), j.attempt, j.devices, j.eval_samples) for j in jobs]
        self._track(jobs, handles)

    def _track(self, jobs: list[Job], handles: list) -> None:
        for job, handle in zip(jobs, handles):
            self.jobs[handle] = (job, time.time())

    def job_id(self, run_id: str) -> str | None:
        return next((h.job_id for h, (job, _) in self.jobs.items() if job.run_id == run_id), None)

    def adopt(self, job: Job, job_id: str) -> bool:
        if self.cluster != "slurm":
            return False
        if self.adoptable is None:
            self.adoptable = live_jobs() or set()
        if job_id not in self.adoptable:
            return False
        self._track([job], [self.submitit.SlurmJob(folder=str(self.folder), job_id=job_id)])
        return True

    def _ended(self) -> list:
        """Handles whose job has a result, or (on Slurm) is no longer held by the scheduler."""
        if self.cluster != "slurm":
            return [h for h in self.jobs if h.done()]
        with_result = [h for h in self.jobs if h.paths.result_pickle.exists()]
        live = live_jobs() if len(with_result) < len(self.jobs) else None
        gone = [] if live is None else [h for h in self.jobs if h.job_id not in live]
        return list(dict.fromkeys(with_result + gone))

    def poll(self, timeout: float) -> list[Outcome]:
        self._flush()
        deadline = time.time() + timeout
        while True:
            done = self._ended()
            if done or time.time() >= deadline or not self.jobs:
                break
            time.sleep(0.5)
        return [self._collect(handle) for handle in done]

    def _collect(self, handle) -> Outcome:
        job, t0 = self.jobs.pop(handle)
        if handle.paths.result_pickle.exists() or self.cluster != "slurm":
            try:
                return outcome_from(job, handle.result(), "no result", time.time() - t0)
            except Exception as exc:  # the job failed outside execute (its process died, time limit)
                error = f"slurm job {handle.job_id} failed: {type(exc).__name__}: {str(exc)[:300]}"
        else:
            error = f"slurm job {handle.job_id} left the queue without a result (scancel, node failure, time limit)"
        result = RunDir(job.run_dir).result(job.attempt)  # the worker's own word, if it got there
        return outcome_from(job, result, error, time.time() - t0) if result else \
            Outcome(job, "interrupted", error, None, time.time() - t0)

    def close(self) -> None:
        for handle in self.jobs:
            handle.cancel(check=False)
        self.jobs.clear()
