"""One GRPO run over N processes (data parallel, one GPU each): the command line, and what each
process runs.

    python -m torch.distributed.run --standalone --nproc_per_node N -m grpo_lab.trainer.launch CONFIG OUT

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


def rank_dir(out_dir: Path, rank: int) -> Path:
    return out_dir if rank == 0 else out_dir / f"rank{rank}"


def main(argv: list[str]) -> dict:
    from grpo_lab.trainer.grpo import train

    if len(argv) != 2:
        raise SystemExit("usage: python -m grpo_lab.trainer.launch CONFIG OUT")
    cfg = load_config(argv[0])
    if torch.cuda.is_available():  # before the model loads: "cuda" then means this rank's GPU
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return train(cfg, rank_dir(Path(argv[1]), int(os.environ.get("RANK", "0"))))


if __name__ == "__main__":
    main(sys.argv[1:])
