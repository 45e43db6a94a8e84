"""The Slurm runner, through submitit: a job per attempt, or one job array for the pending runs.

sbatch settings come from the profile (runners/slurm.yaml). With `cluster: local` (or no sbatch
on the machine) submitit's local executor runs the same jobs as subprocesses: that is how the
tests exercise this runner without a cluster.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from grpo_lab.execution.runners.base import Job, Outcome, SlurmOptions, outcome_from
from grpo_lab.execution.worker import execute


class SlurmRunner:
    name = "slurm"

    def __init__(self, opts: SlurmOptions, workspace: Path, slots: int | None = None):
        try:
            import submitit
        except ImportError:
            raise RuntimeError("runner slurm needs `pip install submitit`") from None
        cluster = opts.cluster or ("slurm" if shutil.which("sbatch") else "local")
        self.executor = submitit.AutoExecutor(folder=str(Path(workspace) / opts.folder / "%j"), cluster=cluster)
        self.opts, self.cluster = opts, cluster
        self.slots = slots or (64 if cluster == "slurm" else 2)
        self.jobs: dict = {}  # submitit job -> (Job, start time)
        self.queue: list[Job] = []

    def _params(self, devices: int) -> dict:
        o = self.opts
        params = {"timeout_min": o.timeout_min, "cpus_per_task": o.cpus_per_task, "tasks_per_node": 1,
                  "nodes": 1, "name": "grpo-lab"}
        if self.cluster == "slurm":
            params.update({"gpus_per_node": o.gpus_per_node or devices, "slurm_array_parallelism": self.slots})
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
        self._track([job], [self.executor.submit(execute, str(job.run_dir), job.attempt, job.devices)])

    def _flush(self) -> None:
        if not self.queue:
            return
        jobs, self.queue = self.queue, []
        self.executor.update_parameters(**self._params(max(j.devices for j in jobs)))
        with self.executor.batch():
            handles = [self.executor.submit(execute, str(j.run_dir), j.attempt, j.devices) for j in jobs]
        self._track(jobs, handles)

    def _track(self, jobs: list[Job], handles: list) -> None:
        for job, handle in zip(jobs, handles):
            self.jobs[handle] = (job, time.time())

    def poll(self, timeout: float) -> list[Outcome]:
        self._flush()
        deadline = time.time() + timeout
        while True:
            done = [h for h in self.jobs if h.done()]
            if done or time.time() >= deadline or not self.jobs:
                break
            time.sleep(0.5)
        out = []
        for handle in done:
            job, t0 = self.jobs.pop(handle)
            try:
                result, error = handle.result(), None
            except Exception as exc:  # job failed outside execute (timeout, preemption, node failure)
                result, error = None, f"slurm job {handle.job_id} failed: {type(exc).__name__}: {exc}"
            out.append(outcome_from(job, result, error or "no result", time.time() - t0))
        return out

    def close(self) -> None:
        for handle in self.jobs:
            handle.cancel(check=False)
        self.jobs.clear()
