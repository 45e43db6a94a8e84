import hashlib
import json

import pytest

from grpo_lab.spec.config import RunConfig, load_config
from grpo_lab.util.yamlio import ConfigError


def test_misspelt_key_names_key_file_and_line(tmp_path):
    p = tmp_path / "run.yaml"
    p.write_text("model: tiny\nsampling:\n  temprature: 0.9\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert f"{p}:3" in msg and "sampling.temprature" in msg and "temperature" in msg


def test_mistyped_value_names_field_and_line(tmp_path):
    p = tmp_path / "run.yaml"
    p.write_text("steps: 10\noptim:\n  lr: fast\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert f"{p}:3" in str(e.value) and "optim.lr" in str(e.value)


def test_set_overrides_and_run_id_is_stable():
    a = load_config(None, ["optim.lr=0.001", "sampling.group_size=4"])
    b = load_config(None, ["sampling.group_size=4", "optim.lr=1e-3"])
    assert a.optim.lr == 1e-3 and a.sampling.group_size == 4
    assert a.run_id() == b.run_id() != RunConfig().run_id()


def test_unknown_trick_suggests_close_name():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["tricks=[ema_refrence]"])
    assert "unknown trick 'ema_refrence' (did you mean 'ema_reference' or" in str(e.value)
    with pytest.raises(ConfigError) as e:
        load_config(None, ["tricks=[nonexistent_trick_xyz]"])
    assert "unknown trick 'nonexistent_trick_xyz'; `grpo-lab tricks` lists them" in str(e.value)  # nothing close


def test_set_override_errors_name_set_not_a_file_line(tmp_path):
    p = tmp_path / "run.yaml"
    p.write_text("steps: 5\noptim:\n  lr: 0.001\n")
    with pytest.raises(ConfigError) as e:
        load_config(p, ["optim.lr=fast", "sampling.temprature=0.5"])
    lines = sorted(str(e.value).splitlines())
    assert len(lines) == 2
    assert lines[0].startswith("--set: field 'optim.lr': Input should be a valid number")
    assert lines[1].startswith("--set: unknown key 'sampling.temprature' (did you mean 'temperature'")


# Settings added after runs were recorded: at their defaults they are not part of a run's identity.
LATER_SETTINGS = {"sandbox": True, "data": True, "trainer": True, "head_precision": True, "prompt_shots": True,
                  "reward": {"function", "functions", "verifier", "scoring", "combine"},
                  "loss": {"top_entropy_frac", "cov_frac", "clip_cov_lb", "clip_cov_ub", "kl_cov_coef",
                           "sapo_tau_pos", "sapo_tau_neg", "off_policy_mask", "entropy_schedule", "entropy_target",
                           "entropy_coef_delta", "entropy_coef_max"},
                  "vllm": {"tis_mode"}, "curriculum": {"retire_at"}, "sampling": {"staleness"}}


def test_run_id_changes_with_the_task_generator_version(monkeypatch):
    from grpo_lab.tasks import code as code_module

    cfg = RunConfig(model="tiny", task="code")
    v2 = cfg.run_id()
    monkeypatch.setattr(code_module.CodeTask, "generator_version", 1)
    v1 = cfg.run_id()
    assert v1 != v2  # runs on a changed generator are new runs, not finished ones
    monkeypatch.setattr(code_module.CodeTask, "generator_version", 3)
    assert cfg.run_id() not in (v1, v2)
    code = RunConfig(model="tiny", task="code", seed=1)  # both versions 1: the id is the plain config hash
    monkeypatch.setattr(code_module.CodeTask, "generator_version", 1)
    before = code.model_dump(mode="json", exclude=LATER_SETTINGS)
    assert code.run_id() == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]


