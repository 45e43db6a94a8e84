"""`data:` reads a team's own files (JSONL, Parquet, CSV, a save_to_disk folder) with its field names."""

import json

import polars as pl
import pyarrow as pa
import pytest

from grpo_lab.spec.config import resolve
from grpo_lab.spec.sources import DataConfig
from grpo_lab.tasks import make_task
from grpo_lab.util.yamlio import ConfigError

ROWS = [{"q": f"What is {a} + {a}?", "gold": f"#### {2 * a}", "part": "train" if a % 4 else "test", "lvl": a % 2}
        for a in range(1, 21)]


def _write(folder, fmt, rows=ROWS):
    if fmt == "jsonl":
        path = folder / "d.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "parquet":
        path = folder / "d.parquet"
        pl.DataFrame(rows).write_parquet(path)
    elif fmt == "csv":
        path = folder / "d.csv"
        pl.DataFrame(rows).write_csv(path)
    elif _has_datasets():  # the reader then loads with datasets, which wants its own metadata too
        import datasets

        path = folder / "hf"
        datasets.Dataset.from_list(rows).save_to_disk(str(path))
    else:  # the layout datasets.Dataset.save_to_disk writes: Arrow stream files beside its metadata
        path = folder / "hf"
        path.mkdir()
        table = pa.Table.from_pylist(rows)
        with pa.OSFile(str(path / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
        (path / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    return str(path)


def _has_datasets() -> bool:
    """`datasets` is installed (the dev extra brings it with trl), so hf_disk folders are read by it."""
    import importlib.util

    return importlib.util.find_spec("datasets") is not None


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "csv", "hf_disk"])
def test_every_format_gives_the_same_problems(tmp_path, fmt):
    data = DataConfig(path=_write(tmp_path, fmt), format=fmt, prompt="q", answer="gold", split="part", difficulty="lvl")
    task = make_task("math", "natural", data=data)
    assert task.levels == 2
    train, test = task.problems("train", 15, seed=0), task.problems("test", 5, seed=0)
    assert {p.prompt.splitlines()[0] for p in test} == {r["q"] for r in ROWS if r["part"] == "test"}
    assert {p.target for p in train} == {str(2 * a) for a in range(1, 21) if a % 4}
    assert all(s.reward == 1.0 for s in task.score(train, [p.solution for p in train]))


def test_code_rows_take_tests_as_lists_or_json(tmp_path):
    rows = [{"task": "Write inc(x).", "checks": json.dumps(["assert inc(1) == 2"]), "ref": "def inc(x):\n    return x + 1"}]
    data = DataConfig(path=_write(tmp_path, "csv", rows), prompt="task", answer=None, tests="checks", solution="ref")
    task = make_task("code", "natural", data=data)
    problems = [p for split in ("train", "test") for p in task._data[split]]
    assert problems[0].target == ["assert inc(1) == 2"]


@pytest.mark.parametrize("row, message", [
    ({"q": "What?", "gold": ""}, "row 2: field 'gold' (data.answer) is missing or empty"),
    ({"q": "What?", "gold": "#### many"}, "row 2: field 'gold' (data.answer): math record has no numeric answer"),
    ({"question": "What?", "gold": "1"}, "row 2: field 'q' (data.prompt) is missing or empty; the row has gold, question"),
])
def test_bad_rows_name_file_row_and_field(tmp_path, row, message):
    path = _write(tmp_path, "jsonl", [{"q": "Fine?", "gold": "1"}, row])
    with pytest.raises(ValueError) as info:
        make_task("math", "natural", data=DataConfig(path=path, prompt="q", answer="gold"))
    assert f"{path}: {message}" in str(info.value)


def test_data_config_keys_are_checked_by_name():
    with pytest.raises(ConfigError, match="unknown key 'data.promt'.*did you mean 'prompt'"):
        resolve({"data": {"path": "x.jsonl", "promt": "q"}})
    with pytest.raises(ConfigError, match="field 'data': .*cannot tell the format of 'x.txt'"):
        resolve({"data": {"path": "x.txt"}})
    with pytest.raises(ConfigError, match="give data or data_path, not both"):
        resolve({"data": {"path": "x.jsonl"}, "data_path": "y.jsonl"})
