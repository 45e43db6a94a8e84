"""The run config's keys as rows (dotted key, type, default, description), for `grpo-lab config`."""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from grpo_lab.spec.config import RunConfig
from grpo_lab.util.yamlio import ConfigError, suggest


@dataclass(frozen=True)
class FieldRow:
    key: str  # dotted, e.g. sampling.group_size; reward.functions[].weight for list entries
    type: str
    default: Any  # JSON-able; None when required
    description: str
    required: bool = False


def type_name(annotation: Any) -> str:
    """A type as a user writes the value: `zscore | quantile`, `int | None`, `list[int]`."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " | ".join(str(a) for a in args)
    if origin in (Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def _nested(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The model inside a section (`X`, `X | None`) or a list of entries (`list[X]`), with the key suffix."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list and args and _nested(args[0]):
        return _nested(args[0])[0], "[]"
    if origin in (Union, types.UnionType):
        models = [n for a in args if a is not type(None) and (n := _nested(a))]
        return models[0] if len(models) == 1 else None
    return None


def _default(field) -> Any:
    if field.is_required():
        return None
    value = field.get_default(call_default_factory=True)
    return json.loads(json.dumps(value.model_dump(mode="json") if isinstance(value, BaseModel) else value))


def model_rows(model: type[BaseModel], prefix: str = "") -> list[FieldRow]:
    """One row per leaf key of `model`, sections and list entries expanded into their own keys."""
    rows = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        nested = _nested(field.annotation)
        if nested is None or not isinstance(field.get_default(), BaseModel):  # a section is only its keys
            rows.append(FieldRow(key, type_name(field.annotation), _default(field), field.description or "",
                                 field.is_required()))
        if nested:
            rows += model_rows(nested[0], f"{key}{nested[1]}.")
    return rows


def config_fields(section: str | None = None) -> list[FieldRow]:
    """Every key of a run config, or those of one section (`sampling`, `reward.length`) or key."""
    rows = model_rows(RunConfig)
    if section is None:
        return rows
    picked = [r for r in rows if r.key == section or r.key.startswith(f"{section}.")]
    if not picked:
        sections = sorted({r.key.split(".")[0] for r in rows if "." in r.key})
        near = suggest(section, [r.key for r in rows] if "." in section else sections)
        raise ConfigError(f"unknown config section '{section}'{near}; sections: {', '.join(sections)}")
    return picked
