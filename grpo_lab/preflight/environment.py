"""The software environment against a pinned snapshot (STUDY.md: pin Python, PyTorch, vLLM, CUDA).
Versions come from package metadata, so an absent package is never imported."""

from __future__ import annotations

import platform
from collections.abc import Mapping
from importlib import metadata

from grpo_lab.preflight.checks import Check

PACKAGES = ("torch", "transformers", "vllm", "deepspeed")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cuda_version() -> str | None:
    """The CUDA version torch was built with (None on CPU builds); torch is a dependency."""
    import torch

    return torch.version.cuda


def environment() -> dict[str, str | None]:
    """python, the packages that change sampled distributions or kernels, and CUDA."""
    return {"python": platform.python_version(), **{p: package_version(p) for p in PACKAGES},
            "cuda": cuda_version()}


def _current(name: str, env: Mapping[str, str | None]) -> str | None:
    return env[name] if name in env else package_version(name)


def environment_checks(env: Mapping[str, str | None], pin: Mapping[str, str | None] | None) -> list[Check]:
    """One green summary row without a pin; with one, a row per pinned name, yellow on mismatch.
    A pinned name outside `env` is looked up as an installed distribution."""
    if not pin:
        here = ", ".join(f"{k} {v}" for k, v in env.items() if v)
        return [Check("env: versions", here, "no pin given", "green")]
    checks = []
    for name, pinned in pin.items():
        current = _current(name, env)
        same = current == (None if pinned is None else str(pinned))
        value = f"{name} {current or 'absent'} here, {pinned or 'absent'} pinned"
        checks.append(Check(f"env: {name}", value, f"== {pinned or 'absent'}", "green" if same else "yellow",
                            "" if same else "compared runs should share one environment"))
    return checks
