"""`grpo-lab preflight` on a plugin task and plugin rewards: each function's signal is checked."""

import json

from typer.testing import CliRunner

from grpo_lab.cli import app
from tests.conftest import ROOT, TINY_FAST

GEO = "examples/plugin/grpo_geo/tasks.py:GeoTask"
FILE = "tests/plugins/rewards_file.py"


def test_preflight_checks_each_plugin_reward(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the config names the plugin files relative to the project
    config = tmp_path / "geo.yaml"
    config.write_text(json.dumps({
        "model": TINY_FAST, "task": GEO, "levels": 2,
        "sampling": {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6},
        "reward": {"functions": [{"function": "task"}, {"function": f"{FILE}:brevity", "role": "shape", "weight": 0.1},
                                 {"function": f"{FILE}:only_math", "role": "shape", "weight": 0.1}]}}))
    out = tmp_path / "preflight.json"
    result = CliRunner().invoke(app, ["preflight", str(config), "--samples", "32", "--prompts", "4", "--out", str(out)])
    report = json.loads(out.read_text())["results"][0]
    assert set(report["stats"]["reward"]) >= {"main", "fn_task", "fn_brevity", "fn_only_math"}
    checks = {c["name"]: c["verdict"] for c in report["checks"]}
    assert checks["reward/fn_task: variance"] == "green" and "reward/fn_brevity: vs task std" in checks
    # only_math never applies to geo problems: a shaping term that never varies is flagged
    assert checks["reward/fn_only_math: variance"] == "yellow"
    assert result.exit_code in (0, 1), result.output
