"""Ablation matrices: a YAML spec (models x tasks x trainers x trick sets x seeds) expanded into resolved runs.

A cell's run id is the hash of its fully resolved RunConfig, so two spellings of the same run
collapse into one cell and a finished run is recognised in any later sweep (docs/design.md §2).
Errors name the matrix file, the line and the field, as run-config errors do.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from grpo_lab.spec.config import RunConfig, resolve
from grpo_lab.spec.model_cards import load_card, load_hardware
from grpo_lab.spec.tricks import load_catalog, trick_notes
from grpo_lab.tasks import check_task
from grpo_lab.util.dicts import deep_merge
from grpo_lab.util.names import name_problem
from grpo_lab.util.validate import Strict, validate, where_in
from grpo_lab.util.yamlio import ConfigError, load_yaml, suggest
from grpo_lab.spec.arm import DEFAULT_TRAINER, TRAINERS, arm_label, arm_model

DEFAULT_HARDWARE = "cpu"  # the box grpo-lab runs on without a GPU
TIERS = {"100": 100.0, "1k": 1_000.0, "10k": 10_000.0}  # docs/study.md "Budget tiers", in GPU-hours
GENERATORS = ("baseline", "singles", "combos", "pairs", "leave_one_out")


class TrickGen(Strict):
    """One item of the `tricks` axis: a generator of trick sets (see `sets`)."""

    baseline: bool = False
    singles: list[str] | None = Field(None, min_length=1)
    combos: list[list[str]] | None = Field(None, min_length=1)
    pairs: list[str] | None = Field(None, min_length=2)
    leave_one_out: list[str] | None = Field(None, min_length=2)

    @model_validator(mode="before")
    @classmethod
    def _bare_string(cls, data: Any) -> Any:
        if data == "baseline":
            return {"baseline": True}
        if isinstance(data, str):
            raise ValueError(f"'{data}' is not a generator: write 'baseline' or {{singles: [{data}]}}")
        return data

    @model_validator(mode="after")
    def _exactly_one(self) -> "TrickGen":
        given = [g for g in GENERATORS if getattr(self, g)]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(GENERATORS)} per item (got {given or 'none'})")
        return self

    def sets(self) -> list[tuple[str, ...]]:
        """baseline: (); singles: each alone; combos: as written; pairs: every pair;
        leave_one_out: the full set, then the set without each member in turn."""
        if self.baseline:
            return [()]
        if self.singles:
            return [(t,) for t in self.singles]
        if self.combos:
            return [tuple(c) for c in self.combos]
        if self.pairs:
            return list(itertools.combinations(self.pairs, 2))
        full = tuple(self.leave_one_out or ())
        return [full] + [full[:i] + full[i + 1 :] for i in range(len(full))]


class BudgetSpec(Strict):
    tier: Literal["100", "1k", "10k"] | None = None
    gpu_hours: float | None = Field(None, gt=0)  # device-hours in the hardware's unit (core-hours on cpu)
    hardware: str = DEFAULT_HARDWARE  # a profile in experiments/hardware/
    price_per_gpu_hour: float | None = Field(None, ge=0)  # None: the hardware profile's price

    @field_validator("tier", mode="before")
    @classmethod
    def _tier_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) else v  # `tier: 100` is an int in YAML

    @field_validator("hardware")
    @classmethod
    def _known_hardware(cls, v: str) -> str:
        load_hardware(v)  # an unknown profile is reported at its line in the matrix, with suggestions
        return v

    @model_validator(mode="after")
    def _one_limit(self) -> "BudgetSpec":
        if self.tier and self.gpu_hours:
            raise ValueError("give either tier or gpu_hours, not both")
        return self

    @property
    def limit(self) -> float | None:
        return TIERS[self.tier] if self.tier else self.gpu_hours


class MatrixSpec(Strict):
    name: str | None = None  # the sweep's name, a folder name under reports/ (util/names.py)
    models: list[str] = Field(min_length=1)
    tasks: list[str | list[str]] = Field(min_length=1)
    seeds: list[int] = Field([0], min_length=1)
    # who trains each cell (RunConfig.trainer); None: the base's `trainer`, grpo-lab's when it has none
    trainers: list[str] | None = Field(None, min_length=1)
    tricks: list[TrickGen] = Field([TrickGen(baseline=True)], min_length=1)
    base: dict[str, Any] = {}  # RunConfig overrides for every cell (a path is loaded by load_matrix)
    task_base: dict[str, dict[str, Any]] = {}  # per-task overrides over `base` (key: a task label, e.g. math)
    budget: BudgetSpec | None = None
    runner: str | None = None
    _base_source: str = PrivateAttr("<matrix>")
    _base_lines: dict = PrivateAttr(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v: str | None) -> str | None:
        problem = None if v is None else name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("seeds")
    @classmethod
    def _natural_seeds(cls, v: list[int]) -> list[int]:
        # -1 reads as "a random seed" in many trainers; here it would silently be one more fixed seed
        negative = [s for s in v if s < 0]
        if negative:
            raise ValueError(f"seed {negative[0]} is negative: seeds are integers from 0 (e.g. [0, 1, 2])")
        return v

    @field_validator("trainers")
    @classmethod
    def _known_trainers(cls, v: list[str] | None) -> list[str] | None:
        for name in v or []:
            if name not in TRAINERS:
                raise ValueError(f"unknown trainer '{name}'{suggest(name, TRAINERS)}; trainers: {', '.join(TRAINERS)}")
        if v is not None and len(set(v)) < len(v):
            raise ValueError(f"{v} names a trainer twice")
        return v

    def trainer_axis(self) -> list[str | None]:
        """The trainers axis as expanded: None stands for the base's own `trainer` (or the default),
        so a matrix without the axis resolves exactly the configs, and run ids, it always did."""
        return list(self.trainers) if self.trainers else [None]

    def trick_sets(self) -> list[tuple[str, ...]]:
        """Every generator's sets in order, each distinct set once."""
        return list(dict.fromkeys(s for gen in self.tricks for s in gen.sets()))


