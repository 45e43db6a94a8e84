"""One GRPO run over N processes (data parallel, one GPU each): the command line, and what each
process runs.

    python -m torch.distributed.run --standalone --nproc_per_node N -m grpo_lab.trainer.launch CONFIG OUT
    srun --ntasks N python -m grpo_lab.trainer.launch CONFIG OUT     (ranks from SLURM_* variables)

Every rank trains the same config on its own prompts (setup.py offsets the sampling seeds by
rank) and DeepSpeed averages the gradients, so a step sees N times `prompts_per_step` prompts.
Rank 0 writes OUT exactly as a one-process run would; rank r writes OUT/rank<r>: the metrics of
its own samples and its own checkpoint, since a ZeRO rank owns its shard of the optimizer state
and resumes from it. Sample, loss and token metrics in OUT are rank 0's share of the step; the
grad norm and the weights are the whole step's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

from grpo_lab.rundir import Summary
from grpo_lab.spec.config import load_config


def command(config: str | Path, out_dir: str | Path, gpus: int) -> list[str]:
    """The command line that trains `config` into `out_dir` on `gpus` processes. torchrun starts
    each worker in a session of its own: stop it with SIGTERM (it stops the workers), since a
    SIGKILL to its process group leaves them running."""
    entry = ["-m", "grpo_lab.trainer.launch", str(config), str(out_dir)]
    if gpus <= 1:
        return [sys.executable, *entry]
    # torch's own launcher: no pdsh/ssh needed on one node, and --standalone picks a free port
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={gpus}", *entry]


def slurm_rendezvous(env: dict[str, str]) -> dict[str, str]:
    """The torch.distributed variables of a task of an `srun --ntasks N` step (N > 1) that no
    launcher set: rank and local rank from Slurm's, the address of the step's first node, and a
    port from the job id, so every task of the step derives the same one. {} otherwise."""
    if "RANK" in env or int(env.get("SLURM_NTASKS", "1")) <= 1:
        return {}
    import subprocess

    nodes = env.get("SLURM_STEP_NODELIST") or env["SLURM_JOB_NODELIST"]
    hosts = subprocess.run(["scontrol", "show", "hostnames", nodes], capture_output=True, text=True, check=True)
    port = env.get("MASTER_PORT") or str(20000 + int(env["SLURM_JOB_ID"]) % 20000)
    return {"RANK": env["SLURM_PROCID"], "WORLD_SIZE": env["SLURM_NTASKS"], "LOCAL_RANK": env["SLURM_LOCALID"],
            "MASTER_ADDR": env.get("MASTER_ADDR") or hosts.stdout.split()[0], "MASTER_PORT": port}


def rank_dir(out_dir: Path, rank: int) -> Path:
    return out_dir if rank == 0 else out_dir / f"rank{rank}"


def main(argv: list[str]) -> Summary:
    from grpo_lab.trainer.grpo import train

    if len(argv) != 2:
        raise SystemExit("usage: python -m grpo_lab.trainer.launch CONFIG OUT")
    cfg = load_config(argv[0])
    os.environ.update(slurm_rendezvous(dict(os.environ)))
    if torch.cuda.is_available():  # before the model loads: "cuda" then means this rank's GPU
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return train(cfg, rank_dir(Path(argv[1]), int(os.environ.get("RANK", "0"))))


if __name__ == "__main__":
    main(sys.argv[1:])
