"""trainer: trl planning: each catalog trick's TRL switch lands in the GRPOConfig the executor builds,
a trick or setting TRL cannot express is refused by name before any compute, and the field leaves
the run ids of grpo-lab runs as they were."""

import dataclasses

import pytest

from grpo_lab.spec.matrix import expand, parse_matrix
from grpo_lab.spec.trl_map import grpo_config_keys, trl_refusals, updates_per_step
from grpo_lab.spec.tricks import load_catalog, parse_switches
from grpo_lab.util.yamlio import ConfigError
from tests.conftest import TINY_FAST, tiny_cfg

MAPPED = sorted(n for n, t in load_catalog().items() if t.equivalents and t.equivalents.trl_keys is not None)
UNMAPPED = sorted(n for n in load_catalog() if n not in MAPPED)


def test_switches_are_read_into_typed_values():
    assert parse_switches("loss_type=dr_grpo, scale_rewards=none") == {"loss_type": "dr_grpo", "scale_rewards": "none"}
    assert parse_switches("epsilon=3e-4, num_iterations=2, sync_ref_model=true") == {
        "epsilon": 3e-4, "num_iterations": 2, "sync_ref_model": True}
    assert parse_switches("lr_scheduler_kwargs={min_lr_rate: 0.1, x: 2}, warmup_steps=5") == {
        "lr_scheduler_kwargs": {"min_lr_rate": 0.1, "x": 2}, "warmup_steps": 5}
    assert parse_switches("none") is None and parse_switches("none (TRL's RLOOTrainer)") is None
    with pytest.raises(ValueError, match="expected key=value"):
        parse_switches("num_generations 16")


@pytest.mark.parametrize("name", MAPPED)
def test_a_mapped_tricks_switch_lands_in_the_grpo_config(name):
    trl = pytest.importorskip("trl")
    switch = load_catalog()[name].equivalents.trl_keys
    cfg = tiny_cfg(trainer="trl", tricks=[name], sampling={"prompts_per_step": 4, "group_size": 4})
    keys = grpo_config_keys(cfg)
    assert {k: keys[k] for k in switch} == switch
    fields = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
    assert set(keys) <= fields, set(keys) - fields
    args = trl.GRPOConfig(output_dir="/tmp/unused", use_cpu=True, report_to="none", **keys)
    for key, value in switch.items():
        assert getattr(args, key) == value, key
    # one grpo-lab step is one generation batch, trained on by the switch's updates
    assert args.generation_batch_size == cfg.sampling.prompts_per_step * keys["num_generations"]
    assert args.max_steps == cfg.steps * updates_per_step(keys)


def test_the_baseline_maps_onto_grpo_config_keys():
    keys = grpo_config_keys(tiny_cfg(trainer="trl"))
    assert keys["num_generations"] == 4 and keys["per_device_train_batch_size"] == 16
    assert keys["loss_type"] == "dapo" and keys["scale_rewards"] == "group" and keys["beta"] == 0.01
    assert keys["max_completion_length"] == 6 and keys["top_k"] == 0 and keys["max_steps"] == 4


@pytest.mark.parametrize("name", UNMAPPED)
def test_a_trick_without_a_trl_switch_is_refused_by_name(name):
    with pytest.raises(ConfigError, match=f"trick '{name}' has no faithful TRL mapping"):
        tiny_cfg(trainer="trl", tricks=[name])
    tiny_cfg(tricks=[name])  # grpo-lab's own trainer runs it


def test_a_matrix_cell_with_an_unmapped_trick_is_refused_at_plan_time_naming_trick_and_matrix(tmp_path):
    data = {"models": [TINY_FAST], "tasks": ["math"], "seeds": [0],
            "tricks": ["baseline", {"singles": ["clip_higher", "kl_anneal"]}],
            "base": {"trainer": "trl", "levels": 2, "steps": 2}}
    spec = parse_matrix(data, str(tmp_path / "two.yaml"))
    with pytest.raises(ConfigError) as err:
        expand(spec)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and "two.yaml" in message and "'kl_anneal'" in message, message
    assert len(expand(parse_matrix({**data, "tricks": ["baseline", {"singles": ["clip_higher"]}]}))) == 2


def test_settings_no_rule_maps_are_refused_and_an_overridden_trick_too():
    assert trl_refusals(tiny_cfg(trainer="grpo-lab", curriculum={"mode": "adaptive"})) == [
        "setting curriculum.mode='adaptive' has no TRL equivalent here"]
    tiny_cfg(trainer="trl", alarms={"stop_on": ["nan"]})  # grpo-lab's alarms watch a TRL run too
    with pytest.raises(ConfigError, match="overrides trick 'clip_higher'"):
        tiny_cfg(trainer="trl", tricks=["clip_higher"], after={"loss": {"clip_high": 0.3}})


def test_the_default_trainer_keeps_run_ids_and_trl_is_a_run_of_its_own():
    cfg = tiny_cfg()
    assert "trainer" not in cfg.identity()
    assert tiny_cfg(trainer="trl").run_id() != cfg.run_id()


