"""Every config key is described, every option set is what the code implements, and
`grpo-lab config` lists them."""

import json
import typing

import pytest
import torch
from pydantic import BaseModel
from typer.testing import CliRunner

from grpo_lab.cli import app
from grpo_lab.models.precision import HEAD_PRECISIONS
from grpo_lab.rewards.sandbox.isolation import ISOLATIONS
from grpo_lab.rewards.shaping import LENGTH_PENALTIES
from grpo_lab.rollout import ENGINES
from grpo_lab.spec import config as C
from grpo_lab.spec.fields import config_fields, type_name
from grpo_lab.spec.sources import DATA_FORMATS, DataConfig, RewardFunctionConfig
from grpo_lab.tasks.base import REGISTERS
from grpo_lab.trainer.advantages import NORMALIZERS
from grpo_lab.trainer.importance import IS_MODES
from grpo_lab.trainer.backend import BACKENDS
from grpo_lab.trainer.curriculum import MODES
from grpo_lab.trainer.executors import EXECUTORS
from grpo_lab.trainer.loss import AGGREGATIONS, KL_ESTIMATORS, WEIGHTINGS
from grpo_lab.trainer.reference import UPDATES
from grpo_lab.trainer.schedules import ENTROPY_SCHEDULES, KL_SCHEDULES, LR_SCHEDULES, WARMUPS
from grpo_lab.util.yamlio import ConfigError


def config_models(model=C.RunConfig, seen=None) -> list[type[BaseModel]]:
    """`model` and every model its fields hold, however nested (X | None, list[X])."""
    seen = [] if seen is None else seen
    seen.append(model)
    for field in model.model_fields.values():
        stack = [field.annotation]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel) and t not in seen:
                config_models(t, seen)
            stack += typing.get_args(t)
    return seen


def literal_fields():
    for model in config_models():
        for name, field in model.model_fields.items():
            for t in [field.annotation, *typing.get_args(field.annotation)]:
                if typing.get_origin(t) is typing.Literal:
                    yield model, name, set(typing.get_args(t))


# Each option set and the registry (or the one tuple of names) that implements it.
REGISTRIES = {
    (C.AdvantageConfig, "normalization"): NORMALIZERS,
    (C.LengthConfig, "kind"): LENGTH_PENALTIES,
    (C.KLConfig, "schedule"): KL_SCHEDULES,
    (C.KLConfig, "estimator"): KL_ESTIMATORS,
    (C.ReferenceConfig, "mode"): UPDATES,
    (C.LossConfig, "aggregation"): AGGREGATIONS,
    (C.LossConfig, "weighting"): WEIGHTINGS,
    (C.VLLMConfig, "tis_mode"): IS_MODES,
    (C.OptimConfig, "warmup"): WARMUPS,
    (C.OptimConfig, "schedule"): LR_SCHEDULES,
    (C.TrainBackendConfig, "name"): BACKENDS,
    (C.CurriculumConfig, "mode"): MODES,
    (C.RunConfig, "engine"): ENGINES,
    (C.RunConfig, "trainer"): EXECUTORS,
    (C.RunConfig, "sandbox"): ISOLATIONS,
    (C.RunConfig, "prompt_register"): REGISTERS,
    (DataConfig, "format"): DATA_FORMATS,
    (C.RunConfig, "dtype"): [n for n in ("float32", "bfloat16", "float16") if isinstance(getattr(torch, n), torch.dtype)],
    (C.RunConfig, "head_precision"): HEAD_PRECISIONS,
    (C.LossConfig, "entropy_schedule"): ENTROPY_SCHEDULES,
}
# Options read at several places of the trainer, each handling one value, so no one registry:
# a new option here needs each of those places.
SCATTERED = {
    (C.RewardConfig, "format"),  # trainer/scoring.py: the bonus in shape terms, the mask in loss_mask
    (C.RewardConfig, "shape_mode"),  # trainer/scoring.py and preflight
    (C.RewardConfig, "verifier"),  # trainer/setup.py passes it to the math task
    (C.RewardConfig, "scoring"),  # trainer/setup.py passes it to rg: tasks
    (C.LossConfig, "mask"),  # trainer/scoring.loss_mask
    (C.TrainBackendConfig, "zero_stage"),  # DeepSpeed's own stages, checked in TrainBackendConfig
    (RewardFunctionConfig, "role"),  # trainer/scoring.py sums main functions, adds shape ones as terms
    (C.RewardConfig, "combine"),  # trainer/scoring.py: sum in function_rewards, the rest in advantages.REWARD_COMBINERS
}


def test_every_field_of_every_config_model_has_a_description():
    models = config_models()
    assert len(models) >= 16
    missing = [f"{m.__name__}.{n}" for m in models for n, f in m.model_fields.items() if not (f.description or "").strip()]
    assert not missing, missing


def test_each_literal_equals_the_keys_of_its_registry():
    found = {(model, name): options for model, name, options in literal_fields()}
    assert set(found) == set(REGISTRIES) | SCATTERED, "classify each Literal in REGISTRIES or SCATTERED"
    for key, registry in REGISTRIES.items():
        assert found[key] == set(registry), f"{key[0].__name__}.{key[1]}: {found[key]} vs {set(registry)}"


def test_descriptions_leave_the_dump_and_run_id_alone():
    assert C.RunConfig().run_id() == C.RunConfig.model_validate({}).run_id()
    assert "description" not in json.dumps(C.RunConfig().model_dump(mode="json"))


def test_config_fields_list_dotted_keys_types_and_defaults():
    rows = {r.key: r for r in config_fields()}
    assert rows["sampling.group_size"].type == "int" and rows["sampling.group_size"].default == 8
    assert rows["advantage.normalization"].type == "zscore | quantile | batch_std | mean_only | rloo | reinforce_pp_baseline"
    assert rows["optim.betas"].default == [0.9, 0.99] and rows["reward.length.kind"].default == "none"
    assert rows["reward.functions[].function"].required and rows["data.path"].required
    assert "sampling" not in rows and "reward.length" not in rows  # a section is its keys
    assert all(r.description for r in rows.values())
    assert type_name(int | None) == "int | None" and type_name(list[int]) == "list[int]"


def test_config_section_filters_and_unknown_section_suggests():
    assert {r.key.split(".")[0] for r in config_fields("sampling")} == {"sampling"}
    assert [r.key for r in config_fields("kl.beta")] == ["kl.beta"]
    assert {r.key for r in config_fields("reward.length")} == {f"reward.length.{k}" for k in C.LengthConfig.model_fields}
    with pytest.raises(ConfigError, match="did you mean 'sampling'"):
        config_fields("samplng")


def test_config_command_table_and_json():
    runner = CliRunner()
    res = runner.invoke(app, ["config", "kl", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert {r["key"] for r in rows} == {f"kl.{k}" for k in C.KLConfig.model_fields}
    assert next(r for r in rows if r["key"] == "kl.estimator") == {
        "key": "kl.estimator", "type": "k1 | k2 | k3", "default": "k3", "required": False,
        "description": C.KLConfig.model_fields["estimator"].description}
    res = runner.invoke(app, ["config", "reference"], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "reference.ema_alpha" in res.output and "0.99" in res.output
    res = runner.invoke(app, ["config", "nope"])
    assert res.exit_code == 2 and res.output.startswith("error: unknown config section 'nope'")