def test_run_id_changes_with_the_task_grading_version(monkeypatch):
    """Runs graded before strict grading (math, logic, rg:) are other runs: a sweep never reuses
    a finished run whose rewards a hedge could earn."""
    from grpo_lab.tasks import math as math_module

    math = RunConfig(model="tiny", task="math")
    assert math.identity()["grading_versions"] == {"math": 2}
    strict = math.run_id()
    monkeypatch.setattr(math_module.MathTask, "grading_version", 1)
    before = math.model_dump(mode="json", exclude=LATER_SETTINGS)
    assert math.run_id() == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]
    assert math.run_id() != strict
    assert "grading_versions" not in RunConfig(model="tiny", task="code").identity()


def test_duplicate_yaml_key_names_file_line_and_key(tmp_path):
    from grpo_lab.spec.matrix import load_matrix

    p = tmp_path / "m.yaml"
    p.write_text("name: dup\nmodels: [tiny]\ntasks: [math]\nseeds: [0]\ntricks: [baseline]\nseeds: [5]\n")
    with pytest.raises(ConfigError) as e:
        load_matrix(p)
    assert f"{p}:6" in str(e.value) and "duplicate key 'seeds'" in str(e.value) and "line 4" in str(e.value)
    run = tmp_path / "run.yaml"
    run.write_text("sampling:\n  temperature: 0.9\n  group_size: 4\n  temperature: 1.0\n")
    with pytest.raises(ConfigError, match=r"run.yaml:4: duplicate key 'sampling.temperature'"):
        load_config(run)


def test_commuting_trick_order_is_one_run_and_order_that_matters_is_noted():
    from grpo_lab.spec.tricks import trick_notes

    a = load_config(None, ["tricks=[ema_reference, quantile_norm]"])
    b = load_config(None, ["tricks=[quantile_norm, ema_reference]"])
    assert a.run_id() == b.run_id() and b.tricks == ["ema_reference", "quantile_norm"]
    c = load_config(None, ["tricks=[quantile_norm, dr_grpo]"])
    d = load_config(None, ["tricks=[dr_grpo, quantile_norm]"])
    assert c.run_id() != d.run_id() and c.advantage != d.advantage  # order matters: two runs
    assert c.tricks == ["quantile_norm", "dr_grpo"]
    assert any("changes the resolved config" in n for n in trick_notes(c.tricks))
    assert not any("order" in n for n in trick_notes(a.tricks))


def test_sandbox_default_keeps_run_ids_and_unsafe_local_gets_its_own():
    from grpo_lab.spec.config import RunConfig

    assert "sandbox" not in RunConfig().identity()
    assert RunConfig(sandbox="unsafe-local").run_id() != RunConfig().run_id()


def test_configs_written_before_the_sandbox_setting_compare_equal_to_todays():
    import json as _json

    from grpo_lab.execution.sweep import _without_seed
    from grpo_lab.spec.config import RunConfig, comparable

    today = RunConfig().model_dump(mode="json")
    before = RunConfig().model_dump(mode="json", exclude=LATER_SETTINGS)
    assert _without_seed(today) == _without_seed(before)
    unsafe = RunConfig(sandbox="unsafe-local").model_dump(mode="json")
    assert _without_seed(unsafe) != _without_seed(before)
    assert comparable(_json.loads(_json.dumps(today))) == before


def test_prompt_shots_keep_old_run_ids_and_need_a_chat_model():
    from grpo_lab.spec.config import RunConfig

    assert "prompt_shots" not in RunConfig().identity()
    shot = RunConfig(model="smollm2-135m", prompt_shots=1)
    assert shot.run_id() != RunConfig(model="smollm2-135m").run_id()
    with pytest.raises(ValueError, match="prompt_shots: model tiny reads compact prompts"):
        RunConfig(prompt_shots=1)
    with pytest.raises(ValueError, match="prompt_shots: model smollm2-135m reads compact"):
        RunConfig(model="smollm2-135m", prompt_register="compact", prompt_shots=1)
    with pytest.raises(ValueError, match="prompt_shots: model tiny reads natural"):  # no chat, whatever its prompts
        RunConfig(prompt_register="natural", prompt_shots=1)
