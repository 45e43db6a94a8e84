"""The one path from a pydantic error to a user-facing message (grpo_lab/util/validate.py), and
the YAML files that go through it (trick catalog, model cards, hardware profiles)."""

import pytest
from pydantic import Field

from grpo_lab.util.validate import Strict, known_keys, validate
from grpo_lab.util.yamlio import ConfigError, load_yaml


class Inner(Strict):
    alpha: float = Field(0.5, gt=0)
    beta: int = 1


class Outer(Strict):
    name: str = "x"
    inner: Inner = Inner()
    items: list[Inner] = []


def load(tmp_path, text):
    p = tmp_path / "f.yaml"
    p.write_text(text)
    data, lines = load_yaml(p)
    return p, data, lines


def test_unknown_nested_key_names_file_line_and_closest_field(tmp_path):
    p, data, lines = load(tmp_path, "name: a\ninner:\n  alpah: 2\n")
    with pytest.raises(ConfigError) as e:
        validate(Outer, data, str(p), lines)
    assert str(e.value) == f"{p}:3: unknown key 'inner.alpah' (did you mean 'alpha'?)"


def test_every_problem_gets_its_own_line_including_list_items(tmp_path):
    p, data, lines = load(tmp_path, "inner:\n  alpha: -1\nitems:\n  - beta: 2\n  - beta: two\n")
    msgs = str(pytest.raises(ConfigError, validate, Outer, data, str(p), lines).value).splitlines()
    assert msgs[0].startswith(f"{p}:2: field 'inner.alpha': Input should be greater than 0 (got -1)")
    assert msgs[1].startswith(f"{p}:5: field 'items.1.beta': Input should be a valid integer")
    assert len(msgs) == 2


def test_data_inside_a_file_is_located_by_its_key_path(tmp_path):
    p, data, lines = load(tmp_path, "entries:\n  first:\n    name: a\n    inner: {beta: 1, gamma: 2}\n")
    with pytest.raises(ConfigError, match=rf"{p}:4: unknown key 'inner.gamma'"):
        validate(Outer, data["entries"]["first"], str(p), lines, at=("entries", "first"))


def test_command_line_overrides_are_named_as_set():
    with pytest.raises(ConfigError, match=r"^--set: field 'inner.alpha'"):
        validate(Outer, {"inner": {"alpha": 0}}, "run.yaml", {}, overrides={"inner": {"alpha": 0}})


def test_known_keys_walks_optional_and_list_annotations():
    assert known_keys(Outer, ("inner", "x")) == ["alpha", "beta"]
    assert known_keys(Outer, ("items", 0, "x")) == ["alpha", "beta"]
    assert known_keys(Outer, ("x",)) == ["name", "inner", "items"]


def test_trick_catalog_entries_are_validated_with_lines(tmp_path):
    from grpo_lab.spec.tricks import load_catalog

    p = tmp_path / "tricks.yaml"
    p.write_text("tricks:\n  ok:\n    dimension: kl\n    settings: {kl: {beta: 0.1}}\n    description: d\n"
                 "  bad:\n    dimension: samplng\n    settings: {}\n    description: d\n    signatur: [x]\n")
    msgs = str(pytest.raises(ConfigError, load_catalog, str(p)).value).splitlines()
    assert msgs[0].startswith(f"{p}:7: field 'dimension': Input should be 'sampling'")
    assert msgs[1] == f"{p}:10: unknown key 'signatur' (did you mean 'signature'?)"
    p.write_text("tricks:\n  lacks:\n    dimension: kl\n")
    msg = str(pytest.raises(ConfigError, load_catalog, str(p)).value)
    assert f"{p}:2: field 'settings': Field required" in msg and f"{p}:2: field 'description'" in msg


def test_hardware_profile_errors_name_the_line(tmp_path):
    from grpo_lab.spec.model_cards import load_hardware

    p = tmp_path / "hw.yaml"
    p.write_text("name: x\npeak_flops: fast\n")
    with pytest.raises(ConfigError, match=rf"{p}:2: field 'peak_flops': Input should be a valid number"):
        load_hardware(str(p))
