"""A plan: every cell of a matrix with its estimated cost, the totals, the same-dimension warnings
and whether it fits its budget, all before any compute is spent (docs/design.md §2, §6)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from grpo_lab.spec.arm import arm_label
from grpo_lab.spec.budget import PHASES, Calibration, Estimate, calibration_key, estimate_cells
from grpo_lab.spec.matrix import DEFAULT_HARDWARE, Cell, MatrixSpec, expand
from grpo_lab.spec.model_cards import Hardware, load_hardware
from grpo_lab.util.names import name_problem
from grpo_lab.util.yamlio import ConfigError

if TYPE_CHECKING:
    from grpo_lab.spec.screen_spend import ScreeningSpend


@dataclass(frozen=True)
class Plan:
    name: str
    hardware: Hardware
    cells: list[Cell]
    estimates: list[Estimate]  # one per cell, same order
    warnings: list[str]  # one line per trick set with same-dimension pairs
    limit: float | None  # the budget in device-hours; None: no budget given
    tier: str | None
    price: float  # per device-hour
    calibrations: dict[str, Calibration] = field(default_factory=dict)  # calibration_key -> what corrected its cells
    screening: ScreeningSpend | None = None  # what `sweep --screen` would spend (spec/screen_spend.py); None: not asked

    @property
    def total(self) -> float:
        return sum(e.total for e in self.estimates)

    @property
    def cost(self) -> float:
        return self.total * self.price

    @property
    def spend(self) -> float:
        """The most the sweep can spend: the cells, and with --screen their resumes at the rungs."""
        return self.screening.most if self.screening else self.total

    @property
    def fits(self) -> bool | None:
        return None if self.limit is None else self.spend <= self.limit

    def phase_totals(self) -> dict[str, float]:
        return {p: sum(e.phases.get(p, 0.0) for e in self.estimates) for p in PHASES}

    def groups(self) -> Iterator[Group]:
        """The cells of each (model, task, trick set) together: expansion keeps them adjacent."""
        pairs = zip(self.cells, self.estimates)
        for (model, task, tricks), rows in itertools.groupby(pairs, key=lambda ce: (ce[0].model, ce[0].task, ce[0].tricks)):
            rows = list(rows)
            yield Group(model, task, tricks, [c.seed for c, _ in rows], rows[0][1], sum(e.total for _, e in rows))

    def _header(self) -> dict:
        screening = {} if self.screening is None else {"screening": self.screening.to_dict()}
        return {
            "name": self.name, "hardware": self.hardware.name, "unit": self.hardware.unit,
            "totals": {"cells": len(self.cells), "gpu_hours": self.total, "phases": self.phase_totals(),
                       "price_per_gpu_hour": self.price, "cost": self.cost},
            "budget": None if self.limit is None else {"tier": self.tier, "gpu_hours": self.limit},
            "fits": self.fits,
            "warnings": self.warnings,
            **screening,
        }

    def cell_rows(self) -> Iterator[dict]:
        for c, e in zip(self.cells, self.estimates):
            yield {"model": c.model, "task": c.task, "tricks": list(c.tricks), "seed": c.seed, "run_id": c.run_id,
                   "gpu_hours": e.total, "phases": e.phases, "devices": e.devices, "warnings": list(c.warnings)}

    def to_dict(self) -> dict:
        """Machine-readable plan (`grpo-lab plan --json`). Hours are device-hours: GPU-hours on GPU
        profiles, core-hours on the CPU profile (`unit` says which)."""
        return {**self._header(), "cells": list(self.cell_rows())}

    def json_chunks(self) -> Iterator[str]:
        """to_dict() as JSON text, a cell per line, made as it is written: a 200,000-cell plan as one
        dict and one dumps held every row twice in memory."""
        head = json.dumps(self._header(), indent=1)
        yield head[:-2] + ',\n "cells": ['
        for i, row in enumerate(self.cell_rows()):
            yield ("," if i else "") + "\n  " + json.dumps(row)
        yield "\n ]\n}\n"


@dataclass(frozen=True)
class Group:
    """The cells of one (model, task, trick set): they differ only by seed, and cost the same each."""

    model: str
    task: str
    tricks: tuple[str, ...]
    seeds: list[int]
    estimate: Estimate  # of each cell
    total: float

    def seed_text(self) -> str:
        """'0-199999' for a run of consecutive seeds, else the first few."""
        seeds = sorted(self.seeds)
        if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
            return f"{seeds[0]}-{seeds[-1]}"
        return ", ".join(map(str, seeds[:5])) + (", ..." if len(seeds) > 5 else "")


def plan_hardware(spec: MatrixSpec, hardware: str | None = None) -> Hardware:
    """The profile a plan prices on: `hardware`, else the budget's, else the CPU box."""
    return load_hardware(hardware or (spec.budget.hardware if spec.budget else DEFAULT_HARDWARE))


