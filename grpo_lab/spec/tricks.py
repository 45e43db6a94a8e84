"""The trick catalog: named, documented config overrides read from experiments/tricks.yaml.

A trick is data, not code: it names settings of the trainer's mechanisms. Applying a list of
tricks deep-merges their overrides over the baseline, in order.
"""

from __future__ import annotations

import fnmatch
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from grpo_lab.util.dicts import deep_merge
from grpo_lab.util.paths import find_all, search_path
from grpo_lab.util.validate import validate
from grpo_lab.util.yamlio import ConfigError, load_yaml, suggest

Dimension = Literal["sampling", "advantage", "kl", "reward_shaping", "loss", "optimization"]
DIMENSIONS = get_args(Dimension)


class Direction(BaseModel):
    """Which way a signature metric of a trick's run moves against the baseline run's."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    move: Literal["up", "down"] = Field(description="the trick's run above (up) or below (down) the baseline's")
    check: Literal["every_step", "first_step"] = Field(
        description="every_step: never on the other side, strictly on its side once at least (values the "
                    "trick sets or bounds); first_step: strictly on its side at the first step, where both "
                    "runs still share the policy")


class Equivalents(BaseModel):
    """The same trick in the trainers a team ships: the config key and value, or "none"."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    trl: str = Field(description="TRL's GRPOConfig (1.16): 'key=value, ...', or 'none' (a reason may follow)")
    verl: str = Field(description="verl's ppo_trainer config (dotted Hydra keys)")
    openrlhf: str = Field(description="OpenRLHF's train_ppo_ray flags")
    _trl_keys: dict[str, Any] | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _parse_trl(self) -> "Equivalents":
        self._trl_keys = parse_switches(self.trl)  # read once, here: the TRL executor and `tricks` use it
        return self

    @property
    def trl_keys(self) -> dict[str, Any] | None:
        """The TRL switch as typed GRPOConfig keyword arguments; None where TRL has no faithful one."""
        return None if self._trl_keys is None else dict(self._trl_keys)


def parse_switches(text: str) -> dict[str, Any] | None:
    """'loss_type=dr_grpo, epsilon=3e-4, lr_scheduler_kwargs={min_lr_rate: 0.1}' -> typed values
    (int, float, bool, str, mapping); 'none' or 'none (why)' -> None. Commas inside braces or
    brackets do not split. A malformed entry is a ValueError naming it (the catalog's line)."""
    if text.strip().split(" ", 1)[0].lower() == "none":
        return None
    keys: dict[str, Any] = {}
    for item in _split_top(text):
        key, sep, raw = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise ValueError(f"TRL switch {item.strip()!r}: expected key=value (e.g. loss_type=grpo), or none")
        keys[key.strip()] = _scalar(raw.strip())
    return keys


def _split_top(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "{[") - (ch in "}]")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    return [s for s in items + [text[start:]] if s.strip()]


def _scalar(raw: str) -> Any:
    """YAML's reading of a value, except that 3e-4 is a float (YAML 1.1 reads it as a string)."""
    for number in (int, float):
        try:
            return number(raw)
        except ValueError:
            pass
    return yaml.safe_load(raw)


class Trick(BaseModel):
    """One entry of experiments/tricks.yaml: a named override of the baseline run config."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    dimension: Dimension
    settings: dict[str, Any]
    description: str
    source: str = ""
    signature: list[str] = Field([], description="metric keys (glob patterns) where the trick shows in a run")
    needs: dict[str, Any] = Field({}, description="run settings under which the signature can show")
    equivalents: Equivalents | None = Field(
        None, description="the trick's switch in TRL, verl and OpenRLHF, so a verdict here maps to one there")
    directions: dict[str, Direction] = Field(
        {}, description="signature metric -> the direction the trick implies, checked by tests/test_trick_contract.py")

    @model_validator(mode="after")
    def _directions_in_signature(self) -> "Trick":
        for metric in self.directions:
            if not any(fnmatch.fnmatch(metric, p) for p in self.signature):
                raise ValueError(f"direction of '{metric}': not a metric of the signature {self.signature}")
        return self


@lru_cache(maxsize=8)
def load_catalog(path: str | None = None) -> dict[str, Trick]:
    """The catalog of `path`, or of every experiments/tricks.yaml on the search path merged, a
    trick of a higher-priority file (the project's own) replacing the shipped one of its name."""
    files = [Path(path)] if path else list(reversed(find_all("experiments", "tricks.yaml")))
    if not files:
        raise ConfigError(f"no experiments/tricks.yaml on the search path ({', '.join(map(str, search_path('experiments')))})")
    catalog: dict[str, Trick] = {}
    for file in files:
        data, lines = load_yaml(file)
        for name, entry in (data or {}).get("tricks", {}).items():
            entry = {"name": name, **(entry or {})} if isinstance(entry, dict) or entry is None else entry
            catalog[name] = validate(Trick, entry, str(file), lines, at=("tricks", name))
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


def _merge_all(data: dict, names: list[str], source: str) -> dict:
    for name in names:
        data = deep_merge(data, get_trick(name, source).settings)
    return data


def apply_tricks(data: dict, source: str = "<config>") -> dict:
    """Deep-merge each named trick's settings over the baseline `data`, in order (later wins).

    The merged `tricks` list is part of the run id, so tricks that commute (the same resolved
    settings in either order, nearly always) are stored sorted: `[a, b]` and `[b, a]` are one run.
    Where order changes the settings, the written order is kept: a distinct run (`trick_notes`)."""
    names = list(data.get("tricks") or [])
    merged = _merge_all(data, names, source)
    canonical = sorted(names)
    if canonical != names and _merge_all(data, canonical, source) == merged:
        merged["tricks"] = canonical
    return merged


def trick_notes(names: list[str], resolved: list[str] | None = None) -> list[str]:
    """What a user should hear about a trick list as written (`names`): two tricks on one dimension
    (the study's orthogonality rule), and an order that apply_tricks kept because it changes the
    settings (`resolved`: the RunConfig's `tricks`, default `names`). Returned, not warned: the CLI
    prints them, a library caller decides."""
    notes = [f"'{a}' and '{b}' both act on dimension '{d}'" for d, a, b in same_dimension_pairs(names)]
    resolved = names if resolved is None else resolved
    if resolved != sorted(resolved):
        notes.append(f"the order of tricks {resolved} changes the resolved config (later wins); "
                     "this order is a run of its own")
    return notes