@dataclass(frozen=True, slots=True)
class Cell:
    model: str  # the arm's model label (spec/arm.arm_model: "tiny", "tiny (trl)"); the model is config.model
    task: str  # mixed-task runs are labelled "math+code"
    tricks: tuple[str, ...]  # the axis' trick set (the base's own tricks are in config.tricks)
    seed: int
    run_id: str  # == self.config.run_id()
    warnings: tuple[str, ...]  # same-dimension pairs among config.tricks
    shared: RunConfig  # resolved once for all seeds of this (model, task, tricks); its seed is not this cell's

    @property
    def config(self) -> RunConfig:
        """The cell's fully resolved RunConfig. Made on access: seeds share everything else, and
        copying a config per cell up front was most of the time of planning a large matrix."""
        return self.shared.model_copy(update={"seed": self.seed})


def load_matrix(path: str | Path) -> MatrixSpec:
    """Parse a matrix YAML file; a `base:` path is read relative to it."""
    path = Path(path)
    data, lines = load_yaml(path)
    return parse_matrix(data, str(path), lines, path.parent)


def parse_matrix(data: Any, source: str = "<matrix>", lines: dict | None = None,
                 root: Path | None = None) -> MatrixSpec:
    """Validate a matrix dict: keys and types, then model, task and trick names, then the base
    config, so that every mistake is reported before any expansion or compute."""
    lines = lines or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a matrix is a mapping with models, tasks, seeds and tricks")
    base, base_source, base_lines = _load_base(data.get("base"), source, lines, root or Path.cwd())
    errors: list[str] = []
    try:
        spec = validate(MatrixSpec, {**data, "base": base}, source, lines)
    except ConfigError as exc:  # a bad key must not hide a bad name: check what does parse
        errors.append(str(exc))
        known = {k: v for k, v in data.items() if k in MatrixSpec.model_fields}
        try:
            spec = MatrixSpec.model_validate({**known, "base": base})
        except ValidationError:
            spec = None
    if spec is not None:
        errors += _name_errors(spec, source, lines)
    # checked as the first model's cells see it (the axis over the base, as in a cell): some settings
    # hold for some models only (prompt_shots); a model name already refused is not checked again
    first_model = {"model": spec.models[0]} if spec is not None and not errors else {}
    try:
        resolve({**base, **first_model}, base_source, base_lines)
    except ConfigError as exc:
        errors.append(str(exc))
    if errors:
        raise ConfigError("\n".join(dict.fromkeys(errors)))
    if spec.trainers is not None and "trainer" in base:
        # two places saying who trains would leave one of them silently overridden
        raise ConfigError(f"{where_in(source, lines, ('trainers',))}: field 'trainers': the base sets "
                          f"trainer: {base['trainer']} too ({base_source}); give the trainers on one axis: "
                          f"drop the base's trainer")
    clash = next((t for t, over in spec.task_base.items() if spec.trainers is not None and "trainer" in over), None)
    if clash is not None:  # the axis would silently override the task's own trainer
        raise ConfigError(f"{where_in(source, lines, ('task_base', clash, 'trainer'))}: field 'task_base.{clash}.trainer': "
                          f"trainer: {spec.task_base[clash]['trainer']} beside the trainers axis; give the trainers "
                          f"on one axis: drop the task's trainer")
    spec._base_source, spec._base_lines = base_source, base_lines
    return spec


def _load_base(raw: Any, source: str, lines: dict, root: Path) -> tuple[dict, str, dict]:
    """(base overrides, the file they came from, their line map): inline, or a run-config file."""
    if raw is None:
        return {}, source, {}
    if isinstance(raw, dict):
        return raw, source, {key[1:]: n for key, n in lines.items() if key[0] == "base" and len(key) > 1}
    where = where_in(source, lines, ("base",))
    if not isinstance(raw, str):
        raise ConfigError(f"{where}: field 'base': a mapping of run-config keys or a path to a run config "
                          f"(got {raw!r})")
    try:
        data, base_lines = load_yaml(root / raw)
    except ConfigError as exc:
        raise ConfigError(f"{where}: field 'base': {exc}") from None
    if not isinstance(data, dict | None):
        raise ConfigError(f"{where}: field 'base': {root / raw} is not a mapping of run-config keys")
    return data or {}, str(root / raw), base_lines


