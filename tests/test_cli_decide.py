"""`grpo-lab sweep --decide`'s statistics options reach DecideOptions as the library's decide={...}."""

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from grpo_lab.cli import app
from grpo_lab.execution.waves import DecideOptions

runner = CliRunner()


@pytest.fixture
def requests(monkeypatch):
    """The SweepRequests the CLI hands the driver (nothing runs)."""
    seen = []

    def run_sweep(request, view):
        seen.append(request)
        return SimpleNamespace(counts={"failed": 0})

    monkeypatch.setattr("grpo_lab.execution.driver.run_sweep", run_sweep)
    return seen


def sweep(tmp_path, *flags):
    matrix = tmp_path / "m.yaml"
    matrix.write_text("name: m\nmodels: [tiny]\ntasks: [math]\n")
    # wide: a usage error's panel must not wrap the message
    return runner.invoke(app, ["sweep", str(matrix), "--workspace", str(tmp_path / "ws"), *flags], env={"COLUMNS": "200"})


@pytest.mark.parametrize("flags, estimand", [((), "healthy"), (("--estimand", "mean"), "mean"),
                                             (("--estimand", "healthy"), "healthy")])
def test_the_estimand_flows_to_the_decide_options(tmp_path, requests, flags, estimand):
    res = sweep(tmp_path, "--decide", "--sequence", "betting", *flags)
    assert res.exit_code == 0, res.output
    (request,) = requests
    dopts = DecideOptions.parse(request.decide)
    assert request.decide["estimand"] == estimand and dopts.rule.estimand == estimand
    assert dopts.rule.sequence == "betting"  # beside the other statistics


def test_without_decide_no_options_reach_the_driver(tmp_path, requests):
    assert sweep(tmp_path, "--estimand", "mean").exit_code == 0 and requests[0].decide is None


def test_an_unknown_estimand_is_refused_before_the_driver_naming_the_choices(tmp_path, requests):
    res = sweep(tmp_path, "--decide", "--estimand", "median")
    assert res.exit_code == 2 and "'healthy', 'mean'" in res.output and requests == []
