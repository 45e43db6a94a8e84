"""What a preflight runs on: a run config, each (model, task) of a matrix, or a model and a task."""

from __future__ import annotations

from pathlib import Path

from grpo_lab.models import load_card
from grpo_lab.spec.config import RunConfig, load_config, parse_set, resolve
from grpo_lab.spec.matrix import MatrixSpec, expand, load_matrix
from grpo_lab.tasks import check_task
from grpo_lab.util.yamlio import ConfigError, load_yaml


def matrix_configs(spec: MatrixSpec) -> list[RunConfig]:
    """One config per distinct (model, task) of the matrix (see baseline_configs)."""
    return baseline_configs(expand(spec))


def baseline_configs(cells, keep=lambda model, task: True) -> list[RunConfig]:
    """One config per distinct (model, task) of `cells` that `keep` accepts: its baseline cell's
    (the base config with that model and task), else the first cell of the pair. `keep` is asked
    with the arm's model label; one model under two trainers is checked once (the checks sample
    and score with grpo-lab's engine and the task's reward, whoever trains)."""
    chosen: dict[tuple[str, str], RunConfig] = {}
    for cell in sorted(cells, key=lambda c: c.tricks != ()):  # baselines first; the sort is stable
        if keep(cell.model, cell.task):
            chosen.setdefault((cell.shared.model, cell.task), cell.config)
    return list(chosen.values())


def preflight_configs(path: Path | None, model: str | None, task: str | None,
                      overrides: list[str] | None = None) -> list[RunConfig]:
    """The configs named on the command line: a run config or matrix file, or --model with --task."""
    if path is None:
        if not (model and task):
            raise ConfigError("give a run config or matrix file, or both --model and --task")
        configs = [resolve({"model": model, "task": task}, "<--model/--task>", overrides=parse_set(overrides or []))]
    elif model or task:
        raise ConfigError("give a file or --model/--task, not both")
    elif _is_matrix(path):
        if overrides:
            raise ConfigError(f"{path}: --set applies to run configs; change a matrix's `base:` instead")
        configs = matrix_configs(load_matrix(path))
    else:
        configs = [load_config(path, overrides)]
    for cfg in configs:  # a bad name fails here, before any model is loaded
        load_card(cfg.model)
        for name in cfg.tasks:
            try:
                check_task(name)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
    return configs


def _is_matrix(path: Path) -> bool:
    """Matrices list `models`; run configs name one `model`."""
    data, _ = load_yaml(path)
    return isinstance(data, dict) and "models" in data
