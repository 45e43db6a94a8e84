"""The budget-tier presets as data: experiments/presets.yaml, its trick lists resolved per task.

A tier names its tricks by name, by catalog dimension or setting, or per task (see the file's
header), so the presets follow the catalog without Python. spec/budget.py fits their steps.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import Field

from grpo_lab.spec.tricks import Dimension, Trick, load_catalog
from grpo_lab.util.paths import find
from grpo_lab.util.validate import Strict, validate
from grpo_lab.util.yamlio import ConfigError, load_yaml

OTHER = "other"  # the by_task key of every task not named


class CatalogPick(Strict):
    dimensions: list[Dimension] = Field([], description="catalog tricks of any of these dimensions")
    sets: list[str] = Field([], description="catalog tricks whose settings set any of these dotted keys")
    leave_out: list[str] = Field([], description="tricks left out of the pick")


class FromCatalog(Strict):
    catalog: CatalogPick = Field(description="tricks of the catalog, in catalog order")


class ByTask(Strict):
    by_task: dict[str, list[Pick]] = Field(description=f"task -> its list; '{OTHER}' for every other task")


Pick = Union[str, FromCatalog, ByTask]
ByTask.model_rebuild()


class Singles(Strict):
    singles: list[Pick] = Field(description="one arm per trick")


class Pairs(Strict):
    pairs: list[Pick] = Field(description="one arm per two of the tricks")


class Combos(Strict):
    combos: list[list[Pick]] = Field(description="one arm per list, its tricks stacked")


class NotesByTask(Strict):
    by_task: dict[str, list[str]] = Field(description=f"task -> its notes; '{OTHER}' for every other task")


class Tier(Strict):
    text: str = Field(description="what the tier does, the first note of its preset")
    seeds: int = Field(ge=1, description="seeds per arm")
    base: dict[str, Any] = Field(description="run settings over the model's scale base")
    tricks: list[Literal["baseline"] | Singles | Pairs | Combos] = Field(description="the matrix's tricks axis")
    notes: list[str | NotesByTask] = Field([], description="what was left out and why")


class Presets(Strict):
    min_steps: int = Field(ge=1, description="fitting a tier never cuts a run below this many steps")
    scale: dict[str, Any] = Field(description="run settings of a model without a shipped config")
    scale_on_gpu: dict[str, Any] = Field({}, description="merged over `scale` on GPU hardware")
    tiers: dict[str, Tier] = Field(description="tier (GPU-hours, spec/matrix.py TIERS) -> its preset")


def load_presets() -> Presets:
    path = find("experiments", "presets.yaml")
    data, lines = load_yaml(path)
    return validate(Presets, data, str(path), lines)


def _sets(trick: Trick, dotted: str) -> bool:
    node: Any = trick.settings
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _from_catalog(pick: CatalogPick) -> list[str]:
    return [t.name for t in load_catalog().values() if t.name not in pick.leave_out
            and (t.dimension in pick.dimensions or any(_sets(t, key) for key in pick.sets))]


def pick_tricks(items: list[Pick], task: str) -> list[str]:
    """The trick names of a preset's list for `task`, in order."""
    out: list[str] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, FromCatalog):
            out += _from_catalog(item.catalog)
        else:
            out += pick_tricks(item.by_task.get(task, item.by_task.get(OTHER, [])), task)
    return out


def tier_tricks(tier: Tier, task: str) -> list:
    """The tricks axis of the tier's matrix for `task`, as a matrix file writes it."""
    axis: list = []
    for entry in tier.tricks:
        if isinstance(entry, Singles):
            axis.append({"singles": pick_tricks(entry.singles, task)})
        elif isinstance(entry, Pairs):
            axis.append({"pairs": pick_tricks(entry.pairs, task)})
        elif isinstance(entry, Combos):
            axis.append({"combos": [pick_tricks(c, task) for c in entry.combos]})
        else:
            axis.append(entry)
    return axis


def tier_notes(tier: Tier, task: str) -> list[str]:
    return [n for note in tier.notes
            for n in ([note] if isinstance(note, str) else note.by_task.get(task, note.by_task.get(OTHER, [])))]


def get_tier(presets: Presets, tier: str) -> Tier:
    if tier not in presets.tiers:
        raise ConfigError(f"{find('experiments', 'presets.yaml')}: no preset for tier '{tier}'")
    return presets.tiers[tier]
