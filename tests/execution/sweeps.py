"""Small matrices on the fast test model, shared by the sweep and runner tests."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
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


def poll_until(driver: subprocess.Popen, log: Path, probe, timeout: float = 600, interval: float = 0.3):
    """probe()'s first truthy value, polling while `driver` runs (its log shown if it exits first);
    fails the test after `timeout` s (generous: CI boxes can be busy)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = probe()
        if found:
            return found
        assert driver.poll() is None, log.read_text()
        time.sleep(interval)
    pytest.fail(f"the driver did not reach the kill point in {timeout:.0f} s")
