"""The Ray runner: a Ray task per attempt, asking Ray for the GPUs its model card needs.

`address: null` starts a local Ray on this machine; `auto` or `ray://head:10001` joins a
cluster, where Ray places each task on a node with enough free GPUs. The task runs the same
`worker.execute` as the local runner, in a Ray worker process.
"""

from __future__ import annotations

import time

from grpo_lab.execution.runners.base import Job, Outcome, RayOptions, outcome_from
from grpo_lab.execution.worker import execute


class RayRunner:
    name = "ray"

    def __init__(self, opts: RayOptions, slots: int | None = None):
        try:
            import ray
        except ImportError:
            raise RuntimeError("runner ray needs Ray: pip install 'grpo-lab[ray]'") from None
        self.ray = ray
        if not ray.is_initialized():
            kwargs = {"address": opts.address} if opts.address else {"num_cpus": opts.num_cpus}
            ray.init(**kwargs, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
        resources = ray.cluster_resources()
        self.gpus_available = int(resources.get("GPU", 0))
        self.cpus_per_run = opts.cpus_per_run
        self.slots = slots or max(1, int(resources.get("GPU", 0)) or int(resources.get("CPU", 1) // opts.cpus_per_run))

        self.remote = ray.remote(max_retries=0)(execute)  # retries are the driver's, counted as attempts
        self.pending: dict = {}  # ObjectRef -> (job, start time)

    def submit(self, job: Job) -> None:
        gpus = job.devices if self.gpus_available else 0
        ref = self.remote.options(num_gpus=gpus, num_cpus=self.cpus_per_run).remote(
            str(job.run_dir), job.attempt, gpus or 1, job.eval_samples)
        self.pending[ref] = (job, time.time())

    def poll(self, timeout: float) -> list[Outcome]:
        if not self.pending:
            return []
        ready, _ = self.ray.wait(list(self.pending), num_returns=len(self.pending), timeout=timeout)
        out = []
        for ref in ready:
            job, t0 = self.pending.pop(ref)
            try:
                out.append(outcome_from(job, self.ray.get(ref), "no result", time.time() - t0))
            except Exception as exc:  # execute catches its own errors: its process or node died (OOM, node lost)
                out.append(Outcome(job, "interrupted", f"ray task lost: {type(exc).__name__}: {str(exc)[:300]}",
                                   None, time.time() - t0))
        return out

    def job_id(self, run_id: str) -> str | None:
        return None  # a task dies with the driver that owns it: nothing to adopt

    def adopt(self, job: Job, job_id: str) -> bool:
        return False

    def close(self) -> None:
        for ref in list(self.pending):
            self.ray.cancel(ref, force=True)
        self.pending.clear()
