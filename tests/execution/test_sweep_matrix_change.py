"""A matrix edited under the same name is not merged silently into its sweep."""

import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.sweep import SweepOptions, open_sweep, plan_for
from grpo_lab.util.yamlio import ConfigError
from tests.execution.sweeps import write_matrix


def open_again(matrix, ws, on_change="refuse"):
    opts = SweepOptions(workspace=ws, on_change=on_change)
    with reg.connect(reg.default_url(ws))() as s:
        sweep = open_sweep(s, plan_for(matrix, opts), matrix, opts, env={})
        return sorted((c.tricks, c.seed, c.run_id) for c in sweep.cells)


def test_changed_matrix_is_refused_extended_or_replaced(tmp_path):
    ws = tmp_path / "ws"
    first = open_again(write_matrix(tmp_path, "edit", seeds=[0]), ws)
    assert open_again(write_matrix(tmp_path, "edit", seeds=[0]), ws) == first  # unchanged: reopens
    more_seeds = write_matrix(tmp_path, "edit", seeds=[0, 1])
    with pytest.raises(ConfigError, match=r"has 2 it lacks .*--replace.*--extend"):
        open_again(more_seeds, ws)
    extended = open_again(more_seeds, ws, "extend")
    assert len(extended) == 4 and set(first) <= set(extended)

    longer = write_matrix(tmp_path, "edit", seeds=[0, 1], steps=6)  # every run id changes, labels do not
    with pytest.raises(ConfigError, match=r"mix configs within an arm: .*baseline \(2 configs\)") as e:
        open_again(longer, ws, "extend")
    assert "--extend to add" not in str(e.value)
    with pytest.raises(ConfigError, match="2 configs"):  # new seeds only, but at other settings: still two configs
        (tmp_path / "b").mkdir()
        open_again(write_matrix(tmp_path / "b", "edit", seeds=[2], steps=6), ws, "extend")
    replaced = open_again(longer, ws, "replace")
    assert len(replaced) == 4 and not set(replaced) & set(extended)  # one config per label
    fewer = write_matrix(tmp_path, "edit", seeds=[0], steps=6)  # cells beyond the matrix (--decide's seeds) stay
    assert open_again(fewer, ws) == replaced


def test_an_arm_merged_from_two_configs_is_detected(tmp_path):
    from grpo_lab.execution.sweep import cell_arms, mixed_arms

    ws = tmp_path / "ws"
    open_again(write_matrix(tmp_path, "old", seeds=[0]), ws)
    longer = write_matrix(tmp_path, "old2", seeds=[1], steps=6)
    with reg.connect(reg.default_url(ws))() as s:  # what sweeps did before they compared matrices
        sweep = reg.get_sweep(s, "old")
        assert mixed_arms(cell_arms(sweep.cells)) == []
        plan = plan_for(longer, SweepOptions(workspace=ws))
        reg.register_cells(s, sweep, plan.cells, plan.estimates, ws / "runs", {})
        assert len(mixed_arms(cell_arms(sweep.cells))) == 2  # baseline and ema_reference: the report refuses them
