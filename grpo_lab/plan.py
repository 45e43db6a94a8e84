"""A plan: every cell of a matrix with its estimated cost, the totals, the same-dimension warnings
and whether it fits its budget, all before any compute is spent (docs/design.md §2, §6)."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_lab.budget import PHASES, Estimate, estimate_cells
from grpo_lab.catalog import Hardware, load_hardware
from grpo_lab.matrix import DEFAULT_HARDWARE, Cell, MatrixSpec, expand


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

    @property
    def total(self) -> float:
        return sum(e.total for e in self.estimates)

    @property
    def cost(self) -> float:
        return self.total * self.price

    @property
    def fits(self) -> bool | None:
        return None if self.limit is None else self.total <= self.limit

    def phase_totals(self) -> dict[str, float]:
        return {p: sum(e.phases[p] for e in self.estimates) for p in PHASES}

    def to_dict(self) -> dict:
        """Machine-readable plan (`grpo-lab plan --json`). Hours are device-hours: GPU-hours on GPU
        profiles, core-hours on the CPU profile (`unit` says which)."""
        cells = [{"model": c.model, "task": c.task, "tricks": list(c.tricks), "seed": c.seed, "run_id": c.run_id,
                  "gpu_hours": e.total, "phases": e.phases, "devices": e.devices, "warnings": list(c.warnings)}
                 for c, e in zip(self.cells, self.estimates)]
        return {
            "name": self.name, "hardware": self.hardware.name, "unit": self.hardware.unit, "cells": cells,
            "totals": {"cells": len(cells), "gpu_hours": self.total, "phases": self.phase_totals(),
                       "price_per_gpu_hour": self.price, "cost": self.cost},
            "budget": None if self.limit is None else {"tier": self.tier, "gpu_hours": self.limit},
            "fits": self.fits,
            "warnings": self.warnings,
        }


def make_plan(spec: MatrixSpec, hardware: str | None = None, name: str = "matrix") -> Plan:
    """Expand and price `spec` on `hardware` (default: the budget's profile, else the CPU box)."""
    budget = spec.budget
    hw = load_hardware(hardware or (budget.hardware if budget else DEFAULT_HARDWARE))
    cells = expand(spec)
    warnings = list(dict.fromkeys(f"{'+'.join(c.shared.tricks)}: {'; '.join(c.warnings)}" for c in cells if c.warnings))
    price = budget.price_per_gpu_hour if budget and budget.price_per_gpu_hour is not None else hw.price_per_gpu_hour
    return Plan(name=spec.name or name, hardware=hw, cells=cells, estimates=estimate_cells(cells, hw),
                warnings=warnings, limit=budget.limit if budget else None, tier=budget.tier if budget else None,
                price=price)
