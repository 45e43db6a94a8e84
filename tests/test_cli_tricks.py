"""`grpo-lab tricks`: the catalog with each trick's switch in the trainers a team ships."""

from typer.testing import CliRunner

from grpo_lab.cli import app


def test_tricks_table_names_each_tricks_switch_in_trl_verl_and_openrlhf():
    res = CliRunner().invoke(app, ["tricks"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "TRL: top_entropy_quantile=0.2" in res.output
    assert "verl: algorithm.adv_estimator=rloo" in res.output
    assert "OpenRLHF: --algo.advantage.estimator reinforce_baseline" in res.output
