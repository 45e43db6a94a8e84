import json

import polars as pl
import pytest
from typer.testing import CliRunner

from grpo_lab.analysis.results import frame_from_run_dirs, load_results
from grpo_lab.analysis.run_metrics import events_frame, steps_frame
from grpo_lab.cli import app
from grpo_lab.util.yamlio import ConfigError


def results_table() -> pl.DataFrame:
    rows = []
    for tricks, mu in (("", 0.30), ("a", 0.35), ("b", 0.36), ("a+b", 0.20)):
        rows += [{"model": "tiny", "task": "math", "tricks": tricks, "seed": s, "pass@1": mu + 0.005 * ((s * 7) % 5 - 2)}
                 for s in range(5)]
    return pl.DataFrame(rows)


def test_frame_from_run_dirs_lets_registry_labels_win(tiny_run):
    df = frame_from_run_dirs([({"model": "tiny", "tricks": ["kl_anneal"], "seed": 7, "run_id": "r1"}, tiny_run),
                              ({"run_id": "r2"}, tiny_run)])
    rows = {r["run_id"]: r for r in df.to_dicts()}
    assert (rows["r1"]["model"], rows["r1"]["tricks"], rows["r1"]["seed"]) == ("tiny", "kl_anneal", 7)
    assert rows["r2"]["tricks"] == "baseline" and rows["r2"]["model"].endswith("tiny-fast.yaml")
    assert rows["r1"]["pass@1"] == rows["r2"]["pass@1"] and rows["r1"]["task"] == "math"
    steps = steps_frame({"r1": tiny_run})  # frames read once can be handed in
    again = frame_from_run_dirs([({"run_id": "r1"}, tiny_run)], steps=steps, events=events_frame({"r1": tiny_run}))
    assert again.select("pass@1", "reward_auc", "alarms").row(0) == df.filter(pl.col("run_id") == "r2").select(
        "pass@1", "reward_auc", "alarms").row(0)


def test_load_results_reads_csv_and_parquet(tmp_path):
    df = results_table()
    df.write_csv(tmp_path / "r.csv")
    df.write_parquet(tmp_path / "r.parquet")
    for name in ("r.csv", "r.parquet"):
        got = load_results(tmp_path / name)
        assert got.height == 20 and set(got["tricks"]) == {"baseline", "a", "b", "a+b"}


def test_load_results_errors_name_the_file_and_the_column(tmp_path):
    results_table().rename({"tricks": "trick"}).write_csv(tmp_path / "r.csv")
    with pytest.raises(ConfigError, match=r"r\.csv: results table lacks column 'tricks' \(did you mean 'trick'\?\)"):
        load_results(tmp_path / "r.csv")
    with pytest.raises(ConfigError, match=r"r\.xlsx: unknown results format"):
        load_results(tmp_path / "r.xlsx")
    with pytest.raises(ConfigError, match="no such file"):
        load_results(tmp_path / "missing.csv")


def test_cli_interactions_table_and_json(tmp_path):
    results_table().write_csv(tmp_path / "r.csv")
    runner = CliRunner()
    out = runner.invoke(app, ["interactions", str(tmp_path / "r.csv"), "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert rows[0]["tricks"] == "a+b" and rows[0]["verdict"] == "harmful" and rows[0]["flagged"] is True
    out = runner.invoke(app, ["interactions", str(tmp_path / "r.csv"), "--delta", "0.01", "--logit"])
    assert out.exit_code == 0, out.output
    assert "+b" in out.output and "harmful" in out.output and "pass@1 (logit)" in out.output
    out = runner.invoke(app, ["interactions", str(tmp_path / "r.csv"), "--metric", "pass@k"])
    assert out.exit_code == 2 and "did you mean 'pass@1'" in out.output
