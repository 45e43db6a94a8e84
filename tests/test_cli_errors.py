"""First-use mistakes end with one line naming what is wrong, before anything is written."""

import time

from typer.testing import CliRunner

from grpo_lab.cli import app

runner = CliRunner()


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


def test_unknown_task_and_model_fail_in_one_line_and_write_nothing(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, ["run", "--set", "task=maht", "--out", str(out)])
    assert res.exit_code == 2 and "'math'" in one_error_line(res.output) and "--set" in res.output
    res = runner.invoke(app, ["run", "--set", "model=tinyy", "--out", str(out)])
    assert res.exit_code == 2 and "did you mean 'tiny'" in one_error_line(res.output)
    assert not out.exists()


def test_missing_hub_model_fails_fast_without_retries(tmp_path, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = runner.invoke(app, ["run", "--set", "model=no-such-org/model", "--out", str(out)])
    assert res.exit_code == 2 and "HF_HUB_OFFLINE" in one_error_line(res.output)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    t0 = time.perf_counter()
    res = runner.invoke(app, ["run", "--set", "model=no-such-org/model", "--out", str(out)])
    # no network here: "unreachable"; with network: "not on the Hugging Face Hub"
    assert res.exit_code == 2 and "no-such-org/model" in one_error_line(res.output)
    assert time.perf_counter() - t0 < 20 and not out.exists()


def test_plan_names_file_and_line_of_unknown_hardware(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("name: x\nmodels: [tiny]\ntasks: [math]\nbudget: {hardware: h8000}\n")
    res = runner.invoke(app, ["plan", str(m)])
    assert res.exit_code == 2 and f"{m}:4" in one_error_line(res.output) and "'h800'" in res.output


def test_sweep_of_an_unreachable_hub_model_fails_before_preflight(tmp_path, monkeypatch):
    card = tmp_path / "ghost.yaml"
    card.write_text("name: ghost\nkind: hf\npath: no-such-org/model\nparams: 1000000\n")
    matrix = tmp_path / "m.yaml"
    matrix.write_text(f"name: ghost\nmodels: ['{card}']\ntasks: [math]\n")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    res = runner.invoke(app, ["sweep", str(matrix), "--workspace", str(tmp_path / "ws")])
    assert res.exit_code == 2 and "no-such-org/model" in res.output.splitlines()[-1]
    assert not (tmp_path / "ws").exists()


def test_preset_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "p.yaml"
    out.write_text("mine: keep\n")
    args = ["preset", "100", "--model", "tiny", "--task", "math", "--hardware", "cpu", "--out", str(out)]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code != 0 and "--force" in refused.output and out.read_text() == "mine: keep\n"
    assert CliRunner().invoke(app, [*args, "--force"]).exit_code == 0 and "models" in out.read_text()


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.startswith("grpo-lab 0.")
