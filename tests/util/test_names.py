"""Names that become folders: a sweep's name never leads outside reports/."""

from pathlib import Path

import pytest

from grpo_lab.spec.matrix import load_matrix
from grpo_lab.spec.plan import make_plan, sweep_name
from grpo_lab.util.names import check_name, inside, name_problem
from grpo_lab.util.yamlio import ConfigError

BAD = ["../../x", "..", ".", "a/b", "a\\b", "/etc", "x\n", "tab\there", "nul\x00", "", " lead",
       "-rf", ".hidden", "a" * 129, "dot\u2024dot", "ten tricks"]
GOOD = ["quickstart", "ten_tricks_evaldesign", "tune-tiny-math-lr", "v1.2", "a=b@c+d", "A" * 128]


@pytest.mark.parametrize("name", BAD)
def test_names_that_are_not_one_plain_component_are_refused_with_a_fix(name):
    problem = name_problem(name)
    assert problem is not None
    with pytest.raises(ValueError, match="sweep"):
        check_name(name, "sweep")
    if name and len(name) <= 128:
        fixed = problem.rsplit("e.g. ", 1)[1].strip("'")
        assert name_problem(fixed) is None  # the suggestion itself is a valid name


@pytest.mark.parametrize("name", GOOD)
def test_plain_names_pass_unchanged(name):
    assert check_name(name) == name


def test_inside_keeps_the_path_under_its_root(tmp_path):
    assert inside(tmp_path, "quickstart") == tmp_path / "quickstart"
    with pytest.raises(ValueError):
        inside(tmp_path, "../../x")


def test_a_matrix_name_with_a_path_is_refused_at_load_naming_file_and_line(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text('models: [tiny]\ntasks: [math]\nname: "../../x"\n')
    msg = str(pytest.raises(ConfigError, load_matrix, p).value)
    assert f"{p}:3" in msg and "name" in msg and "'x'" in msg
    assert not (tmp_path.parent.parent / "x").exists()


def test_plan_and_name_override_refuse_a_bad_name_before_any_run(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text("models: [tiny]\ntasks: [math]\n")
    assert make_plan(load_matrix(p), name="ok").name == "ok"
    with pytest.raises(ConfigError, match="--name"):
        make_plan(load_matrix(p), name="../up")
    with pytest.raises(ConfigError, match="sweep name"):
        sweep_name("a/b")


def test_a_sweep_with_a_bad_name_on_the_command_line_registers_nothing(tmp_path):
    from typer.testing import CliRunner

    from grpo_lab.cli import app

    p = tmp_path / "m.yaml"
    p.write_text("models: [tiny]\ntasks: [math]\nbase: {steps: 1}\n")
    ws = tmp_path / "ws"
    result = CliRunner().invoke(app, ["sweep", str(p), "--name", "../../escape", "--workspace", str(ws)])
    assert result.exit_code != 0
    assert "sweep name" in result.output and "Traceback" not in result.output
    assert not (tmp_path.parent / "escape").exists()
    assert not list(Path(ws).glob("runs/*"))
