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
