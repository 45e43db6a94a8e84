"""MLflow tracking: a real SQLite store and a real tiny run folder, logged the way the sweep driver does."""

import json
import math
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_lab.execution import tracking
from grpo_lab.util.environment import env_snapshot
from grpo_lab.rundir import Summary
from grpo_lab.execution.tracking import (
    Tracker,
    EVAL_TABLE,
    completion_table,
    metric_key,
    summary_metrics,
)

ROOT = Path(__file__).resolve().parents[2]
ALARM = {"step": 2, "kind": "reward_cliff", "value": 0.1, "threshold": 0.3, "message": "reward fell"}
# Env vars that make MLflow think it runs under CI/pytest and switch its telemetry off by itself.
CI_VARS = ("PYTEST_CURRENT_TEST", "CI", "GITHUB_ACTIONS", "GITLAB_CI", "BUILDKITE", "JENKINS_URL", "TRAVIS",
           "CIRCLECI", "TF_BUILD", "BITBUCKET_BUILD_NUMBER", "CODEBUILD_BUILD_ARN", "TEAMCITY_VERSION",
           "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "MLFLOW_TRACKING_URI")


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    """Two run folders: a real 4-step tiny run, and a copy of it with an alarm and a NaN step value."""
    from grpo_lab.trainer.grpo import train
    from tests.conftest import tiny_cfg

    root = tmp_path_factory.mktemp("runs")
    first = root / "r1"
    train(tiny_cfg(steps=4), first)
    second = root / "r2"
    shutil.copytree(first, second)
    (second / "events.jsonl").write_text(json.dumps(ALARM) + "\n")
    rows = [json.loads(line) for line in (second / "metrics.jsonl").read_text().splitlines()]
    rows[1]["kl/mean"] = float("nan")
    (second / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return first, second


@pytest.fixture(scope="module")
def logged(run_dirs, tmp_path_factory):
    """A sweep with both runs logged: (tracker, parent id, child ids)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('ws') / 'mlflow.db'}"
    tracker = Tracker(uri)
    parent = tracker.start_sweep("sw", ROOT / "matrices" / "quickstart.yaml", {"owner": "test"})
    children = [
        tracker.log_run(parent, {"run_id": "run1", "tricks": [], "dimensions": []}, run_dirs[0], "finished",
                        {"attempt": 1, "gpu_hours": 0.01, "host": "vm"}),
        tracker.log_run(parent, {"run_id": "run2", "tricks": ["dyn_g"], "dimensions": ["sampling"]}, run_dirs[1],
                        "stopped", {"attempt": 1, "gpu_hours": 0.02}),
    ]
    tracker.end_sweep(parent, "finished", {"gpu_hours": 0.03, "wasted_gpu_hours": 0.0, "cells": {"finished": 1}})
    return tracker, parent, children


@pytest.fixture
def fluent_uri(logged):
    """mlflow's global tracking URI set to the test store (set_tracking_uri also sets the env var)."""
    import mlflow

    before = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(logged[0].uri)
    yield logged[0].uri
    mlflow.set_tracking_uri(None)
    if before is not None:
        os.environ["MLFLOW_TRACKING_URI"] = before


def test_search_runs_finds_parent_and_children_with_tags_params_metrics(logged, fluent_uri):
    import mlflow

    tracker, parent, children = logged
    exp = [tracker.experiment_id]
    top = mlflow.search_runs(experiment_ids=exp, filter_string="tags.`grpo_lab.sweep` = 'sw'")
    assert list(top["run_id"]) == [parent]
    assert top.loc[0, "metrics.sweep/gpu_hours"] == pytest.approx(0.03)
    assert top.loc[0, "metrics.sweep/cells/finished"] == 1
    assert top.loc[0, "tags.matrix"] == "quickstart" and top.loc[0, "status"] == "FINISHED"

    kids = mlflow.search_runs(experiment_ids=exp, filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    kids = kids.set_index("tags.run_id").loc[["run1", "run2"]]
    assert list(kids["run_id"]) == children
    assert list(kids["tags.tricks"]) == ["baseline", "dyn_g"]
    assert list(kids["tags.dimensions"]) == ["", "sampling"]
    assert set(kids["tags.model"]) == {str(ROOT / "tests" / "data" / "tiny-fast.yaml")}
    assert set(kids["tags.task"]) == {"math"} and set(kids["tags.seed"]) == {"0"}
    assert set(kids["tags.matrix"]) == {"quickstart"} and set(kids["tags.sweep"]) == {"sw"}
    assert list(kids["tags.status"]) == ["finished", "stopped"] and set(kids["status"]) == {"FINISHED"}
    assert set(kids["tags.env.python"]) == {env_snapshot()["python"]}
    assert set(kids["params.sampling.group_size"]) == {"4"} and set(kids["params.steps"]) == {"4"}
    assert (kids["metrics.cost/tokens_generated"] > 0).all() and (kids["metrics.cost/wall_seconds"] > 0).all()
    assert "metrics.cost/phase_seconds/train" in kids and "metrics.final/delta_pass_at_1" in kids
    assert list(kids["metrics.attempt/gpu_hours"]) == [0.01, 0.02]


def test_step_metrics_have_one_value_per_step(logged, run_dirs):
    client, child = logged[0].client, logged[2][0]
    rows = [json.loads(line) for line in (run_dirs[0] / "metrics.jsonl").read_text().splitlines()]
    history = client.get_metric_history(child, "reward/mean")
    assert sorted((m.step, m.value) for m in history) == [(r["step"], r["reward/mean"]) for r in rows]
    evals = client.get_metric_history(child, "eval/pass_at_1")  # '@' is not a legal MLflow key character
    assert sorted(m.step for m in evals) == [r["step"] for r in rows if "eval/pass@1" in r]


def test_artifacts_completion_tables_and_alarms(logged, fluent_uri):  # load_table searches via the global URI
    tracker, _, (first, second) = logged
    client = tracker.client
    assert {a.path for a in client.list_artifacts(first)} >= {"config.json", "summary.json", "eval"}
    files = [a.path for a in client.list_artifacts(first, "eval")]
    assert files == [EVAL_TABLE]
    table = client.load_table(tracker.experiment_id, EVAL_TABLE, run_ids=[first])
    assert {"step", "prompt", "completion", "reward", "sample"} <= set(table.columns)
    assert sorted(set(table["step"])) == [1, 3] and len(table) == 16  # 2 evals x 4 prompts x 2 samples

    run = client.get_run(second)
    assert run.data.tags["nonfinite_count"] == "1" and run.data.tags["nonfinite_keys"] == "kl/mean"
    assert [(m.step, m.value) for m in client.get_metric_history(second, "alarm/reward_cliff")] == [(2, 0.1)]
    alarms = client.load_table(tracker.experiment_id, "alarms/events.json", run_ids=[second])
    assert list(alarms["kind"]) == ["reward_cliff"]
    assert "events.jsonl" in {a.path for a in client.list_artifacts(second)}
    kl = client.get_metric_history(second, "kl/mean")
    assert len(kl) == 3 and all(math.isfinite(m.value) for m in kl)


def test_logging_twice_keeps_one_child_per_attempt(logged, run_dirs):
    tracker = logged[0]
    parent = tracker.start_sweep("again")
    assert tracker.start_sweep("again") == parent  # a re-run of the sweep reuses its parent
    labels = {"run_id": "same"}
    first = tracker.log_run(parent, labels, run_dirs[0], "failed", {"attempt": 1})
    assert tracker.log_run(parent, labels, run_dirs[0], "finished", {"attempt": 1}) == first
    kids = tracker.client.search_runs([tracker.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")
    assert [k.info.run_id for k in kids] == [first]
    assert kids[0].data.tags["status"] == "finished" and kids[0].info.status == "FINISHED"
    assert len(tracker.client.get_metric_history(first, "reward/mean")) == 4  # not logged twice
    second = tracker.log_run(parent, labels, run_dirs[0], "finished", {"attempt": 2})
    assert second != first


def test_child_cut_off_mid_logging_is_logged_afresh(logged, run_dirs):
    tracker = logged[0]
    parent = tracker.start_sweep("cut")
    partial = tracker.client.create_run(tracker.experiment_id, tags={
        "mlflow.parentRunId": parent, "run_id": "cut1", "attempt": "1"}).info.run_id
    child = tracker.log_run(parent, {"run_id": "cut1"}, run_dirs[0], "finished", {"attempt": 1})
    assert child != partial and tracker.client.get_run(partial).info.lifecycle_stage == "deleted"
    assert tracker.client.get_run(child).data.tags[tracking.COMPLETE_TAG] == "true"


GUARDED_SCRIPT = """
import socket, sys
from pathlib import Path
attempts = []
def refuse(address):
    attempts.append(repr(address))
    raise OSError(f"network disabled in this test: {address!r}")
real_connect = socket.socket.connect
def connect(self, address):
    if self.family != socket.AF_UNIX:
        refuse(address)
    return real_connect(self, address)
socket.socket.connect = connect
socket.create_connection = lambda address, *a, **k: refuse(address)
socket.getaddrinfo = lambda host, *a, **k: refuse(host)
sys.path.insert(0, sys.argv[3])
from grpo_lab.execution.tracking import Tracker
import mlflow, mlflow.telemetry.client
tracker = Tracker(sys.argv[1])
parent = tracker.start_sweep("offline")
child = tracker.log_run(parent, {"run_id": "off"}, Path(sys.argv[2]), "finished", {"attempt": 1})
assert tracker.client.search_runs([tracker.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")
mlflow.set_tracking_uri(sys.argv[1])
assert len(mlflow.search_runs(experiment_ids=[tracker.experiment_id])) >= 2
assert mlflow.telemetry.client.get_telemetry_client() is None, "telemetry client is active"
assert not attempts, attempts
print("offline ok")
"""


def test_no_network_with_a_sqlite_store(tmp_path, logged, run_dirs):
    """In a fresh process outside pytest's env (MLflow disables its telemetry under CI/pytest by
    itself), with every non-AF_UNIX connect and DNS lookup refused from before the first import.
    Without grpo_lab's MLFLOW_DISABLE_TELEMETRY default, importing mlflow looks up
    config.mlflow-telemetry.io and this fails."""
    script = tmp_path / "guarded.py"
    script.write_text(GUARDED_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in CI_VARS}
    done = subprocess.run([sys.executable, str(script), logged[0].uri, str(run_dirs[0]), str(ROOT)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "offline ok" in done.stdout, done.stderr[-3000:]


def test_no_network_in_process(logged, run_dirs, monkeypatch):
    tracker = logged[0]
    real_connect = socket.socket.connect

    def connect(self, address):
        if self.family != socket.AF_UNIX:
            raise AssertionError(f"network call to {address!r}")
        return real_connect(self, address)

    def refuse(address, *args, **kwargs):
        raise AssertionError(f"network call to {address!r}")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "create_connection", refuse)
    parent = tracker.start_sweep("guarded")
    child = tracker.log_run(parent, {"run_id": "g"}, run_dirs[1], "finished", {"attempt": 1})
    assert [r.info.run_id for r in tracker.client.search_runs(
        [tracker.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'")] == [child]


def test_default_tracking_uri(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert tracking.default_tracking_uri(tmp_path) == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    assert tracking.default_tracking_uri(tmp_path) == "http://mlflow.example:5000"


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except ProcessLookupError:
        return False


def test_ui_serves_the_workspace_store_and_nothing_outlives_it_even_a_kill_9(tmp_path):
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tracker = Tracker(tracking.default_tracking_uri(tmp_path / "ws"))  # the store the ui reads
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    ui = subprocess.Popen([sys.executable, "-m", "grpo_lab.cli", "ui", "--workspace", str(tmp_path / "ws"),
                           "--port", str(port)], cwd=elsewhere, env=env, stdout=subprocess.PIPE, text=True)
    try:
        said = ui.stdout.readline() + ui.stdout.readline()  # "starting ...", then the URL once it answers
        assert said.startswith("starting the MLflow UI") and "MLflow UI: " in said and _answers(port), said
        assert f"http://127.0.0.1:{port}/#/experiments/{tracker.experiment_id}/runs" in said
        server = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_mlflow_ui(int(p), port)]
        assert server, "no mlflow ui process found"
        group = os.getpgid(server[0])
        assert group != os.getpgid(ui.pid)  # its own group: one signal takes all of it down
        ui.kill()  # SIGKILL: nothing in the ui command runs after it
        ui.wait()
        deadline = time.monotonic() + 30
        while (_answers(port) or _group_alive(group)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _answers(port) and not _group_alive(group)
    finally:
        ui.kill()
    assert not (elsewhere / "mlruns").exists() and not (elsewhere / "mlartifacts").exists()


def _is_mlflow_ui(pid: int, port: int) -> bool:
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return False
    return b"mlflow" in b" ".join(cmd) and str(port).encode() in cmd and b"ui" in cmd


def test_a_new_store_keeps_the_default_experiments_artifacts_in_the_workspace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tracker = Tracker(tracking.default_tracking_uri(tmp_path / "ws"))
    default = tracker.client.get_experiment("0")
    assert default.name == "Default"
    assert default.artifact_location.startswith((tmp_path / "ws" / "mlartifacts").as_uri())


def test_metric_keys_tables_and_summary_metrics():
    assert metric_key("eval/pass@1") == "eval/pass_at_1" and metric_key("a{b}") == "a_b_"
    table = completion_table([{"step": 3, "prompt": "p", "completions": ["a", "b"], "rewards": [1.0, 0.0],
                               "advantages": [0.5, -0.5]}])
    assert table == {"step": [3, 3], "prompt": ["p", "p"], "sample": [0, 1], "completion": ["a", "b"],
                     "reward": [1.0, 0.0], "advantage": [0.5, -0.5]}
    out = summary_metrics(Summary.model_validate({
        "seed": 1, "steps": 4, "device_hours": 0.5, "stopped": True, "unit": "cpu-hours",
        "device_hours_by_phase": {"sampling": 0.3, "train": float("nan")},
        "final": {"eval/pass@1": 0.4}, "delta_pass@1": 0.1}))
    assert out == {"cost/device_hours": 0.5, "cost/stopped": 1.0, "cost/device_hours_by_phase/sampling": 0.3,
                   "final/eval/pass_at_1": 0.4, "final/delta_pass_at_1": 0.1}


def test_a_failing_store_warns_and_the_sweep_goes_on(tmp_path, run_dirs):
    """SweepTracker over a store that cannot open (a folder as the SQLite file): every call warns, none raises."""
    from types import SimpleNamespace

    from grpo_lab.execution.mirror import SweepTracker

    cell = SimpleNamespace(run_id="r1", run=SimpleNamespace(status="finished", out_dir=str(run_dirs[1]),
                                                            attempts=[SimpleNamespace(status="finished")]))
    sweep = SimpleNamespace(name="sw", hardware="cpu", unit="device-hours", cells=[cell], mlflow_parent_id=None)
    with pytest.warns(tracking.TrackingWarning, match="starting the MLflow parent run failed"):
        mirror = SweepTracker(f"sqlite:///{tmp_path}", sweep, tmp_path / "m.yaml")
    assert mirror.parent is None and sweep.mlflow_parent_id is None
    mirror.log(cell)  # nothing to log into: a no-op, not an exception
    mirror.finish("finished")


def test_guarded_turns_an_exception_into_a_tracking_warning():
    calls = []
    tracking.guarded(lambda: calls.append(1), "fine")
    with pytest.warns(tracking.TrackingWarning, match=r"logging x failed: ValueError: boom"):
        tracking.guarded(lambda: (_ for _ in ()).throw(ValueError("boom")), "logging x")
    assert calls == [1]


def test_a_run_with_two_hundred_evals_logs_whole(run_dirs, tmp_path):
    """MLflow lists each logged table in one run tag of at most 8000 characters: a table per eval
    broke runs with ~100 evals; one table for all of them keeps any run loggable."""
    folder = tmp_path / "long"
    shutil.copytree(run_dirs[0], folder)
    row = json.loads((folder / "completions.jsonl").read_text().splitlines()[0])
    (folder / "completions.jsonl").write_text("".join(json.dumps({**row, "step": s}) + "\n" for s in range(200)))
    tracker = Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = tracker.start_sweep("long", ROOT / "matrices" / "quickstart.yaml", {})
    child = tracker.log_run(parent, {"run_id": "long", "tricks": [], "dimensions": []}, folder, "finished", {"attempt": 1})
    run = tracker.client.get_run(child)
    assert run.data.tags["grpo_lab.logged"] == "true"  # set last: logging finished
    assert [a.path for a in tracker.client.list_artifacts(child, "eval")] == [EVAL_TABLE]
