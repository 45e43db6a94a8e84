"""Ray, submitit and Optuna are extras: a command that needs one that is not installed says, in
one line and before any compute, which extra to install."""

from __future__ import annotations

import sys

from typer.testing import CliRunner

from grpo_lab.cli import app
from tests.execution.sweeps import write_matrix

runner = CliRunner()


def test_a_runner_without_its_extra_names_the_extra_before_any_run(tmp_path, monkeypatch):
    matrix = write_matrix(tmp_path)
    for module, extra in (("ray", "grpo-lab[ray]"), ("submitit", "grpo-lab[slurm]")):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError, as when not installed
        name = "slurm" if module == "submitit" else module
        res = runner.invoke(app, ["sweep", str(matrix), "--runner", name, "--workspace", str(tmp_path / "ws")])
        assert res.exit_code != 0 and extra in res.output, res.output
        assert "Traceback" not in res.output
    assert not list((tmp_path / "ws").glob("runs/*/metrics.jsonl"))  # nothing trained


def test_tune_without_optuna_names_its_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    res = runner.invoke(app, ["tune", "tests/data/tiny-fast.yaml", "--space", "experiments/spaces/core.yaml",
                              "--trials", "2", "--workspace", str(tmp_path)])
    assert res.exit_code != 0 and "pip install 'grpo-lab[tune]'" in res.output and "Traceback" not in res.output
