"""Datasets as their users keep them: JSON lines, Parquet, CSV or a `datasets.save_to_disk` folder.

`read_rows(cfg, path)` returns the rows with the config's field names mapped onto the canonical
ones (prompt, answer, tests, solution, difficulty, split), each tagged with its row number, so
every later error names the file, the row and the user's own field. Tables are read with polars;
an hf_disk folder with `datasets` when it is installed, else its Arrow files with pyarrow.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from grpo_lab.util.yamlio import ConfigError

CANONICAL = ("prompt", "answer", "tests", "solution", "difficulty", "split")


class DataError(ConfigError):
    """A dataset row the task cannot use; the message names file, row and field."""


def read_table(path: str, fmt: str) -> list[dict]:
    """The rows of one file (or hf_disk folder) as dicts of plain Python values."""
    import polars as pl

    if not Path(path).exists():
        raise DataError(f"{path}: no such {'folder' if fmt == 'hf_disk' else 'file'} (data.path)")
    try:
        if fmt == "jsonl":
            return pl.read_ndjson(path, infer_schema_length=None).to_dicts()
        if fmt == "parquet":
            return pl.read_parquet(path).to_dicts()
        if fmt == "csv":
            return pl.read_csv(path, infer_schema_length=0).to_dicts()  # strings; fields parsed below
    except pl.exceptions.PolarsError as e:
        bad = _bad_json_line(path) if fmt == "jsonl" else None
        raise DataError(bad or f"{path}: cannot read as {fmt}: {str(e).splitlines()[0]}") from None
    return _read_hf_disk(path)


def _bad_json_line(path: str) -> str | None:
    """'<path>: row N: ...' for the first line that is not one JSON object (polars says only
    where in the file's bytes it stopped), or None when every line is one."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                value = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as e:
                return (f"{path}: row {number}: not valid JSON ({e.msg} at column {e.colno}); each line of a "
                        f"JSON-lines file is one object, e.g. {{\"prompt\": \"...\", \"answer\": \"...\"}}")
            if not isinstance(value, dict):
                return f"{path}: row {number}: a JSON {type(value).__name__}, not an object with the row's fields"
    return None


def _read_hf_disk(path: str) -> list[dict]:
    try:
        import datasets
    except ModuleNotFoundError:
        datasets = None
    if datasets is not None:
        loaded = datasets.load_from_disk(path)
        if isinstance(loaded, datasets.DatasetDict):
            raise DataError(f"{path}: a DatasetDict; point data.path at one split's folder, or use "
                            "'{split}' in the path")
        return loaded.to_list()
    import pyarrow as pa

    files = sorted(Path(path).glob("data-*.arrow"))
    if not files:
        raise DataError(f"{path}: no data-*.arrow files (is it a datasets.save_to_disk folder of one split?)")
    rows: list[dict] = []
    for file in files:
        with pa.memory_map(str(file)) as source:
            rows += pa.ipc.open_stream(source).read_all().to_pylist()
    return rows


def read_rows(cfg, path: str, needs: tuple[str, ...]) -> list[dict]:
    """Canonical rows of ``path``; ``needs`` are the canonical fields the task requires."""
    mapping = {key: getattr(cfg, key) for key in CANONICAL if getattr(cfg, key) is not None}
    unset = [k for k in needs if k not in mapping]
    if unset:
        raise DataError(f"{path}: data.{unset[0]} is not set; this task reads a {unset[0]} field from every row")
    rows = read_table(path, cfg.format)
    out = []
    for number, row in enumerate(rows, 1):
        record: dict[str, Any] = {"_where": f"{path}: row {number}", "_row": row}
        for key, field in mapping.items():
            value = row.get(field)
            if _missing(value):
                if key in needs:
                    present = [str(k) for k, v in row.items() if not _missing(v)]
                raise DataError(f"{path}: row {number}: field {field!r} (data.{key}) is missing or empty; "
                                f"the row has {', '.join(present) or 'no fields'}")
                continue
            record[key] = _parsed(path, number, field, key, value)
        out.append(record)
    return out


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or (isinstance(value, str) and not value.strip())


def _parsed(path: str, number: int, field: str, key: str, value: Any) -> Any:
    """Field values in the type the tasks expect: a list of strings for tests, an int difficulty."""
    where = f"{path}: row {number}: field {field!r} (data.{key})"
    if key == "tests":
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.lstrip().startswith("[") else [value]
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: not a JSON list of tests ({e.msg})") from None
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(t, str) for t in value):
            raise DataError(f"{where}: expected a non-empty list of test strings, got {value!r:.80}")
        return list(value)
    if key == "difficulty":
        try:
            level = int(value)
        except (TypeError, ValueError):
            raise DataError(f"{where}: expected an integer level, got {value!r:.40}") from None
        if level < 0:
            raise DataError(f"{where}: negative difficulty {level}")
        return level
    return value if key == "answer" and not isinstance(value, str) else str(value)


def field_of(cfg, key: str) -> str:
    """The user's field name for a canonical key, for error messages."""
    return getattr(cfg, key, None) or key
