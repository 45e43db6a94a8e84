"""A team's plugin package, pip-installed, and its reward functions, trained in a real sweep.

The example package (examples/plugin: task `geo` by entry point, reward functions) is installed
into this venv for the module and removed after. The sweep trains three cells: geo with the task
reward, a package reward and a file reward; math with a reward that returns NaN (stopped with an
alarm); logic with a reward that returns too few values (failed, its error naming the key). The
sweep goes on past both.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from grpo_lab.cli import app
from grpo_lab.execution import registry as reg
from grpo_lab.tasks import registry
from tests.conftest import ROOT, TINY_FAST
from tests.execution.sweeps import BASE

pytestmark = pytest.mark.slow
FILE = "tests/plugins/rewards_file.py"


@pytest.fixture(scope="module")
def geo_installed(tmp_path_factory):
    source = tmp_path_factory.mktemp("plugin") / "plugin"
    shutil.copytree(ROOT / "examples" / "plugin", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "--no-deps", "--no-build-isolation", "--no-index", str(source)], check=True)
    registry.resolve.cache_clear()
    try:
        yield
    finally:
        subprocess.run([*pip, "uninstall", "-y", "grpo-geo"], check=False)
        registry.resolve.cache_clear()


def test_installed_plugin_is_listed(geo_installed):
    listed = CliRunner().invoke(app, ["tasks", "--json"])
    assert listed.exit_code == 0, listed.output
    geo = next(t for t in json.loads(listed.output) if t["name"] == "geo")
    assert geo["kind"] == "entry point" and geo["source"].startswith("grpo_geo.tasks:GeoTask (grpo-geo")


def _matrix(folder: Path) -> Path:
    geo_rewards = [{"function": "task"}, {"function": "grpo_geo.rewards:exact_match", "weight": 0.5},
                   {"function": f"{FILE}:brevity", "role": "shape", "weight": 0.1}]
    spec = {"name": "plugins", "models": [TINY_FAST], "tasks": ["geo", "math", "logic"], "seeds": [0],
            "tricks": ["baseline"], "base": {**BASE, "reward": {"functions": geo_rewards}},
            "task_base": {"math": {"reward": {"functions": [{"function": f"{FILE}:nan_reward"}]}},
                          "logic": {"reward": {"functions": [{"function": f"{FILE}:one_short"}]}}}}
    path = folder / "plugins.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_plugin_sweep_trains_stops_on_nan_and_goes_on(geo_installed, tmp_path):
    from tests.execution.test_sweep_local import sweep_once

    result, sweep, session = sweep_once(_matrix(tmp_path), tmp_path / "ws", retries=0)
    runs = {cell.task: cell.run for cell in sweep.cells}
    assert {t: r.status for t, r in runs.items()} == {"geo": "finished", "math": "stopped", "logic": "failed"}

    geo = Path(runs["geo"].out_dir)
    steps = [json.loads(line) for line in (geo / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == BASE["steps"] and all({"reward/task", "reward/exact_match", "reward/brevity"} <= set(s) for s in steps)
    plugins = json.loads((geo / "config.json").read_text())["reward"]["functions"]
    assert [f["function"] for f in plugins][1] == "grpo_geo.rewards:exact_match"
    assert not json.loads((geo / "summary.json").read_text())["stopped"]

    math = json.loads((Path(runs["math"].out_dir) / "summary.json").read_text())
    assert math["stopped"] and math["stop_reason"].startswith("nan reward at step 0") and "reward/nan_reward" in math["stop_reason"]
    events = [json.loads(line) for line in (Path(runs["math"].out_dir) / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["nan"]

    assert runs["logic"].error.splitlines()[0] == ("RewardFunctionError: reward.functions[0] "
                                                   f"({FILE}:one_short) returned 15 values for 16 completions")
    session.close()


def test_run_ids_name_the_plugins(geo_installed):
    from grpo_lab.spec.config import resolve

    cfg = resolve({"model": TINY_FAST, "task": "geo", "reward": {"function": "grpo_geo.rewards:exact_match"}})
    plugins = cfg.identity()["plugins"]
    assert plugins["task:geo"]["source"] == "grpo_geo.tasks:GeoTask" and len(plugins["task:geo"]["sha256"]) == 12
    assert len(plugins["reward:grpo_geo.rewards:exact_match"]["sha256"]) == 12
