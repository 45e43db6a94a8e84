"""`grpo-lab tune`: space checks, a real 6-trial study on the fast test model, and a kill -9 resume.

Real Optuna, real SQLite (registry and study in one file), real training and MLflow: no mocks.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from grpo_lab.execution import registry as reg
from grpo_lab.execution.lease import DriverBusy, Lease
from grpo_lab.spec.matrix import expand, load_matrix
from grpo_lab.tune import TuneOptions, load_space, tune
from grpo_lab.tune.base import load_base
from grpo_lab.tune.study import pruning_hook
from grpo_lab.util.yamlio import ConfigError
from tests.conftest import TINY_FAST, tiny_cfg
from tests.execution.sweeps import freeze_workers, poll_until

ROOT = Path(__file__).resolve().parents[2]
BASE = {  # ~0.5 s a trial on the 2-core box once the test model is cached
    "model": TINY_FAST, "task": "math", "levels": 2, "steps": 4, "checkpoint_every": 1,
    "sampling": {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6},
    "eval": {"every": 2, "problems": 8, "samples": 2, "k": [1, 2]},
}
SPACE = "kl.beta: {low: 0.001, high: 0.05, log: true}\nsampling.group_size: {choices: [2, 4]}\n"


def write(path: Path, text_or_data) -> Path:
    path.write_text(text_or_data if isinstance(text_or_data, str) else yaml.safe_dump(text_or_data))
    return path


@pytest.mark.parametrize("text, expected", [
    ("kl.beta: {low: 0.001, high: 0.05}\nkl.betaa: {low: 0.001, high: 0.05}\n",
     "space.yaml:2: 'kl.betaa' is not a run-config field (did you mean 'kl.beta'"),
    ("beta: {low: 0.001, high: 0.05}\n", "space.yaml:1: 'beta' is not a run-config field (did you mean 'kl.beta'"),
    ("kl.beta:\n  low: 0.001\n  hihg: 0.05\n", "space.yaml:3: 'kl.beta': unknown key 'hihg' (did you mean 'high'?)"),
    ("optim.lr: {low: 1e-3, high: 1e-5, log: true}\n", "space.yaml:1: 'optim.lr': low must be below high"),
    ("kl.beta: {low: 0, high: 0.05, log: true}\n", "space.yaml:1: 'kl.beta': a log-uniform range needs low > 0"),
    ("sampling.group_size: {low: 1, high: 8}\n",
     "space.yaml:1: 'sampling.group_size': the value 1 is rejected by the run config"),
    ("kl.schedule: {choices: [fixed, cosine]}\n", "space.yaml:1: 'kl.schedule': the value 'cosine' is rejected"),
    ("kl.beta: 0.01\n", "space.yaml:1: 'kl.beta': a distribution is a mapping"),
])
def test_space_errors_name_file_line_and_key(tmp_path, text, expected):
    with pytest.raises(ConfigError) as err:
        load_space(write(tmp_path / "space.yaml", text), BASE)
    assert expected in str(err.value)


def test_space_refuses_a_key_a_base_trick_sets(tmp_path):
    space = write(tmp_path / "space.yaml", "sampling.group_size: {choices: [4, 8]}\n")
    with pytest.raises(ConfigError, match="space.yaml:1: 'sampling.group_size' is set by trick 'group_size_16'"):
        load_space(space, {**BASE, "tricks": ["group_size_16"]})


def test_space_kinds(tmp_path):
    space = load_space(write(tmp_path / "s.yaml", "optim.lr: {low: 1e-5, high: 1e-3, log: true}\n"
                                                  "optim.warmup_steps: {low: 0, high: 10, step: 5}\n"
                                                  "sampling.group_size: {choices: [4, 8, 16]}\n"), BASE)
    lr, warmup, g = space.distributions.values()
    assert isinstance(lr, optuna.distributions.FloatDistribution) and lr.log and lr.low == 1e-5
    assert isinstance(warmup, optuna.distributions.IntDistribution) and warmup.step == 5
    assert g.choices == (4, 8, 16)


@pytest.mark.parametrize("space", sorted((ROOT / "experiments" / "spaces").glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_spaces_load_over_a_shipped_config(space):
    base = load_base(ROOT / "experiments" / "configs" / "tiny-math.yaml")
    assert "kl.beta" in load_space(space, base.data, base.source).distributions


def test_pruning_hook_prunes_below_the_median_but_never_at_the_last_step():
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.MedianPruner(n_startup_trials=2))
    for value in (0.5, 0.6):
        done = study.ask()
        done.report(value, 1)
        done.report(value, 3)
        study.tell(done, value)
    cfg = tiny_cfg(steps=4)
    last = pruning_hook(study.ask(), "eval/pass@1", cfg)
    last(3, {"eval/pass@1": 0.0})  # the last step: the run is complete, never pruned
    hook = pruning_hook(study.ask(), "eval/pass@1", cfg)
    hook(0, {"reward/mean": 0.1})  # not an eval step: nothing reported
    with pytest.raises(optuna.TrialPruned, match="pruned at step 2"):
        hook(1, {"eval/pass@1": 0.1})


@pytest.mark.slow
def test_tune_six_trials_registers_runs_writes_the_baseline_and_logs_mlflow(tmp_path, registry_url):
    """The registry and the Optuna study share one database: SQLite, or a PostgreSQL server."""
    config, space = write(tmp_path / "base.yaml", BASE), write(tmp_path / "space.yaml", SPACE)
    ws, out = tmp_path / "ws", tmp_path / "tuned" / "best.yaml"
    opts = TuneOptions(trials=6, name="six", workspace=ws, out=out, prune_warmup=0.0, db_url=registry_url,
                       tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    result = tune(config, space, opts)

    trials = result.study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))
    assert result.name == "tune-six" and result.stopped_by == "trials" and len(trials) == 6
    best = result.study.best_trial
    assert out.read_text().startswith("# Tuned baseline written by `grpo-lab tune` (Optuna study tune-six)")
    assert f"eval/pass@1 = {best.value:.4g} at trial {best.number}" in out.read_text()
    # The tuned file is a matrix base; its baseline cell is the best trial's run, so a sweep reuses it.
    matrix = write(tmp_path / "m.yaml", {"models": [TINY_FAST], "tasks": ["math"], "base": "tuned/best.yaml"})
    assert expand(load_matrix(matrix))[0].run_id == best.user_attrs["run_id"]

    Session = reg.connect(registry_url)
    with Session() as s:
        cells = reg.get_sweep(s, "tune-six").cells
        assert sorted(c.tricks for c in cells) == sorted(f"tune#{t.number}" for t in trials)
        for c in cells:
            assert len(c.run.attempts) == 1 and c.run.gpu_hours > 0
            assert c.run.status == ("pending" if c.run.attempts[0].status == "pruned" else "finished")
        assert result.gpu_hours == pytest.approx(sum(c.run.gpu_hours for c in cells))

    from mlflow import MlflowClient

    client = MlflowClient(opts.tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("grpo-lab").experiment_id])
    parent = next(r for r in runs if r.info.run_name == "tune-six")
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(int(r.data.tags["trial"]) for r in children) == sorted(t.number for t in trials)
    assert all("param.kl.beta" in r.data.tags for r in children)
    assert parent.data.metrics["sweep/trials_complete"] + parent.data.metrics["sweep/trials_pruned"] == 6


def test_tune_and_sweep_share_the_registry_lease(tmp_path):
    """A tune is the registry's driver: it refuses to start beside a live sweep, then holds the lease
    itself for its whole run and gives it back."""
    config, space = write(tmp_path / "base.yaml", BASE), write(tmp_path / "space.yaml", SPACE)
    ws = tmp_path / "ws"
    Session = reg.connect(reg.default_url(ws))
    opts = TuneOptions(trials=1, name="leased", workspace=ws, out=tmp_path / "best.yaml",
                       tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    with Lease(Session, "ten_tricks"), pytest.raises(DriverBusy, match="sweep 'ten_tricks'"):
        tune(config, space, opts)
    with Session() as s:
        assert reg.get_sweep(s, "tune-leased") is None  # refused before it registered anything

    seen = []
    result = tune(config, space, opts, on_trial=lambda t: seen.append(_holder(Session)))
    assert result.stopped_by == "trials" and seen == ["tune-leased"]
    assert _holder(Session) is None


def _holder(Session) -> str | None:
    with Session() as s:
        lease = s.get(reg.DriverLease, 1)
        return lease.sweep if lease else None


def start(args: list[str], log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "grpo_lab.cli", "tune", *args]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "COLUMNS": "200"})


def folders(ws: Path) -> tuple[int, bool]:
    """(runs with a summary, whether a run without one is past its first checkpoint)."""
    runs = [d for d in (ws / "runs").glob("*") if d.is_dir()] if (ws / "runs").exists() else []
    beats = [json.loads((d / "heartbeat.json").read_text()) for d in runs
             if not (d / "summary.json").exists() and (d / "heartbeat.json").exists()]
    return sum((d / "summary.json").exists() for d in runs), any(b["step"] >= 2 for b in beats)


@pytest.mark.slow
def test_kill_9_then_restart_completes_the_study_training_no_finished_run_twice(tmp_path):
    # 12 steps: the third trial stays between its step-2 checkpoint and its end long enough for the
    # poll and the freeze to land there on a fast, idle box (6 steps once finished in between)
    config = write(tmp_path / "base.yaml", {**BASE, "steps": 12, "eval": {**BASE["eval"], "every": 3}})
    space, ws = write(tmp_path / "space.yaml", SPACE), tmp_path / "ws"
    args = [str(config), "--space", str(space), "--trials", "4", "--name", "killme", "--workspace", str(ws),
            "--out", str(tmp_path / "best.yaml"), "--prune-warmup", "1"]  # no pruning: every trial trains to the end
    first = start(args, tmp_path / "first.log")
    def kill_point() -> bool:  # 2 trials finished and the third past a checkpoint
        done, mid_run = folders(ws)
        return done >= 2 and mid_run

    poll_until(first, tmp_path / "first.log", kill_point, timeout=120, interval=0.01)
    freeze_workers(ws)
    assert folders(ws)[1], "the third trial ended before the kill point"
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    url = reg.default_url(ws)
    before = optuna.load_study(study_name="tune-killme", storage=url)
    finished_first = {t.number: t.user_attrs["run_id"] for t in before.get_trials(states=(TrialState.COMPLETE,))}
    assert len(finished_first) >= 2 and before.get_trials(states=(TrialState.RUNNING,))

    again = start(args, tmp_path / "second.log")
    assert again.wait(timeout=120) == 0, (tmp_path / "second.log").read_text()
    study = optuna.load_study(study_name="tune-killme", storage=url)
    complete = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(complete) == 4 and {t.number for t in complete} >= set(finished_first)
    assert len({t.user_attrs["run_id"] for t in complete}) == 4  # the restart proposed new points, not the old ones
    resumed = [t.number for t in complete if "resumes" in t.user_attrs]
    assert len(resumed) == 1 and len(study.get_trials(states=(TrialState.FAIL,))) == 1
    with reg.connect(url)() as s:
        for t in complete:
            run = s.get(reg.Run, t.user_attrs["run_id"])
            statuses = [a.status for a in run.attempts]
            assert statuses == (["interrupted", "finished"] if t.number in resumed else ["finished"]), t.number
            lines = (Path(run.out_dir) / "metrics.jsonl").read_text().splitlines()
            steps = [json.loads(line)["step"] for line in lines]
            assert steps == list(range(12)), t.number  # each step trained (and logged) once
            if t.number in resumed:  # the killed attempt keeps its hours; the next one resumed past step 0
                assert run.attempts[0].gpu_hours > 0 and run.attempts[1].start_step >= 2
