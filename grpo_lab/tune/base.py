"""The config a tune starts from: a run config file, or the baseline of a matrix's first
(model, task, seed), with `--set` overrides over either. Trials resolve it with their params."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grpo_lab.spec.config import RunConfig, parse_set, resolve
from grpo_lab.spec.matrix import load_matrix
from grpo_lab.util.dicts import deep_merge, nest
from grpo_lab.util.yamlio import ConfigError, load_yaml


@dataclass(frozen=True)
class Base:
    data: dict  # raw run-config keys, --set applied; what the tuned override file is written from
    source: str  # named in errors
    lines: dict = field(default_factory=dict)  # {key path: line} of `source`
    hardware: str | None = None  # a matrix's budget.hardware

    def config(self, params: dict | None = None) -> RunConfig:
        """The resolved config of a trial: the base, its tricks, then the trial's params over all
        (a tuned value wins over a trick; space.py refuses a key that a base trick sets)."""
        return resolve(self.data, self.source, self.lines, overrides=nest(params or {}))


def load_base(path: str | Path, sets: list[str] | None = None) -> Base:
    """A run config, or a matrix (it has `models:`): then its base with its first model, task and seed."""
    path = Path(path)
    data, lines = load_yaml(path)
    if isinstance(data, dict) and "models" in data:
        spec = load_matrix(path)
        first = {"model": spec.models[0], "task": spec.tasks[0], "seed": spec.seeds[0]}
        data, lines = deep_merge(spec.base, first), {}  # load_matrix has checked the base's lines
        base = Base(data, f"{path} (base of {first['model']} / {first['task']})", lines,
                    spec.budget.hardware if spec.budget else None)
    elif isinstance(data, dict | None):
        base = Base(data or {}, str(path), lines)
    else:
        raise ConfigError(f"{path}: expected a run config or a matrix (a mapping of keys)")
    if sets:
        base = Base(deep_merge(base.data, parse_set(sets)), base.source, base.lines, base.hardware)
    base.config()  # errors in the base or --set surface now, before any trial
    return base