def sweep_name(name: str) -> str:
    """``name`` when it can name a sweep (its reports folder, its MLflow experiment); a ConfigError
    saying how to fix it otherwise, before anything is registered."""
    problem = name_problem(name)
    if problem:
        raise ConfigError(f"sweep name: {problem}; set `name:` in the matrix or pass --name")
    return name


def make_plan(spec: MatrixSpec, hardware: str | None = None, name: str = "matrix",
              calibrations: dict[str, Calibration] | None = None) -> Plan:
    """Expand and price `spec` on `hardware` (default: the budget's profile, else the CPU box),
    correcting each model's cells by its calibration from finished runs where one is given."""
    sweep_name(spec.name or name)
    budget = spec.budget
    hw = plan_hardware(spec, hardware)
    cells = expand(spec)
    warnings = list(dict.fromkeys(f"{arm_label(c.shared.tricks)}: {'; '.join(c.warnings)}" for c in cells if c.warnings))
    if () not in spec.trick_sets():
        warnings.append("no baseline arm: every effect and verdict is measured against the baseline, so the "
                        "report can only rank these trick sets; add `- baseline` to tricks")
    price = budget.price_per_gpu_hour if budget and budget.price_per_gpu_hour is not None else hw.price_per_gpu_hour
    return Plan(name=spec.name or name, hardware=hw, cells=cells, estimates=estimate_cells(cells, hw, calibrations),
                warnings=warnings, limit=budget.limit if budget else None, tier=budget.tier if budget else None,
                price=price, calibrations={m: c for m, c in (calibrations or {}).items()
                                           if m in {calibration_key(cell.shared.model, cell.shared.trainer) for cell in cells}})


def check_data(plan: Plan) -> None:
    """Read every data file the plan's runs name, as each run's setup will, and call each reward
    function once on its task's sample problems: a bad row, or a reward that raises, returns the
    wrong length or a non-number, fails the plan (ConfigError naming file, row, field or function)
    before anything is registered or trained, not each run minutes into its setup."""
    from grpo_lab.rewards import plugins
    from grpo_lab.tasks import make_task, task_options

    read = set()
    for cfg in {id(c.shared): c.shared for c in plan.cells}.values():
        functions = [f for f in plugins.configured(cfg.reward) if f.fn is not None]
        if cfg.data_path is None and cfg.data is None and not functions:
            continue
        register = cfg.register
        for name in cfg.tasks:
            options = task_options(cfg, name)
            key = json.dumps([name, register, options, [f.path for f in functions]], sort_keys=True, default=str)
            if key in read:
                continue
            read.add(key)
            try:
                task = make_task(name, register=register, **options)
            except (ValueError, OSError) as exc:  # DataError, a task's own check of its rows, a read
                raise ConfigError(str(exc)) from exc
            call_once(functions, task, cfg.difficulty)


SAMPLE_PROBLEMS = 2  # training problems each reward function is called on at plan time


def call_once(functions: list, task, difficulty) -> None:
    """Call each reward function on SAMPLE_PROBLEMS of the task's training problems, once with
    each problem's own solution and once with an empty completion, as a run's first step would."""
    from grpo_lab.rewards import plugins

    rows = task.problems("train", SAMPLE_PROBLEMS, seed=0, difficulty=difficulty)
    prompts, columns = plugins.batch_columns(rows + rows)
    completions = [p.solution for p in rows] + [""] * len(rows)
    for f in functions:
        try:
            plugins.call(f, prompts, completions, columns)
        except plugins.RewardFunctionError as exc:
            raise ConfigError(f"{exc} (called by the plan on {len(completions)} completions of task "
                              f"{task.name!r}: each sample problem's solution and an empty one)") from exc
