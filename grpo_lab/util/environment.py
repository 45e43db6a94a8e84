"""What this process runs on: package versions, CUDA, devices, git commit, host.

Local look-ups only (package metadata, git, nvidia-smi): no network, no CUDA context, and an absent
package is never imported. Tracking tags runs with `env_snapshot`; preflight compares `environment`
against a pinned one.
"""

from __future__ import annotations

import importlib.metadata
import platform
import socket
import subprocess
from pathlib import Path

from grpo_lab.util.paths import ROOT

# The packages that change sampled distributions or kernels: what a pinned environment names.
PINNED_PACKAGES = ("torch", "transformers", "vllm", "deepspeed")


def package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _command(args: list[str], cwd: Path | None = None) -> str | None:
    """stdout of a short local command, or None if it is missing, fails or hangs."""
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def cuda_version() -> str | None:
    """The CUDA version torch was built with (None on CPU builds); torch is a dependency."""
    import torch

    return torch.version.cuda


def _git_info() -> dict[str, str]:
    repo = ROOT
    commit = _command(["git", "rev-parse", "HEAD"], cwd=repo)
    if commit is None:
        return {"git_commit": "unknown", "git_dirty": "unknown"}
    # Tracked changes only: untracked scratch files do not change what a run executes.
    dirty = _command(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo)
    return {"git_commit": commit, "git_dirty": "unknown" if dirty is None else str(bool(dirty)).lower()}


def _device_info() -> dict[str, str]:
    """CUDA build of torch and the host's GPUs (via nvidia-smi: no CUDA context in the driver)."""
    info = {"cuda": cuda_version() or "none"}
    names = _command(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    gpus = [n.strip() for n in (names or "").splitlines() if n.strip()]
    info["device_count"] = str(len(gpus))
    info["devices"] = ", ".join(gpus) if gpus else "cpu"
    return info


def env_snapshot() -> dict[str, str]:
    """Versions (installed packages only), CUDA, devices, git commit/dirty, host, platform.

    Local look-ups only: no network, and absent packages are never imported.
    """
    env = {"python": platform.python_version(), "platform": platform.platform(),
           "hostname": socket.gethostname()}
    for dist in (*PINNED_PACKAGES, "mlflow", "grpo-lab"):
        if (v := package_version(dist)) is not None:
            env[dist.replace("-", "_")] = v
    return env | _device_info() | _git_info()


def environment() -> dict[str, str | None]:
    """python, the packages that change sampled distributions or kernels, and CUDA."""
    return {"python": platform.python_version(), **{p: package_version(p) for p in PINNED_PACKAGES},
            "cuda": cuda_version()}
