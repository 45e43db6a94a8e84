"""Without bubblewrap, code runs and sweeps end in one line before anything is written."""

from typer.testing import CliRunner

from grpo_lab.cli import app
from grpo_lab.rewards.sandbox import check_for

runner = CliRunner()


def test_run_and_sweep_of_the_code_task_refuse_without_bwrap(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no bwrap on it
    out = tmp_path / "run"
    res = runner.invoke(app, ["run", "--set", "task=code", "--out", str(out)])
    assert res.exit_code == 2 and "apt-get install bubblewrap" in res.output and "unsafe-local" in res.output
    assert not out.exists()
    matrix = tmp_path / "m.yaml"
    matrix.write_text("name: nobwrap\nmodels: [tiny]\ntasks: [code]\nseeds: [0]\ntricks: [baseline]\n")
    res = runner.invoke(app, ["sweep", str(matrix), "--workspace", str(tmp_path / "ws")])
    assert res.exit_code == 2 and "apt-get install bubblewrap" in res.output
    assert not (tmp_path / "ws" / "runs").exists()
    check_for(["math", "logic"], "bwrap")  # tasks that run no code do not need it
