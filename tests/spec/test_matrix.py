"""Matrix specs: generators, resolution order, run ids, errors with file and line, warnings."""

import warnings

import pytest

from grpo_lab.spec.matrix import expand, load_matrix, parse_matrix
from grpo_lab.util.yamlio import ConfigError

THREE = ["kl_anneal", "quantile_norm", "lr_warmup"]  # three dimensions


def spec(**over):
    return parse_matrix({"models": ["tiny"], "tasks": ["math"], "seeds": [0], **over})


@pytest.mark.parametrize("gen, sets", [
    ({"singles": THREE}, [("kl_anneal",), ("quantile_norm",), ("lr_warmup",)]),
    ({"pairs": THREE}, [("kl_anneal", "quantile_norm"), ("kl_anneal", "lr_warmup"), ("quantile_norm", "lr_warmup")]),
    ({"leave_one_out": THREE}, [tuple(THREE), ("quantile_norm", "lr_warmup"), ("kl_anneal", "lr_warmup"),
                                ("kl_anneal", "quantile_norm")]),
    ({"combos": [["kl_anneal"], THREE]}, [("kl_anneal",), tuple(THREE)]),
    ("baseline", [()]),
])
def test_generators_expand_to_their_trick_sets(gen, sets):
    cells = expand(spec(tricks=[gen]))
    assert [c.tricks for c in cells] == sets
    assert all(c.config.tricks == sorted(c.tricks) for c in cells)  # these commute: stored in canonical order


def test_commuting_trick_orders_are_one_cell():
    cells = expand(spec(tricks=[{"combos": [["quantile_norm", "ema_reference"], ["ema_reference", "quantile_norm"]]}]))
    assert [c.tricks for c in cells] == [("quantile_norm", "ema_reference")]


def test_axes_multiply_and_run_ids_are_stable_and_distinct():
    s = spec(tasks=["math", "code"], seeds=[0, 1, 2], tricks=["baseline", {"singles": THREE}])  # code: generator v2
    a, b = expand(s), expand(s)
    assert len(a) == 2 * 4 * 3
    assert [c.run_id for c in a] == [c.run_id for c in b]
    assert len({c.run_id for c in a}) == len(a)
    # the per-seed hash shortcut agrees with RunConfig.run_id(), and seeds land in the configs
    assert all(c.run_id == c.config.run_id() and c.config.seed == c.seed for c in a)


def test_duplicate_cells_collapse_to_one():
    cells = expand(spec(seeds=[0, 0], tricks=["baseline", "baseline", {"singles": ["kl_anneal"]},
                                             {"combos": [["kl_anneal"]]}]))
    assert [c.tricks for c in cells] == [(), ("kl_anneal",)]


def test_trick_settings_win_over_base_and_axes_over_base():
    s = spec(base={"model": "smollm2-135m", "task": "code", "seed": 7, "steps": 12,
                   "sampling": {"group_size": 4, "temperature": 0.7}},
             tricks=["baseline", {"singles": ["group_size_16"]}])
    base, g16 = expand(s)
    assert (base.config.model, base.config.task, base.config.seed) == ("tiny", "math", 0)
    assert base.config.sampling.group_size == 4 and g16.config.sampling.group_size == 16
    assert g16.config.sampling.temperature == 0.7 and g16.config.steps == 12


def test_base_tricks_apply_under_the_cells_tricks():
    cells = expand(spec(base={"tricks": ["lr_warmup"]}, tricks=["baseline", {"singles": ["cosine_lr"]}]))
    assert cells[0].config.tricks == ["lr_warmup"] and cells[0].config.optim.warmup_steps == 5
    assert cells[1].config.tricks == ["lr_warmup", "cosine_lr"] and cells[1].config.optim.schedule == "cosine"
    assert cells[1].tricks == ("cosine_lr",) and "optimization" in cells[1].warnings[0]


def test_base_may_be_a_config_file_relative_to_the_matrix(tmp_path):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "b.yaml").write_text("steps: 33\nsampling: {max_new_tokens: 5}\n")
    (tmp_path / "m.yaml").write_text("models: [tiny]\ntasks: [logic]\nbase: configs/b.yaml\n")
    (cell,) = expand(load_matrix(tmp_path / "m.yaml"))
    assert cell.config.steps == 33 and cell.config.sampling.max_new_tokens == 5 and cell.config.task == "logic"


def test_mixed_task_item_is_one_cell_with_a_task_list():
    (cell,) = expand(spec(tasks=[["math", "code"]]))
    assert cell.task == "math+code" and cell.config.task == ["math", "code"]


def write(tmp_path, text):
    p = tmp_path / "m.yaml"
    p.write_text(text)
    return p


def test_unknown_key_names_file_line_field_and_suggests(tmp_path):
    p = write(tmp_path, "models: [tiny]\ntasks: [math]\nseed: [0]\nbudget:\n  tier: 1k\n  hardwre: h800\n")
    msg = str(pytest.raises(ConfigError, load_matrix, p).value)
    assert f"{p}:3: unknown key 'seed' (did you mean 'seeds'" in msg
    assert f"{p}:6: unknown key 'budget.hardwre' (did you mean 'hardware'?)" in msg