def _trick_names(spec: MatrixSpec) -> Iterator[tuple[tuple, str]]:
    """(location, trick name) for every name written in the tricks axis."""
    for i, gen in enumerate(spec.tricks):
        for kind in ("singles", "pairs", "leave_one_out"):
            for j, name in enumerate(getattr(gen, kind) or []):
                yield ("tricks", i, kind, j), name
        for j, combo in enumerate(gen.combos or []):
            for k, name in enumerate(combo):
                yield ("tricks", i, "combos", j, k), name


def _name_errors(spec: MatrixSpec, source: str, lines: dict) -> list[str]:
    """One line per unknown model, task or trick name and per trick set naming a trick twice."""
    def err(loc: tuple, msg: str) -> str:
        return f"{where_in(source, lines, loc)}: field '{'.'.join(map(str, loc))}': {msg}"

    errors = []
    for i, model in enumerate(spec.models):
        try:
            load_card(model)
        except ConfigError as exc:
            errors.append(err(("models", i), str(exc)))
    for i, task in enumerate(spec.tasks):
        for j, name in enumerate([task] if isinstance(task, str) else task):
            try:
                check_task(name)
            except ValueError as exc:
                errors.append(err(("tasks", i) if isinstance(task, str) else ("tasks", i, j), str(exc)))
    labels = [t if isinstance(t, str) else "+".join(t) for t in spec.tasks]
    for name in spec.task_base:
        if name not in labels:
            errors.append(err(("task_base", name), f"'{name}' is not a task of this matrix{suggest(name, labels)}; "
                                                   f"tasks: {', '.join(labels)}"))
    catalog = load_catalog()
    for loc, name in _trick_names(spec):
        if name not in catalog:
            errors.append(err(loc, f"unknown trick '{name}'{suggest(name, catalog)}; `grpo-lab tricks` lists them"))
    for gen_sets in (gen.sets() for gen in spec.tricks):
        for s in gen_sets:
            if len(set(s)) < len(s):
                errors.append(f"{source}: trick set {list(s)} names a trick twice")
    return errors


def expand(spec: MatrixSpec) -> list[Cell]:
    """Every (model, task, trainer, trick set, seed) cell, resolved; a cell whose run id was seen is dropped.

    Each distinct (model, task, trick set) is resolved once and shared by its seeds: resolving
    (deep merges and validation) is costly and seeds are usually the longest axis.
    The base's own tricks are applied first, the cell's tricks over them (later wins).
    """
    base_tricks = list(spec.base.get("tricks") or [])
    cells: list[Cell] = []
    seen: set[str] = set()
    axes = itertools.product(spec.models, spec.tasks, spec.trainer_axis(), spec.trick_sets())
    for model, task, trainer, tricks in axes:
        names = base_tricks + [t for t in tricks if t not in base_tricks]
        label = task if isinstance(task, str) else "+".join(task)
        arm = arm_model(model, trainer or spec.base.get("trainer") or DEFAULT_TRAINER)
        cfg = _resolve_cell(spec, model, task, trainer, names, f"{arm} / {label} / {arm_label(tricks)}")
        notes = tuple(trick_notes(names, cfg.tricks))
        run_id_for = _seed_hasher(cfg)
        for seed in spec.seeds:
            run_id = run_id_for(seed)
            if run_id not in seen:
                seen.add(run_id)
                cells.append(Cell(arm_model(model, cfg.trainer), label, tricks, seed, run_id, notes, cfg))
    return cells


def _resolve_cell(spec: MatrixSpec, model: str, task: str | list[str], trainer: str | None, tricks: list[str],
                  label: str) -> RunConfig:
    """The cell's RunConfig: the base, its task's task_base over it, the axes' model, task and
    trainer (None: the base's), then the tricks over all of them."""
    task_label = task if isinstance(task, str) else "+".join(task)
    base = deep_merge(spec.base, spec.task_base.get(task_label, {}))
    axes = {"model": model, "task": task, "tricks": tricks, **({"trainer": trainer} if trainer else {})}
    data = deep_merge(base, axes)
    return resolve(data, f"{spec._base_source} (cell {label})", spec._base_lines)


_SEED = "\x00seed\x00"


def _seed_hasher(cfg: RunConfig) -> Callable[[int], str]:
    """seed -> the run id of `cfg` with that seed, equal to RunConfig.run_id() (tested), without
    dumping the config once per seed: the JSON text is cut at the seed and each number spliced in."""
    dump = cfg.identity()
    dump["seed"] = _SEED
    head, tail = json.dumps(dump, sort_keys=True).split(json.dumps(_SEED))
    return lambda seed: hashlib.sha256(f"{head}{seed}{tail}".encode()).hexdigest()[:12]
