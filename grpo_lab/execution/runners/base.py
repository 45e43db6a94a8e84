"""What every runner does: start attempts, report the ones that ended. Profiles in runners/*.yaml.

A runner never touches the registry: the sweep driver owns it, hands a runner `Job`s and gets
`Outcome`s back. The attempt itself is `worker.execute`, the same function under every engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import Field

from grpo_lab.rundir import Summary
from grpo_lab.util.validate import Strict

KINDS = ("local", "ray", "slurm")


@dataclass(frozen=True)
class Job:
    run_id: str
    run_dir: Path
    attempt: int | str  # the registry's attempt number; eval<K> for an eval-only attempt
    devices: int  # GPUs the run needs on a GPU machine (its model card's `gpus`)
    # the sweep's eval design for this run: a finished run's final checkpoint is evaluated again
    # with this many completions per problem (an eval-only attempt of worker.execute_attempt); a
    # run that trains is evaluated so at the end of its attempt
    eval_samples: int | None = None


@dataclass(frozen=True)
class Outcome:
    job: Job
    # finished | stopped | failed | preempted (checkpointed on a signal) | interrupted (its process,
    # job or node vanished without a result: the driver takes its hours from the heartbeat)
    status: str
    error: str | None
    summary: Summary | None
    wall_seconds: float
    start_step: int | None = None  # the step the attempt resumed from (None: it trained no step)


class Runner(Protocol):
    name: str
    slots: int  # attempts it runs at once

    def submit(self, job: Job) -> None: ...
    def poll(self, timeout: float) -> list[Outcome]: ...  # attempts that ended since the last poll
    def close(self) -> None: ...  # stop what is still running (the driver records it as interrupted)
    # The scheduler's id of a submitted attempt, kept in the registry; None where attempts die with
    # the driver (local processes, Ray tasks), so there is nothing to adopt later.
    def job_id(self, run_id: str) -> str | None: ...
    # Take over a live job a killed driver submitted; False when it is no longer queued or running.
    def adopt(self, job: Job, job_id: str) -> bool: ...


class RayOptions(Strict):
    address: str | None = None  # None: a local Ray on this machine; "auto" or ray://host:port for a cluster
    num_cpus: int | None = None  # local Ray only
    cpus_per_run: float = 1.0


class SlurmOptions(Strict):
    cluster: Literal["slurm", "local", "debug"] | None = None  # None: Slurm when sbatch exists, else local
    folder: str = "submitit"  # logs and pickles, under the workspace
    partition: str | None = None
    timeout_min: int = 24 * 60
    cpus_per_task: int = 8
    mem_gb: float | None = None
    gpus_per_node: int | None = Field(None, ge=0)  # None: the model card's gpus; 0: a CPU partition (no --gpus)
    array: bool = False  # one job array for the pending runs instead of a job per run
    # seconds before the time limit Slurm sends submitit's USR2: the attempt checkpoints and is resubmitted
    signal_delay_s: int = Field(90, ge=0)
    account: str | None = None
    qos: str | None = None
    additional: dict[str, Any] = {}  # any other sbatch setting, e.g. {constraint: h100}


class RunnerProfile(Strict):
    kind: Literal["local", "ray", "slurm"] = "local"
    max_parallel: int | None = Field(None, ge=1)  # None: one per free GPU (or per 2 cores on CPU)
    gpus: list[int] | None = None  # local: GPU ids to hand out (None: all visible)
    ray: RayOptions = RayOptions()
    slurm: SlurmOptions = SlurmOptions()


# Failures that fail again the same way until the user acts (the error says how): not retried by
# --retries, nor by a later sweep while the cause is still there (sweep.blocked).
NON_RETRYABLE = ("CorruptCheckpointError",)


def retryable(error: str | None) -> bool:
    """Whether an attempt's error (worker.execute writes it as 'ExceptionName: message...') may pass on a retry."""
    return not (error or "").startswith(tuple(f"{name}:" for name in NON_RETRYABLE))


def outcome_from(job: Job, result: dict | None, fallback_error: str, wall: float) -> Outcome:
    """An Outcome from worker.execute's result (None when the attempt died without one)."""
    if not result:
        return Outcome(job, "failed", fallback_error, None, wall)
    return Outcome(job, result["status"], result.get("error"), Summary.parse(result.get("summary")),
                   result.get("wall_seconds", wall), result.get("start_step"))
