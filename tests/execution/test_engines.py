"""A small sweep through a local Ray and through submitit's local executor: real engines, no mocks."""

import json
from pathlib import Path

import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners import load_profile, make_runner
from grpo_lab.execution.runners.base import SlurmOptions
from grpo_lab.execution.final_evals import run_final_evals
from grpo_lab.execution.sweep import SweepOptions, execute_sweep, open_sweep, plan_for
from grpo_lab.rundir import RunDir
from grpo_lab.util.yamlio import ConfigError
from tests.execution.sweeps import write_matrix

pytestmark = pytest.mark.slow


def run_sweep_on(runner, tmp_path):
    matrix = write_matrix(tmp_path)
    opts = SweepOptions(workspace=tmp_path / "ws")
    plan = plan_for(matrix, opts)
    session = reg.connect(reg.default_url(opts.workspace))()
    sweep = open_sweep(session, plan, matrix, opts, env={})
    try:
        result = execute_sweep(session, sweep, runner, opts)
        # --decide's eval-only attempts on the same engine: every finished run evaluated again
        failed = run_final_evals(sweep, runner, {(c.model, c.task): 4 for c in sweep.cells}, say=lambda s: None)
    finally:
        runner.close()
    assert result.counts["finished"] == 2, [c.run.error for c in sweep.cells]
    assert failed == {} and all(RunDir(c.run.out_dir).final_eval(4)["samples"] == 4 for c in sweep.cells)
    for cell in sweep.cells:
        assert json.loads((Path(cell.run.out_dir) / "summary.json").read_text())["run_id"] == cell.run_id
        assert cell.run.attempts[-1].runner == runner.name
    return sweep


@pytest.mark.cluster
def test_ray_runner_local_cluster(tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        runner = make_runner(load_profile("ray"), tmp_path)
        assert runner.slots == 2
        run_sweep_on(runner, tmp_path)
    finally:
        ray.shutdown()


def test_submitit_local_executor(tmp_path):
    pytest.importorskip("submitit")
    from grpo_lab.execution.runners.slurm import SlurmRunner

    runner = SlurmRunner(SlurmOptions(cluster="local", timeout_min=10), tmp_path / "ws", slots=2)
    run_sweep_on(runner, tmp_path)
    assert list((tmp_path / "ws" / "submitit").iterdir())  # submitit's own job folders


def test_submitit_job_array(tmp_path):
    pytest.importorskip("submitit")
    from grpo_lab.execution.runners.slurm import SlurmRunner

    runner = SlurmRunner(SlurmOptions(cluster="local", array=True), tmp_path / "ws", slots=2)
    run_sweep_on(runner, tmp_path)


def test_profiles_and_their_errors(tmp_path):
    assert load_profile("slurm").kind == "slurm"
    bad = tmp_path / "p.yaml"
    bad.write_text("kind: local\nslurm:\n  partitoin: gpu\n")
    with pytest.raises(ConfigError, match=r"p.yaml:3: unknown key 'slurm.partitoin' \(did you mean 'partition'"):
        load_profile(str(bad))
    with pytest.raises(ConfigError, match="did you mean 'ray'"):
        load_profile("rey")
