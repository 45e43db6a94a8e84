"""A team's plugin package, pip-installed, and its reward functions, trained in a real sweep.

The example package (examples/plugin: task `geo` by entry point, reward functions) is installed
as a wheel into this venv for the module and removed after. The sweep trains three cells: geo with the task
reward, a package reward and a file reward; math with a reward that returns NaN (stopped with an
alarm); logic with a reward that returns too few values (failed, its error naming the key). The
sweep goes on past both.
"""

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from grpo_lab.cli import app
from grpo_lab.tasks import registry
from tests.conftest import ROOT, TINY_FAST
from tests.execution.sweeps import BASE

pytestmark = pytest.mark.slow
FILE = "tests/plugins/rewards_file.py"


def build_wheel(source: Path, out: Path) -> Path:
    """A wheel of examples/plugin written directly (a wheel is a zip with its metadata), so the
    install needs no build backend and no network: what `pip wheel` would make of its pyproject."""
    name, version, dist = "grpo_geo", "0.1.0", "grpo_geo-0.1.0.dist-info"
    files = {f"grpo_geo/{f.name}": f.read_bytes() for f in sorted((source / "grpo_geo").glob("*.py"))}
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: grpo-geo\nVersion: {version}\n".encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: grpo-lab-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist}/entry_points.txt"] = b"[grpo_lab.tasks]\ngeo = grpo_geo.tasks:GeoTask\n"
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for path, data in files.items()]
    files[f"{dist}/RECORD"] = ("\n".join(record + [f"{dist}/RECORD,,"]) + "\n").encode()
    wheel = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


@pytest.fixture(scope="module")
def geo_installed(tmp_path_factory):
    entry = (ROOT / "examples" / "plugin" / "pyproject.toml").read_text()
    assert 'geo = "grpo_geo.tasks:GeoTask"' in entry  # the wheel below declares what the pyproject does
    wheel = build_wheel(ROOT / "examples" / "plugin", tmp_path_factory.mktemp("wheel"))
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "install", "--no-deps", "--no-index", str(wheel)], check=True)
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
                          "logic": {"reward": {"functions": [{"function": f"{FILE}:one_short_in_big_batches"}]}}}}
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
                                                   f"({FILE}:one_short_in_big_batches) returned 15 values for 16 completions")
    session.close()


def test_run_ids_name_the_plugins(geo_installed):
    from grpo_lab.spec.config import resolve

    cfg = resolve({"model": TINY_FAST, "task": "geo", "reward": {"function": "grpo_geo.rewards:exact_match"}})
    plugins = cfg.identity()["plugins"]
    assert plugins["task:geo"]["source"] == "grpo_geo.tasks:GeoTask" and len(plugins["task:geo"]["sha256"]) == 12
    assert len(plugins["reward:grpo_geo.rewards:exact_match"]["sha256"]) == 12
