"""The trick catalog: named, documented config overrides read from experiments/tricks.yaml.

A trick is data, not code: it names settings of the trainer's mechanisms. Applying a list of
tricks deep-merges their overrides over the baseline, in order.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from grpo_lab.util.paths import EXPERIMENTS
from grpo_lab.util.yamlio import ConfigError, load_yaml, suggest

DIMENSIONS = ("sampling", "advantage", "kl", "reward_shaping", "loss", "optimization")


@dataclass(frozen=True)
class Trick:
    name: str
    dimension: str
    settings: dict
    description: str
    source: str = ""
    signature: list = field(default_factory=list)  # metric keys where the trick shows in a run
    needs: dict = field(default_factory=dict)  # run settings under which the signature can show


class SameDimensionWarning(UserWarning):
    pass


@lru_cache(maxsize=8)
def load_catalog(path: str | None = None) -> dict[str, Trick]:
    path = Path(path) if path else EXPERIMENTS / "tricks.yaml"
    data, lines = load_yaml(path)
    catalog: dict[str, Trick] = {}
    for name, entry in (data or {}).get("tricks", {}).items():
        where = f"{path}:{lines.get(('tricks', name), '?')}"
        missing = {"dimension", "settings", "description"} - set(entry or {})
        if missing:
            raise ConfigError(f"{where}: trick '{name}' lacks {sorted(missing)}")
        unknown = set(entry) - {"dimension", "settings", "description", "source", "signature", "needs"}
        if unknown:
            raise ConfigError(f"{where}: trick '{name}' has unknown keys {sorted(unknown)}")
        if entry["dimension"] not in DIMENSIONS:
            raise ConfigError(
                f"{where}: trick '{name}' dimension '{entry['dimension']}' is not one of {DIMENSIONS}"
                f"{suggest(entry['dimension'], DIMENSIONS)}"
            )
        catalog[name] = Trick(name=name, **entry)
    return catalog


def get_trick(name: str, source: str = "<config>") -> Trick:
    catalog = load_catalog()
    if name not in catalog:
        raise ConfigError(
            f"{source}: unknown trick '{name}'{suggest(name, catalog)}; `grpo-lab tricks` lists them"
        )
    return catalog[name]


def same_dimension_pairs(names: list[str]) -> list[tuple[str, str, str]]:
    """(dimension, trick_a, trick_b) for every two tricks that act on the same dimension."""
    tricks = [get_trick(n) for n in names]
    return [
        (a.dimension, a.name, b.name)
        for i, a in enumerate(tricks)
        for b in tricks[i + 1 :]
        if a.dimension == b.dimension
    ]


class TrickOrderWarning(UserWarning):
    pass


def _merge_all(data: dict, names: list[str], source: str) -> dict:
    from grpo_lab.spec.config import deep_merge

    for name in names:
        data = deep_merge(data, get_trick(name, source).settings)
    return data


def apply_tricks(data: dict, source: str = "<config>") -> dict:
    """Deep-merge each named trick's settings over the baseline `data`, in order (later wins).

    The merged `tricks` list is part of the run id, so tricks that commute (the same resolved
    settings in either order, nearly always) are stored sorted: `[a, b]` and `[b, a]` are one run.
    Where order changes the settings, the written order is kept (a distinct run) and warned about."""
    names = list(data.get("tricks") or [])
    merged = _merge_all(data, names, source)
    canonical = sorted(names)
    if canonical != names:
        if _merge_all(data, canonical, source) == merged:
            merged["tricks"] = canonical
        else:
            warnings.warn(f"{source}: the order of tricks {names} changes the resolved config "
                          f"(later wins); this order is a run of its own", TrickOrderWarning)
    for dim, a, b in same_dimension_pairs(names):
        warnings.warn(f"{source}: tricks '{a}' and '{b}' both act on dimension '{dim}'", SameDimensionWarning)
    return merged