def test_runs_of_one_model_under_two_trainers_calibrate_their_own_cells():
    from grpo_lab.spec.budget import Calibration, calibration_key, estimate_cells
    from grpo_lab.spec.model_cards import load_hardware

    data = {"models": [TINY_FAST], "tasks": ["math"], "tricks": ["baseline"], "base": {"levels": 2, "steps": 2}}
    ours = expand(parse_matrix(data))
    trl = expand(parse_matrix({**data, "base": {**data["base"], "trainer": "trl"}}))
    slow = {calibration_key(TINY_FAST, "trl"): Calibration({"sampling": 8.0, "training": 4.0}, 0.01, 4)}
    hw = load_hardware("cpu")
    assert estimate_cells(ours, hw, slow) == estimate_cells(ours, hw)  # TRL's runs do not price grpo-lab's
    assert estimate_cells(trl, hw, slow)[0].total > estimate_cells(trl, hw)[0].total
    assert calibration_key(TINY_FAST) == TINY_FAST


def test_two_tricks_whose_switches_disagree_are_refused_naming_both_and_the_key():
    from grpo_lab.spec.config import resolve

    # sapo then dr_grpo: the config trains SAPO with dr_grpo's aggregation, TRL would train loss_type=dr_grpo
    cfg = resolve({"trainer": "grpo-lab", "tricks": ["sapo", "dr_grpo"]})
    problems = trl_refusals(cfg)
    assert any("'sapo' and 'dr_grpo'" in p and "loss_type" in p for p in problems), problems
    assert any("overrides trick 'sapo'" in p and "(trick 'dr_grpo')" in p for p in problems), problems
    with pytest.raises(ConfigError, match="tricks 'sapo' and 'dr_grpo' set GRPOConfig loss_type"):
        resolve({"trainer": "trl", "tricks": ["sapo", "dr_grpo"]})
    # every applied trick is checked, not only the last one per key: clip_higher's inner updates
    assert any("overrides trick 'clip_higher'" in p for p in trl_refusals(
        resolve({"tricks": ["clip_higher", "off_policy_sequence_mask"]})))
    assert trl_refusals(tiny_cfg(trainer="trl", tricks=["clip_higher", "dual_clip"])) == []  # they agree


def test_a_generation_batch_that_does_not_split_is_refused_at_plan_time_naming_the_cell(tmp_path):
    # gspo's steps_per_generation=4 over 3 x 3 rows: TRL would raise only once the run had started
    data = {"models": [TINY_FAST], "tasks": ["math"], "seeds": [0], "tricks": ["baseline", {"singles": ["gspo"]}],
            "base": {"trainer": "trl", "levels": 2, "steps": 2, "sampling": {"prompts_per_step": 3, "group_size": 3}}}
    with pytest.raises(ConfigError) as err:
        expand(parse_matrix(data, str(tmp_path / "odd.yaml")))
    message = str(err.value)
    assert len(message.splitlines()) == 1 and "odd.yaml" in message and "gspo" in message, message
    assert "(9) does not split into steps_per_generation (4)" in message, message
    assert trl_refusals(tiny_cfg(tricks=["gspo"])) == []  # 4 x 4 rows split into 4


def test_tricks_say_they_run_on_trl_only_where_trl_runs_them_under_their_needs():
    from grpo_lab.cli.train import runs_on

    catalog = load_catalog()
    assert runs_on(catalog["fp32_lm_head"]) == ["grpo-lab"]  # it acts under bf16 only, which TRL is refused here
    assert runs_on(catalog["adaptive_entropy"]) == ["grpo-lab", "trl"]  # its needs' entropy_target maps
    assert runs_on(catalog["clip_higher"]) == ["grpo-lab", "trl"] and runs_on(catalog["kl_anneal"]) == ["grpo-lab"]
    keys = grpo_config_keys(tiny_cfg(trainer="trl", tricks=["adaptive_entropy"], loss={"entropy_target": 1.0}))
    assert keys["use_adaptive_entropy"] and (keys["entropy_target"], keys["entropy_coef_delta"]) == (1.0, 0.005)
    # TRL moves the coefficient per optimizer step: with two a step it would move twice as fast
    with pytest.raises(ConfigError, match="once per optimizer step in TRL \\(2 a step\\)"):
        tiny_cfg(trainer="trl", tricks=["adaptive_entropy", "clip_higher"])


def test_a_changed_setting_a_tricks_switch_would_replace_in_trl_is_refused():
    # grpo-lab trains cispo with sequence-mean aggregation; TRL's loss_type=cispo aggregates over tokens
    with pytest.raises(ConfigError, match="loss.aggregation='seq_mean' maps to GRPOConfig loss_type='grpo', "
                                          "which trick 'cispo' switches to 'cispo'"):
        tiny_cfg(trainer="trl", tricks=["cispo"], loss={"aggregation": "seq_mean"})
    assert grpo_config_keys(tiny_cfg(trainer="trl", tricks=["cispo"]))["loss_type"] == "cispo"  # at the default
