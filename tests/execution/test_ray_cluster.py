"""A sweep through a multi-node Ray cluster (ray.cluster_utils.Cluster: a head without CPUs and two
one-CPU worker nodes), its registry on PostgreSQL as a real cluster's would be. A worker node is
removed mid-sweep: the run it held is retried on the other node from its checkpoint; no finished
run is repeated, no step is lost or logged twice."""

import contextlib
import json
import threading
import time
from pathlib import Path

import psutil
import pytest

from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.base import RayOptions
from grpo_lab.execution.sweep import SweepOptions, execute_sweep, open_sweep, plan_for
from tests.execution.sweeps import write_matrix

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
STEPS = 30


def step_of(run_dir: Path) -> int:
    try:
        return json.loads((run_dir / "heartbeat.json").read_text())["step"]
    except (OSError, ValueError, KeyError):
        return 0


@pytest.fixture
def cluster():
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    workers = [nodes.add_node(num_cpus=1) for _ in range(2)]
    nodes.wait_for_nodes()
    yield nodes, workers
    ray.shutdown()
    nodes.shutdown()


def test_node_lost_mid_sweep_runs_resume_on_the_other_node(cluster, postgres, tmp_path):
    from grpo_lab.execution.runners.ray_runner import RayRunner

    nodes, workers = cluster
    postgres.psql("CREATE DATABASE ray_sweep;")
    url = postgres.get_uri("ray_sweep").replace("postgresql://", "postgresql+psycopg://", 1)
    matrix = write_matrix(tmp_path, "raynodes", seeds=[0, 1], tricks=["baseline"], steps=STEPS)
    opts = SweepOptions(workspace=tmp_path / "ws", db_url=url, retries=1)
    session = reg.connect(url)()
    sweep = open_sweep(session, plan_for(matrix, opts), matrix, opts, env={})
    dirs = [Path(c.run.out_dir) for c in sweep.cells]
    runner = RayRunner(RayOptions(address=nodes.address))
    assert runner.slots == 2  # the worker nodes' CPUs; the head has none

    def remove_a_node():
        """Take away a node running a run past its first checkpoint, once no unfinished run is
        still before one. The node is the busy one, so a box slow to start one run's worker (the
        other may even have finished by then) still loses exactly one running run."""
        from ray._private.state import available_resources_per_node

        deadline = time.time() + 300
        while time.time() < deadline:
            unfinished = [d for d in dirs if not (d / "summary.json").exists()]
            free = available_resources_per_node()
            busy = [w for w in workers if free.get(w.node_id, {}).get("CPU", 0.0) < 1.0]  # a full CPU is not listed
            # as many busy nodes as unfinished runs: no node is still busy with a run that just ended
            if unfinished and len(busy) == len(unfinished) and all(step_of(d) >= 3 for d in unfinished):
                # a lost machine takes its processes with it: the node's workers are its raylet's
                # children, which outlive a killed raylet long enough to finish a short run
                raylet = psutil.Process(busy[0].all_processes["raylet"][0].process.pid)
                doomed = raylet.children(recursive=True)
                nodes.remove_node(busy[0], allow_graceful=False)
                for proc in doomed:
                    with contextlib.suppress(psutil.NoSuchProcess):
                        proc.kill()
                return
            time.sleep(0.05)

    threading.Thread(target=remove_a_node, daemon=True).start()
    try:
        result = execute_sweep(session, sweep, runner, opts)
    finally:
        runner.close()
    assert result.counts["finished"] == 2, [(a.status, a.error) for c in sweep.cells for a in c.run.attempts]
    histories = sorted([a.status for a in c.run.attempts] for c in sweep.cells)
    assert histories == [["finished"], ["interrupted", "finished"]]  # the other run was not touched
    lost = next(c.run for c in sweep.cells if len(c.run.attempts) == 2)
    assert lost.attempts[0].gpu_hours > 0 and "ray task lost" in lost.attempts[0].error
    assert lost.attempts[1].start_step >= 2  # from its checkpoint (every 2 steps), not from step 0
    for d in dirs:
        assert [json.loads(line)["step"] for line in (d / "metrics.jsonl").read_text().splitlines()] == list(range(STEPS))


def test_a_screened_sweep_pauses_and_resumes_on_the_cluster(cluster, tmp_path, monkeypatch):
    """--screen on Ray: a rung's attempts are tasks on the worker nodes that pause at the rung and
    the next rung's tasks resume them (tests/execution/screened.py says what must hold)."""
    from grpo_lab.execution.runners.ray_runner import RayRunner
    from tests.execution.screened import RUNGS, check_screened, force_drop, screen_matrix, screened_once

    nodes, _ = cluster
    force_drop(monkeypatch)
    ws = tmp_path / "ws"
    sweep, session, dropped = screened_once(screen_matrix(tmp_path), ws, RUNGS,
                                            lambda: RayRunner(RayOptions(address=nodes.address)))
    check_screened(sweep, dropped)
    assert {a.runner for c in sweep.cells for a in c.run.attempts} == {"ray"}
    session.close()
