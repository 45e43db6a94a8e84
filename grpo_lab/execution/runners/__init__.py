"""Runners: where a sweep's attempts execute. A profile (runners/<name>.yaml, or just a kind) picks one.

    local  subprocesses on this machine (runners/local.py)
    ray    Ray tasks on a local or remote cluster (runners/ray_runner.py)
    slurm  submitit jobs on Slurm, or its local executor without one (runners/slurm.py)
"""

from __future__ import annotations

import importlib
from pathlib import Path

from grpo_lab.execution.runners.base import KINDS, Runner, RunnerProfile
from grpo_lab.execution.runners.local import LocalRunner
from grpo_lab.execution.runners.ray_runner import RayRunner
from grpo_lab.execution.runners.slurm import SlurmRunner
from grpo_lab.util.paths import find
from grpo_lab.util.validate import validate
from grpo_lab.util.yamlio import ConfigError, load_yaml, suggest


# runner kind -> (the module it needs, the extra that installs it)
NEEDS = {"ray": ("ray", "grpo-lab[ray]"), "slurm": ("submitit", "grpo-lab[slurm]")}


def load_profile(name_or_path: str | None) -> RunnerProfile:
    """`local`, `ray`, `slurm` (runners/<name>.yaml when present) or a path to a profile YAML;
    one ConfigError line naming the extra when its kind's library is not installed."""
    profile = _read_profile(name_or_path)
    if profile.kind in NEEDS:
        module, extra = NEEDS[profile.kind]
        try:
            importlib.import_module(module)
        except ImportError:
            raise ConfigError(f"runner {profile.kind} needs {module}: pip install '{extra}'") from None
    return profile


def _read_profile(name_or_path: str | None) -> RunnerProfile:
    name = name_or_path or "local"
    path = Path(name)
    if not path.suffix:
        path = find("runners", f"{name}.yaml")
        if not path.exists():
            if name in KINDS:
                return RunnerProfile(kind=name)
            raise ConfigError(f"unknown runner '{name}'{suggest(name, KINDS)}: give local, ray, slurm or a profile YAML")
    data, lines = load_yaml(path)
    return validate(RunnerProfile, data or {}, str(path), lines)


def make_runner(profile: RunnerProfile, workspace: Path, max_parallel: int | None = None) -> Runner:
    slots = max_parallel or profile.max_parallel
    if profile.kind == "ray":
        return RayRunner(profile.ray, slots)
    if profile.kind == "slurm":
        return SlurmRunner(profile.slurm, workspace, slots)
    return LocalRunner(slots, profile.gpus)
