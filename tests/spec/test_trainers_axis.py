"""The matrix's `trainers:` axis: an arm is (model, task, trainer, trick set), the trainer spelt
into the arm's model label, and matrices without the axis keep their cells and run ids."""

import typing
from pathlib import Path

import pytest

from grpo_lab.spec.arm import DEFAULT_TRAINER, TRAINERS, Arm, arm_model, split_arm_model
from grpo_lab.spec.config import RunConfig
from grpo_lab.spec.matrix import expand, load_matrix, parse_matrix
from grpo_lab.spec.plan import make_plan
from grpo_lab.util.yamlio import ConfigError

BASE = {"levels": 2, "steps": 2}
TRICKS = ["baseline", {"singles": ["clip_higher"]}]


def spec(**over):
    return parse_matrix({"models": ["tiny"], "tasks": ["math"], "seeds": [0, 1], "tricks": TRICKS,
                         "base": dict(BASE), **over})


def test_the_arms_trainers_are_the_run_configs():
    assert TRAINERS == typing.get_args(RunConfig.model_fields["trainer"].annotation)
    assert RunConfig.model_fields["trainer"].default == DEFAULT_TRAINER


@pytest.mark.parametrize("model", ["tiny", "HuggingFaceTB/SmolLM2-135M-Instruct", "/models/a (v2)"])
def test_an_arms_model_label_reads_back_as_its_model_and_trainer(model):
    for trainer in TRAINERS:
        assert split_arm_model(arm_model(model, trainer)) == (model, trainer)
    assert arm_model(model) == model  # grpo-lab's trainer: the plain name, as before the axis
    arm = Arm.of(model, "math", "clip_higher", "trl")
    assert Arm.from_label(arm.model_label, "math", "clip_higher") == arm
    assert str(arm) == f"{model} (trl) / math / clip_higher"


# The first three run ids from before the axis existed (computed at 6b02d83^, the commit before it):
# matrices/quickstart.yaml, spec() and spec() with `trainer: trl` in base (no matrix file has one).
ROOT = Path(__file__).resolve().parents[2]
QUICKSTART_IDS = ["68cad41b603b", "60583f0c8583", "7b8ee220c2ef"]
SPEC_IDS = ["55ce46dea1f2", "856c878cb811", "e490c3a35cd9"]
SPEC_TRL_IDS = ["38e862b80ade", "2b5f82e0e12f", "8a90ea8ee6c7"]


def test_without_the_axis_and_with_only_grpo_lab_the_cells_and_run_ids_are_unchanged():
    before = expand(spec())
    assert [c.model for c in before] == ["tiny"] * 4
    assert [c.run_id for c in expand(load_matrix(ROOT / "matrices" / "quickstart.yaml"))[:3]] == QUICKSTART_IDS
    assert [c.run_id for c in before[:3]] == SPEC_IDS
    assert [c.run_id for c in expand(spec(trainers=["grpo-lab"]))[:3]] == SPEC_IDS
    assert [c.run_id for c in expand(spec(base={**BASE, "trainer": "trl"}))[:3]] == SPEC_TRL_IDS
    assert [c.run_id for c in expand(spec(trainers=["trl"]))[:3]] == SPEC_TRL_IDS
    assert {c.model for c in expand(spec(trainers=["trl"]))} == {"tiny (trl)"}


def test_two_trainers_multiply_the_arms_and_label_them():
    cells = expand(spec(trainers=["grpo-lab", "trl"]))
    assert len(cells) == 2 * 2 * 2 and len({c.run_id for c in cells}) == len(cells)
    assert [(c.model, c.config.trainer) for c in cells[::2]] == [
        ("tiny", "grpo-lab"), ("tiny", "grpo-lab"), ("tiny (trl)", "trl"), ("tiny (trl)", "trl")]
    assert all(c.config.model == "tiny" and c.run_id == c.config.run_id() for c in cells)
    ours = expand(spec())
    assert {c.run_id for c in ours} <= {c.run_id for c in cells}  # grpo-lab's cells are the same runs


def test_the_plan_groups_and_prices_each_trainer_on_its_own():
    plan = make_plan(spec(trainers=["grpo-lab", "trl"]))
    assert [(g.model, g.tricks) for g in plan.groups()] == [
        ("tiny", ()), ("tiny", ("clip_higher",)), ("tiny (trl)", ()), ("tiny (trl)", ("clip_higher",))]


def test_the_axis_and_a_base_trainer_at_once_are_refused_in_one_line_naming_field_and_file(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("models: [tiny]\ntasks: [math]\ntrainers: [grpo-lab, trl]\nbase: {levels: 2, trainer: trl}\n")
    with pytest.raises(ConfigError) as exc:
        load_matrix(path)
    assert "\n" not in str(exc.value) and f"{path}:3" in str(exc.value) and "field 'trainers'" in str(exc.value)


def test_the_axis_and_a_task_bases_trainer_at_once_are_refused_in_one_line(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("models: [tiny]\ntasks: [math]\ntrainers: [grpo-lab]\nbase: {levels: 2}\n"
                    "task_base:\n  math:\n    trainer: trl\n")
    with pytest.raises(ConfigError) as exc:  # the axis's grpo-lab would silently train math, not TRL
        load_matrix(path)
    assert "\n" not in str(exc.value) and f"{path}:7" in str(exc.value) and "task_base.math.trainer" in str(exc.value)


@pytest.mark.parametrize("trainers, match", [(["trll"], "unknown trainer 'trll'.*trl"),
                                             (["trl", "trl"], "names a trainer twice"), ([], "at least 1")])
def test_a_bad_trainers_axis_is_refused_at_its_line(tmp_path, trainers, match):
    with pytest.raises(ConfigError, match=match):
        spec(trainers=trainers)
