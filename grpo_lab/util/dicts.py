"""Nested-dict helpers shared by config resolution, tracking and tuning."""

from __future__ import annotations

import copy
from typing import Any


def deep_merge(base: dict, override: dict) -> dict:
    """A copy of `base` with `override` merged in: nested dicts merge key by key, anything else replaces."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def flatten(d: dict[str, Any], prefix: str = "", sep: str = ".") -> dict[str, Any]:
    """Nested dict -> {'a.b.c': leaf} (joined by `sep`); empty dicts stay as leaves."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out |= flatten(v, f"{prefix}{k}{sep}", sep)
        else:
            out[f"{prefix}{k}"] = v
    return out


def nest(flat: dict[str, Any]) -> dict:
    """{'kl.beta': 0.01} -> {'kl': {'beta': 0.01}}: the inverse of `flatten`."""
    out: dict = {}
    for key, value in flat.items():
        *parents, leaf = key.strip().split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
