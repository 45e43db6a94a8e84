"""Small matrices on the fast test model, shared by the sweep and runner tests."""

import os
import signal
import subprocess
from pathlib import Path

import yaml

from tests.conftest import TINY_FAST

BASE = {
    "levels": 2, "steps": 4, "checkpoint_every": 2,
    "sampling": {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6},
    "eval": {"every": 2, "problems": 8, "samples": 2, "k": [1, 2]},
}


def write_matrix(folder: Path, name: str = "mini", seeds=(0,), tricks=None, **base) -> Path:
    spec = {"name": name, "models": [TINY_FAST], "tasks": ["math"], "seeds": list(seeds),
            "tricks": tricks or ["baseline", {"singles": ["ema_reference"]}], "base": {**BASE, **base}}
    path = Path(folder) / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def workers(ws: Path) -> list[int]:
    """Process ids of the attempt workers of workspace `ws` still alive."""
    found = subprocess.run(["pgrep", "-f", f"grpo_lab.execution.worker {ws}"], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def freeze_workers(ws: Path) -> None:
    """SIGSTOP every worker: on a fast box a run could otherwise finish between the check and the kill."""
    for pid in workers(ws):
        os.kill(pid, signal.SIGSTOP)
