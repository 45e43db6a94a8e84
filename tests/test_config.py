import hashlib
import json

import pytest

from grpo_lab.config import RunConfig, load_config
from grpo_lab.yamlio import ConfigError


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
        load_config(None, ["tricks=[nonexistent_trick_xyz]"])
    assert "unknown trick 'nonexistent_trick_xyz'" in str(e.value)


def test_run_id_changes_with_the_task_generator_version(monkeypatch):
    from grpo_lab.tasks import code as code_module

    cfg = RunConfig(model="tiny", task="code")
    v2 = cfg.run_id()
    monkeypatch.setattr(code_module.CodeTask, "generator_version", 1)
    v1 = cfg.run_id()
    assert v1 != v2  # runs on a changed generator are new runs, not finished ones
    monkeypatch.setattr(code_module.CodeTask, "generator_version", 3)
    assert cfg.run_id() not in (v1, v2)
    math = RunConfig(model="tiny", task="math")  # version 1: the id is the plain config hash
    assert math.run_id() == hashlib.sha256(json.dumps(math.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:12]
