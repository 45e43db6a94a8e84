"""One sweep, two trainers: the registry keeps each cell's trainer in its arm's model label, a
registry from
before the axis reads as each run's trainer, and effects compare within a trainer."""

import polars as pl
import pytest
from sqlalchemy import select, update

from grpo_lab.analysis.interactions import effects
from grpo_lab.execution import registry as reg
from grpo_lab.spec.arm import Arm
from grpo_lab.spec.matrix import parse_matrix
from grpo_lab.spec.plan import make_plan
from tests.execution.sweeps import BASE

TRICKS = ["baseline", {"singles": ["clip_higher"]}]


def _register(tmp_path, trainers):
    spec = parse_matrix({"name": "two", "models": ["tiny"], "tasks": ["math"], "seeds": [0, 1, 2],
                         "trainers": trainers, "tricks": TRICKS, "base": BASE})
    plan = make_plan(spec)
    session = reg.connect(f"sqlite:///{tmp_path / 'registry.db'}")()
    sweep = reg.Sweep(name="two", matrix_path="m.yaml")
    session.add(sweep)
    reg.register_cells(session, sweep, plan.cells, plan.estimates, tmp_path / "runs", {})
    return session, sweep


def test_cells_of_two_trainers_read_back_as_their_arms(tmp_path):
    session, sweep = _register(tmp_path, ["grpo-lab", "trl"])
    arms = {Arm.from_label(c.model, c.task, c.tricks) for c in sweep.cells}
    assert arms == {Arm.of("tiny", "math", t, trainer) for t in ("", "clip_higher") for trainer in ("grpo-lab", "trl")}
    for cell in sweep.cells:  # the label agrees with the run the cell links
        assert Arm.from_label(cell.model, cell.task, "").trainer == reg.json.loads(cell.run.config_json)["trainer"]


def test_a_trl_sweep_registered_before_the_axis_reads_as_trl_once_the_registry_is_opened(tmp_path):
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    session, sweep = _register(tmp_path, ["trl"])  # base: {trainer: trl}, the only way before the axis
    ours = reg.Sweep(name="ours", matrix_path="o.yaml")
    session.add(ours)
    plan = make_plan(parse_matrix({"name": "ours", "models": ["tiny"], "tasks": ["math"], "seeds": [0],
                                   "tricks": TRICKS, "base": BASE}))
    reg.register_cells(session, ours, plan.cells, plan.estimates, tmp_path / "runs", {})
    session.add(reg.DecideVerdict(sweep_id=sweep.id, name="tiny/math/effect:clip_higher", kind="effect", model="tiny",
                                  task="math", target="clip_higher", verdict="open", t=0.0,
                                  record_json=reg.json.dumps({"name": "tiny/math/effect:clip_higher", "model": "tiny"})))
    session.execute(update(reg.SweepRun).values(model="tiny"))  # as every registry before the axis stored it
    session.commit()
    session.close()
    for _ in range(2):  # opening it again changes nothing more
        session = reg.connect(url)()
        got = {s.name: {c.model for c in s.cells} for s in session.scalars(select(reg.Sweep))}
        assert got == {"two": {"tiny (trl)"}, "ours": {"tiny"}}
        v = session.scalars(select(reg.DecideVerdict)).one()
        assert (v.model, v.name) == ("tiny (trl)", "tiny (trl)/math/effect:clip_higher")
        assert reg.json.loads(v.record_json) == {"name": "tiny (trl)/math/effect:clip_higher", "model": "tiny (trl)"}
        session.close()


def test_a_cell_under_trl_is_named_by_its_arm_whose_model_is_never_a_label(tmp_path):
    from types import SimpleNamespace

    from grpo_lab.execution.sweep import reconcile
    from grpo_lab.util.yamlio import ConfigError
    from grpo_lab.views import _label

    with pytest.raises(ValueError, match="not a model label"):
        Arm.of("tiny (trl)", "math", "clip_higher")
    cell = SimpleNamespace(model="tiny (trl)", task="math", tricks="clip_higher", seed=0)
    assert _label(cell) == "tiny (trl) / math / clip_higher / seed 0"
    session, sweep = _register(tmp_path, ["trl"])
    more = make_plan(parse_matrix({"name": "two", "models": ["tiny"], "tasks": ["math"], "seeds": [0, 1, 2, 3],
                                   "trainers": ["trl"], "tricks": TRICKS, "base": BASE}))
    with pytest.raises(ConfigError, match=r"e\.g\. tiny \(trl\) / math / baseline / seed 3"):
        reconcile(sweep, more, "refuse")


def test_a_trick_under_trl_is_compared_with_the_baseline_under_trl(tmp_path):
    session, sweep = _register(tmp_path, ["grpo-lab", "trl"])
    # outcomes: TRL's runs score 0.5 higher everywhere; clip_higher adds 0.1 under grpo-lab, 0.3 under TRL
    gain = {("grpo-lab", "baseline"): 0.0, ("grpo-lab", "clip_higher"): 0.1,
            ("trl", "baseline"): 0.5, ("trl", "clip_higher"): 0.8}
    rows = []
    for cell in sweep.cells:
        labels = cell.labels()
        arm = Arm.from_label(labels["model"], labels["task"], labels["tricks"])
        rows.append({**labels, "pass@1": 0.1 + gain[arm.trainer, arm.label] + 0.01 * labels["seed"]})
    table = effects(pl.DataFrame(rows), "pass@1").filter(pl.col("tricks") == "clip_higher")
    got = dict(zip(table["model"], table["effect"]))
    assert got == pytest.approx({"tiny": 0.1, "tiny (trl)": 0.3})


def test_decides_comparisons_are_within_a_trainer():
    from grpo_lab.analysis.contrast import contrasts
    from grpo_lab.execution.waves import plan_arms

    spec = parse_matrix({"models": ["tiny"], "tasks": ["math"], "trainers": ["grpo-lab", "trl"],
                         "tricks": TRICKS, "base": BASE})
    arms = plan_arms(make_plan(spec))  # one comparison cell per trainer, each with its own baseline
    assert arms == {("tiny", "math"): ["baseline", "clip_higher"], ("tiny (trl)", "math"): ["baseline", "clip_higher"]}
    comps = contrasts(arms)
    assert sorted((c.model, c.target) for c in comps) == [("tiny", "clip_higher"), ("tiny (trl)", "clip_higher")]
    assert all(set(c.arms()) == {(c.model, "math", "baseline"), (c.model, "math", "clip_higher")} for c in comps)