def test_unknown_trick_names_file_line_field_and_suggests(tmp_path):
    p = write(tmp_path, "models: [tiny]\ntasks: [math]\ntricks:\n  - baseline\n  - singles:\n"
                        "      - kl_anneal\n      - ema_refrence\n")
    msg = str(pytest.raises(ConfigError, load_matrix, p).value)
    assert f"{p}:7: field 'tricks.1.singles.1': unknown trick 'ema_refrence'" in msg
    assert "did you mean 'ema_reference'" in msg


def test_bad_types_bad_names_and_bad_base_keys_name_the_line(tmp_path):
    p = write(tmp_path, "models: [tiny]\ntasks: [math]\nseeds:\n  - 0\n  - one\n")
    assert f"{p}:5: field 'seeds.1'" in str(pytest.raises(ConfigError, load_matrix, p).value)
    p = write(tmp_path, "models: [tiny, qwen-7b]\ntasks: [math, mth]\n")
    msg = str(pytest.raises(ConfigError, load_matrix, p).value)
    assert "did you mean 'qwen2.5-7b'" in msg and f"{p}:2: field 'tasks.1': unknown task 'mth'" in msg
    p = write(tmp_path, "models: [tiny]\ntasks: [math]\nbase:\n  steps: 5\n  sampling:\n    temprature: 1\n")
    assert f"{p}:6: unknown key 'sampling.temprature'" in str(pytest.raises(ConfigError, load_matrix, p).value)
    p = write(tmp_path, "models: [tiny]\ntasks: [math]\ntricks: [kl_anneal, {pairs: [kl_anneal]}]\n")
    msg = str(pytest.raises(ConfigError, load_matrix, p).value)
    assert "'kl_anneal' is not a generator" in msg and "field 'tricks.1.pairs'" in msg


def test_same_dimension_pairs_are_collected_per_cell_not_warned():
    six = ["group_size_16", "dynamic_temperature", "ema_reference", "adaptive_curriculum", "kl_anneal",
           "advantage_clip_3"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cells = expand(spec(tricks=["baseline", {"singles": six}, {"combos": [six]}]))
    combo = cells[-1]
    assert all(c.warnings == () for c in cells[:-1])
    assert len(combo.warnings) == 4  # three sampling pairs, one kl pair
    assert "'group_size_16' and 'dynamic_temperature' both act on dimension 'sampling'" in combo.warnings
    assert "'ema_reference' and 'kl_anneal' both act on dimension 'kl'" in combo.warnings


def test_task_base_overrides_base_for_its_task_only(tmp_path):
    s = spec(tasks=["math", "logic"], base={"steps": 50, "optim": {"lr": 3e-4}},
             task_base={"math": {"optim": {"lr": 1e-4}, "sampling": {"max_new_tokens": 6}}})
    by_task = {c.task: c.config for c in expand(s)}
    assert by_task["math"].optim.lr == 1e-4 and by_task["math"].sampling.max_new_tokens == 6
    assert by_task["logic"].optim.lr == 3e-4 and by_task["math"].steps == by_task["logic"].steps == 50
    p = write(tmp_path, "models: [tiny]\ntasks: [math]\ntask_base:\n  maths: {steps: 5}\n")
    msg = str(pytest.raises(ConfigError, load_matrix, p).value)
    assert f"{p}:4: field 'task_base.maths': 'maths' is not a task of this matrix (did you mean 'math'?)" in msg


def test_a_bad_key_and_a_bad_trick_name_are_reported_together(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("name: x\nmodels: [tiny]\ntasks: [math]\nseeds: [0]\ntricks:\n  - baseline\n"
                    "  - singles: [quantile_nrom]\nbse: {steps: 4}\n")
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    lines = str(caught.value).splitlines()
    assert any(":8: unknown key 'bse'" in line for line in lines)
    assert any(":7: field 'tricks.1.singles.0': unknown trick 'quantile_nrom'" in line for line in lines)


def test_a_matrix_without_a_baseline_arm_gets_a_warning():
    from grpo_lab.spec.plan import make_plan

    without = parse_matrix({"models": ["tiny"], "tasks": ["math"], "seeds": [0], "tricks": [{"singles": ["quantile_norm"]}]})
    with_baseline = parse_matrix({"models": ["tiny"], "tasks": ["math"], "seeds": [0], "tricks": ["baseline"]})
    assert any("no baseline arm" in w for w in make_plan(without).warnings)
    assert not any("no baseline arm" in w for w in make_plan(with_baseline).warnings)


def test_a_base_setting_only_some_models_take_is_checked_against_the_matrix_models():
    chat = expand(spec(models=["smollm2-135m"], base={"prompt_shots": 1}))
    assert [c.config.prompt_shots for c in chat] == [1]
    with pytest.raises(ConfigError, match="prompt_shots: model tiny reads compact"):
        parse_matrix({"name": "m", "models": ["tiny"], "tasks": ["math"], "seeds": [0], "tricks": ["baseline"],
                      "base": {"prompt_shots": 1}})
    mixed = spec(models=["smollm2-135m", "tiny"], base={"prompt_shots": 1})  # the tiny cells are refused on expansion
    with pytest.raises(ConfigError, match=r"\(cell tiny / math / baseline\): prompt_shots: model tiny"):
        expand(mixed)
