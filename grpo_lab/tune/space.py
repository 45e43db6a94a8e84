"""Search spaces: a YAML mapping of dotted run-config keys to distributions.

    kl.beta: {low: 0.001, high: 0.05, log: true}     # float (log-uniform)
    optim.warmup_steps: {low: 0, high: 20, step: 5}  # int: low and high are integers
    sampling.group_size: {choices: [4, 8, 16]}       # categorical

Every key is checked against the run config before any compute: its name (with a suggestion),
and each bound or choice resolved over the tuned base config, so a value the config rejects is
reported with the space file's line, not discovered by a failed trial.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from pydantic import BaseModel

from grpo_lab.spec.config import RunConfig, resolve
from grpo_lab.spec.tricks import load_catalog
from grpo_lab.util.dicts import flatten, nest
from grpo_lab.util.yamlio import ConfigError, load_yaml, suggest

SPEC_KEYS = ("low", "high", "log", "step", "choices")
FORM = "{low: L, high: H[, log: true][, step: S]} or {choices: [a, b, ...]}"


@dataclass(frozen=True)
class SearchSpace:
    source: str
    distributions: dict[str, BaseDistribution]  # dotted run-config key -> distribution


def config_keys(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[str]:
    """Every dotted leaf key of the run config ('kl.beta', 'sampling.group_size', ...)."""
    keys = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys += config_keys(ann, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def load_space(path: str | Path, base: dict, base_source: str = "<config>") -> SearchSpace:
    """Parse and check a space file against `base` (raw run-config data the trials start from)."""
    data, lines = load_yaml(path)
    source = str(path)
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{source}: a search space maps dotted run-config keys to distributions, "
                          f"e.g. 'kl.beta: {{low: 0.001, high: 0.05, log: true}}'")
    known = config_keys()
    trick_keys = _trick_keys(base)
    dists = {}
    for key, spec in data.items():
        where = f"{source}:{lines.get((key,), '?')}"
        key = str(key)
        if key not in known:
            raise ConfigError(f"{where}: '{key}' is not a run-config field{suggest(key, known)}"
                              + (" (write dotted keys: kl.beta, not nested mappings)" if "." not in key else ""))
        if key in trick_keys:
            raise ConfigError(f"{where}: '{key}' is set by trick '{trick_keys[key]}' of {base_source}, which would "
                              f"override the tuned value when the result is used as a matrix base: drop one of them")
        dists[key] = _distribution(spec, key, source, lines)
        for value in _samples(dists[key]):
            _check_value(base, key, value, where)
    return SearchSpace(source, dists)


def _distribution(spec: Any, key: str, source: str, lines: dict) -> BaseDistribution:
    def err(field: str | None, msg: str) -> ConfigError:
        line = lines.get((key, field)) or lines.get((key,), "?")
        return ConfigError(f"{source}:{line}: '{key}': {msg}")

    if not isinstance(spec, dict):
        raise err(None, f"a distribution is a mapping: {FORM} (got {spec!r})")
    for field in spec:
        if field not in SPEC_KEYS:
            raise err(field, f"unknown key '{field}'{suggest(field, SPEC_KEYS)}; a distribution is {FORM}")
    if "choices" in spec:
        extra = sorted(set(spec) - {"choices"})
        choices = spec["choices"]
        if extra:
            raise err(extra[0], f"give either choices or low/high, not both (got {extra})")
        if not isinstance(choices, list) or not choices:
            raise err("choices", f"choices must be a non-empty list (got {choices!r})")
        if any(c is not None and not isinstance(c, (bool, int, float, str)) for c in choices):
            raise err("choices", f"choices must be numbers, strings, booleans or null (got {choices!r})")
        return CategoricalDistribution(choices)
    return _numeric(spec, err)


def _number(value: Any) -> int | float | None:
    """A YAML number; also '1e-5', which YAML 1.1 reads as a string (it wants '1.0e-5')."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return value if isinstance(value, (int, float)) else None


def _numeric(spec: dict, err) -> BaseDistribution:
    for field in ("low", "high"):
        if field not in spec:
            raise err(None, f"missing '{field}'; a distribution is {FORM}")
        if _number(spec[field]) is None:
            raise err(field, f"'{field}' must be a number (got {spec[field]!r})")
    low, high, log = _number(spec["low"]), _number(spec["high"]), spec.get("log", False)
    step = spec.get("step")
    if step is not None and ((step := _number(step)) is None or step <= 0):
        raise err("step", f"'step' must be a positive number (got {spec['step']!r})")
    if low >= high:
        raise err("high", f"low must be below high (got low {low}, high {high})")
    if not isinstance(log, bool):
        raise err("log", f"'log' must be true or false (got {log!r})")
    if log and low <= 0:
        raise err("low", f"a log-uniform range needs low > 0 (got {low})")
    if log and step is not None:
        raise err("step", "give either log or step, not both (Optuna samples one or the other)")
    if all(isinstance(v, int) for v in (low, high, step or 1)):  # integers in YAML: an int knob
        return IntDistribution(low, high, log=log, step=step or 1)
    return FloatDistribution(float(low), float(high), log=log, step=step)


def _samples(dist: BaseDistribution) -> list[Any]:
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    return [dist.low, dist.high]


def _check_value(base: dict, key: str, value: Any, where: str) -> None:
    """Resolve the base with `key` at `value`: the run config's own validation decides."""
    try:
        resolve(base, where, overrides=nest({key: value}))
    except ConfigError as exc:
        raise ConfigError(f"{where}: '{key}': the value {value!r} is rejected by the run config: "
                          f"{str(exc).removeprefix(where + ': ')}") from None


def _trick_keys(base: dict) -> dict[str, str]:
    """Dotted keys set by the tricks the base names -> the trick that sets each."""
    catalog = load_catalog()
    return {key: name for name in base.get("tricks") or [] if name in catalog
            for key in flatten(catalog[name].settings)}
