"""`grpo-lab tricks`: the catalog with each trick's switch in the trainers a team ships."""

from typer.testing import CliRunner

from grpo_lab.cli import app


def test_tricks_table_names_each_tricks_switch_in_trl_verl_and_openrlhf():
    res = CliRunner().invoke(app, ["tricks"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "TRL: top_entropy_quantile=0.2" in res.output
    assert "verl: algorithm.adv_estimator=rloo" in res.output
    assert "OpenRLHF: --algo.advantage.estimator reinforce_baseline" in res.output


def test_catalog_tables_fit_80_columns_through_a_pipe_and_cut_nothing():
    for command in ("tricks", "tasks", "config"):
        res = CliRunner().invoke(app, [command], env={"COLUMNS": None})  # not a terminal, no COLUMNS
        assert res.exit_code == 0, res.output
        # folded, not cut with an ellipsis: a long setting is all there across its lines
        assert max(map(len, res.output.splitlines())) <= 80 and "…" not in res.output, command
