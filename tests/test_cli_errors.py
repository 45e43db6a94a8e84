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


def data_matrix(folder, rows: str, **base) -> str:
    """A one-cell matrix on a JSON-lines file holding `rows`."""
    (folder / "rows.jsonl").write_text(rows)
    matrix = folder / "m.yaml"
    extra = "".join(f"  {k}: {v}\n" for k, v in base.items())
    matrix.write_text(f"name: mine\nmodels: [tiny]\ntasks: [math]\nseeds: [0]\nbase:\n  steps: 2\n{extra}"
                      f"  data: {{path: {folder / 'rows.jsonl'}, prompt: problem, answer: solution}}\n")
    return str(matrix)


GOOD = '{"problem": "What is 2 + 3?", "solution": "5"}\n'


def test_plan_reads_the_data_and_names_the_row_of_a_json_syntax_error(tmp_path):
    res = runner.invoke(app, ["plan", data_matrix(tmp_path, GOOD + '{"problem": "What is 4 + 1?", "solution": "5"\n')])
    line = one_error_line(res.output)
    assert res.exit_code == 2 and "rows.jsonl: row 2: not valid JSON" in line and "one object" in line


def test_a_jsonl_row_that_is_not_an_object_is_named(tmp_path):
    res = runner.invoke(app, ["plan", data_matrix(tmp_path, GOOD + "[1, 2]\n")])
    assert res.exit_code == 2 and "rows.jsonl: row 2: a JSON list, not an object" in one_error_line(res.output)


def test_an_answer_that_is_not_a_number_is_named_by_row_and_field(tmp_path):
    res = runner.invoke(app, ["plan", data_matrix(tmp_path, '{"problem": "What is 2 + 3?", "solution": "five"}\n')])
    line = one_error_line(res.output)
    assert res.exit_code == 2 and "rows.jsonl: row 1: field 'solution' (data.answer)" in line and "'five'" in line
    assert "write it as a value ('5'" in line


def test_a_setting_that_is_not_a_number_names_file_line_and_key(tmp_path):
    res = runner.invoke(app, ["plan", data_matrix(tmp_path, GOOD, optim="{lr: abc}")])
    assert res.exit_code == 2 and f"{tmp_path / 'm.yaml'}:7: field 'optim.lr'" in one_error_line(res.output)


def test_negative_seeds_are_refused_naming_file_and_line(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("name: x\nmodels: [tiny]\ntasks: [math]\nseeds: [0, -1]\n")
    res = runner.invoke(app, ["plan", str(m)])
    line = one_error_line(res.output)
    assert res.exit_code == 2 and f"{m}:4: field 'seeds'" in line and "seed -1 is negative" in line


def test_a_negative_seed_for_one_run_is_refused_naming_the_key(tmp_path):
    res = runner.invoke(app, ["run", "experiments/configs/tiny-math.yaml", "--set", "seed=-1", "--out", str(tmp_path / "r")])
    line = one_error_line(res.output)
    assert res.exit_code == 2 and "seed" in line and "greater than or equal to 0" in line
    assert not (tmp_path / "r" / "metrics.jsonl").exists()


def test_a_missing_model_folder_is_not_found_with_the_nearest_one(tmp_path, monkeypatch):
    (tmp_path / "models" / "mine2").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    m = tmp_path / "m.yaml"
    m.write_text("name: x\nmodels: [./models/mine]\ntasks: [math]\n")
    line = one_error_line(runner.invoke(app, ["plan", str(m)]).output)
    assert "model folder './models/mine' not found (did you mean './models/mine2'?)" in line


def test_an_unwritable_workspace_is_one_line_naming_it(tmp_path):
    (tmp_path / "file").write_text("")  # a path through a file: unwritable even for root
    res = runner.invoke(app, ["sweep", data_matrix(tmp_path, GOOD), "--workspace", str(tmp_path / "file" / "ws")])
    line = one_error_line(res.output)
    assert res.exit_code == 2 and f"cannot write the workspace {tmp_path / 'file' / 'ws'}" in line


def test_the_traceback_goes_to_the_error_log_not_the_screen(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_LAB_CACHE", str(tmp_path / "cache"))
    res = runner.invoke(app, ["plan", data_matrix(tmp_path, GOOD + "not json\n")])
    assert "Traceback" not in res.output and "row 2" in one_error_line(res.output)
    log = (tmp_path / "cache" / "errors.log").read_text()
    assert "grpo-lab" in log and "Traceback" in log and "DataError: " in log and "read_table" in log


def test_a_sweep_stopped_by_preflight_registers_nothing(tmp_path, monkeypatch):
    from grpo_lab.execution import driver
    from grpo_lab.execution import registry as reg

    def red(plan, done, on_event):
        raise driver.PreflightFailed("preflight tiny/math: red flags (reward_signal)")

    monkeypatch.setattr(driver, "_preflight", red)
    ws = tmp_path / "ws"
    res = runner.invoke(app, ["sweep", data_matrix(tmp_path, GOOD), "--workspace", str(ws)])
    assert res.exit_code == 2 and res.output.splitlines()[-1].startswith("error: preflight tiny/math")
    with reg.connect(reg.default_url(ws))() as s:  # so the fixed matrix is not "changed under the same name"
        assert reg.all_sweeps(s) == [] and s.query(reg.Run).count() == 0


def test_a_hub_id_without_a_card_names_the_nearest_card(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("name: x\nmodels: [Qwen/Qwen2.5-7B-Instrut]\ntasks: [math]\n")
    line = one_error_line(runner.invoke(app, ["plan", str(m)]).output)
    assert "'Qwen/Qwen2.5-7B-Instrut' has no card" in line and "did you mean the card 'qwen2.5-7b'" in line


REWARDS = '''
def raising(prompts, completions, **columns):
    return [1.0 / len(c) for c in completions]  # an empty completion divides by zero


def short(prompts, completions, **columns):
    return [1.0]


def fine(prompts, completions, answer, **columns):
    return [float(c.strip() == a) for c, a in zip(completions, answer)]
'''


def reward_matrix(folder, name: str) -> str:
    (folder / "my_rewards.py").write_text(REWARDS)
    return data_matrix(folder, GOOD * 3, reward=f"{{function: '{folder / 'my_rewards.py'}:{name}'}}")


def test_plan_calls_each_reward_once_and_names_the_one_that_breaks(tmp_path):
    res = runner.invoke(app, ["plan", reward_matrix(tmp_path, "raising")])
    line = one_error_line(res.output)
    assert res.exit_code == 2 and "reward.function" in line and "raised ZeroDivisionError" in line
    assert "called by the plan" in line
    res = runner.invoke(app, ["plan", reward_matrix(tmp_path, "short")])
    assert res.exit_code == 2 and "returned 1 values for 4 completions" in one_error_line(res.output)
    res = runner.invoke(app, ["plan", reward_matrix(tmp_path, "fine")])
    assert res.exit_code == 0, res.output


def test_a_trl_run_without_trl_installed_fails_in_one_line_and_writes_nothing(tmp_path, monkeypatch):
    import importlib.util

    from grpo_lab.execution import driver

    real = importlib.util.find_spec
    monkeypatch.setattr(driver, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a))
    out = tmp_path / "run"
    res = runner.invoke(app, ["run", "--set", "trainer=trl", "--out", str(out)])
    assert res.exit_code == 2 and 'needs TRL 1.16: pip install -e ".[bench]"' in one_error_line(res.output)
    assert not out.exists()
