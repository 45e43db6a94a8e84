"""`grpo-lab predict SWEEP --at C` on a real tiny sweep: each arm's compute curve from its runs'
own eval series, a prediction beyond the runs, one-line errors before any fitting."""

import pytest
from typer.testing import CliRunner

from grpo_lab.api import predict
from grpo_lab.cli import app
from tests.execution.sweeps import write_matrix
from tests.execution.test_sweep_local import sweep_once

pytestmark = pytest.mark.slow
runner = CliRunner()


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("predict")
    matrix = write_matrix(tmp, "curves", seeds=(0, 1), steps=6, eval={"every": 1, "problems": 8, "samples": 2,
                                                                       "k": [1, 2]})
    _, sweep, session = sweep_once(matrix, tmp / "ws")
    session.close()
    return tmp / "ws"


def test_every_arm_gets_a_curve_over_its_seeds_and_a_prediction_beyond_them(swept):
    rows = predict("curves", 1.0, swept)
    assert sorted(arm.tricks for arm, _ in rows) == ["baseline", "ema_reference"]
    for arm, p in rows:
        assert arm.unit == "core-hours (CPU time)" and not arm.unfitted  # a CPU run: its own CPU time, not wall
        assert len(arm.curve.runs) + arm.curve.collapsed == 2  # every seed fitted, collapsed ones counted
        longest = max((f.C_last for f in arm.curve.runs), default=1.0)
        assert longest < 1.0  # the tiny runs take seconds: 1 device-hour is far beyond them
        if len(arm.curve.runs) == 2:
            assert p.seed.lower <= p.mean.est <= p.seed.upper
            assert p.seed.upper - p.seed.lower >= p.mean.upper - p.mean.lower
            assert all(0.0 <= f.A <= 1.0 for f in arm.curve.runs)


def test_the_cli_prints_the_curves_and_refuses_bad_input_in_one_line(swept):
    res = runner.invoke(app, ["predict", "curves", "--at", "1", "--workspace", str(swept)], env={"COLUMNS": "220"})
    assert res.exit_code == 0, res.output
    assert "compute curves, predicted at 1" in res.output and "ema_reference" in res.output
    # 2 seeds of 6-step runs cannot carry a ceiling label; the verdict table says so and why
    assert "ceiling and speed vs baseline" in res.output
    assert "undecided: " in res.output and "ceiling: " in res.output
    bad = runner.invoke(app, ["predict", "curvs", "--at", "1", "--workspace", str(swept)], env={"COLUMNS": "220"})
    assert bad.exit_code != 0 and "no sweep 'curvs'" in bad.output and "curves" in bad.output
    assert "Traceback" not in bad.output
    zero = runner.invoke(app, ["predict", "curves", "--at", "0", "--workspace", str(swept)], env={"COLUMNS": "220"})
    assert zero.exit_code != 0 and "--at: 0.0 is not a positive amount of compute" in zero.output
