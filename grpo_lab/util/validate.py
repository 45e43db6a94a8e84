"""One path from a pydantic error to a message a user can act on: file, line, field, suggestion.

Every YAML the user writes (run configs, matrices, trick catalog, model cards, hardware and runner
profiles) is validated with `validate`, so all of them report problems the same way:

    matrices/x.yaml:12: unknown key 'sampling.temprature' (did you mean 'temperature'?)
    matrices/x.yaml:14: field 'optim.lr': Input should be a valid number (got 'fast')
"""

from __future__ import annotations

from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from grpo_lab.util.yamlio import ConfigError, suggest

M = TypeVar("M", bound=BaseModel)
_TYPE_TAGS = {"str", "int", "float", "bool"}


class Strict(BaseModel):
    """A model where an unknown key is an error and assignments are validated too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def validate(model: type[M], data: Any, source: str, lines: dict[tuple, int] | None = None, *,
             at: tuple = (), overrides: dict | None = None) -> M:
    """`model.model_validate(data)`, or a ConfigError with one line per problem.

    lines: {key path: line} of the file `data` came from (util/yamlio.load_yaml); at: the key path
    of `data` inside that file (a trick entry sits at ('tricks', name)); overrides: values given on
    the command line (--set), whose problems are reported as '--set' rather than a file line."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise explain(exc, model, source, lines or {}, at=at, overrides=overrides or {}) from None


def explain(exc: ValidationError, model: type[BaseModel], source: str, lines: dict[tuple, int], *,
            at: tuple = (), overrides: dict | None = None) -> ConfigError:
    msgs = []
    for err in exc.errors():
        loc = _clean(err["loc"])
        field = ".".join(str(p) for p in loc) or "(root)"
        where = "--set" if loc and _given(overrides or {}, loc) else where_in(source, lines, at + loc)
        if err["type"] == "extra_forbidden":
            msgs.append(f"{where}: unknown key '{field}'{suggest(loc[-1], known_keys(model, loc))}")
        elif not loc:  # a check across fields: its input is the whole config, no help to a reader
            msgs.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            msgs.append(f"{where}: field '{field}': {msg} (got {err.get('input')!r})")
    return ConfigError("\n".join(dict.fromkeys(msgs)))


def _clean(loc: tuple) -> tuple:
    """The key path without the tags pydantic adds for union members and validators
    ('str', 'list[str]', 'function-after[...]')."""
    return tuple(p for p in loc if isinstance(p, int) or not (p in _TYPE_TAGS or "[" in p))


def where_in(source: str, lines: dict[tuple, int], loc: tuple) -> str:
    """'source:line' of the longest prefix of `loc` written in the file, else 'source'."""
    line = next((lines[loc[:i]] for i in range(len(loc), 0, -1) if loc[:i] in lines), None)
    return f"{source}:{line}" if line else source


def _given(overrides: dict, loc: tuple) -> bool:
    node: Any = overrides
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def known_keys(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the (nested) model that holds the last key of `loc`."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int) or part not in getattr(current, "model_fields", {}):
            continue
        current = _inner_model(current.model_fields[part].annotation)
    return list(getattr(current, "model_fields", {}))


def _inner_model(annotation: Any) -> Any:
    """The BaseModel inside an annotation such as `X`, `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for a in get_args(annotation) if (m := _inner_model(a)) is not None), None)
