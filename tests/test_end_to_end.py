"""The user's path on a small sweep: `grpo-lab sweep` -> MLflow store -> `grpo-lab report` -> a
browser. Real registry, real MLflow (SQLite), real worker processes, real Chromium."""

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo_lab.cli import app
from tests.conftest import SECTION_IDS, needs_chromium
from tests.execution.sweeps import write_matrix

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A 2-seed sweep of baseline, two singles and their combination; returns (folder, workspace)."""
    root = tmp_path_factory.mktemp("e2e")
    tricks = ["baseline", {"singles": ["quantile_norm", "ema_reference"]},
              {"combos": [["quantile_norm", "ema_reference"]]}]
    matrix = write_matrix(root, "e2e", seeds=[0, 1], tricks=tricks, steps=6)
    ws = root / "ws"
    with pytest.MonkeyPatch.context() as env:  # the workspace's own MLflow store, restored even on failure
        env.delenv("MLFLOW_TRACKING_URI", raising=False)
        result = CliRunner().invoke(app, ["sweep", str(matrix), "--workspace", str(ws), "--max-parallel", "2"])
        assert result.exit_code == 0, result.output
        yield root, ws


@pytest.fixture(scope="module")
def report_html(swept):
    """`grpo-lab report` of the sweep, written once for the tests that read it; the index.html path."""
    root, ws = swept
    result = CliRunner().invoke(app, ["report", "e2e", "--workspace", str(ws), "--out", str(root / "report")])
    assert result.exit_code == 0, result.output
    return root / "report" / "index.html"


def test_mlflow_store_has_parent_and_every_child(swept):
    import mlflow

    from grpo_lab.execution import tracking

    _, ws = swept
    client = mlflow.MlflowClient(tracking.default_tracking_uri(ws))
    exp = client.get_experiment_by_name("grpo-lab")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1 and len(children) == 8
    for child in children:
        tags, params, metrics = child.data.tags, child.data.params, child.data.metrics
        assert {"model", "task", "tricks", "seed", "run_id", "env.python"} <= set(tags)
        assert params["sampling.group_size"] == "4" and params["seed"] == tags["seed"]
        assert len(client.get_metric_history(child.info.run_id, "reward/mean")) == 6
        assert metrics["cost/device_hours"] > 0 and "cost/cost_per_effective_sample_hours" in metrics
    assert parents[0].data.metrics["sweep/gpu_hours"] > 0


def test_rerun_is_a_no_op(swept):
    root, ws = swept
    result = CliRunner().invoke(app, ["sweep", str(root / "e2e.yaml"), "--workspace", str(ws), "--skip-preflight"])
    assert result.exit_code == 0 and "executed 0 attempt(s), skipped 8" in result.output.replace("\n", " ")
    status = CliRunner().invoke(app, ["status", "e2e", "--workspace", str(ws)], env={"COLUMNS": "250"})
    assert status.exit_code == 0 and status.output.count("finished") == 8


def test_interactions_from_the_sweep(swept):
    _, ws = swept
    out = CliRunner().invoke(app, ["interactions", "e2e", "--workspace", str(ws), "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert [r["tricks"] for r in rows] == ["quantile_norm+ema_reference"] and rows[0]["n_seeds"] == 2


def test_report_from_the_sweep(report_html):
    html = report_html.read_text()
    assert all(f'id="{s}"' in html for s in SECTION_IDS) and "quantile_norm" in html
    assert "http://" not in html and "https://" not in html


@needs_chromium
def test_report_renders_in_chromium(report_html, driver):
    from selenium.webdriver.common.by import By

    driver.get(report_html.resolve().as_uri())
    for section in SECTION_IDS:
        assert driver.find_element(By.CSS_SELECTOR, f"section#{section} > h2").is_displayed(), section
    images = driver.find_elements(By.TAG_NAME, "img")
    assert images and all(driver.execute_script("return arguments[0].naturalWidth", i) > 0 for i in images)
    assert not [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def test_report_refuses_runs_that_started_from_different_weights(swept, report_html):
    """One run's summary says it started elsewhere (another CPU's warm start): the report names the
    group and counts instead of pooling it; the summary is put back for the tests after this one."""
    _, ws = swept
    summary = sorted((ws / "runs").glob("*/summary.json"))[0]
    before = summary.read_text()
    data = json.loads(before)
    try:
        summary.write_text(json.dumps({**data, "base_weights": "0" * 16}))
        result = CliRunner().invoke(app, ["report", "e2e", "--workspace", str(ws), "--out", str(ws / "r2")])
        said = " ".join(result.output.split())
        assert result.exit_code != 0 and "started from different weights" in said
        assert f"{'0' * 16} (1 runs)" in said and f"{data['base_weights']} (7 runs)" in said
    finally:
        summary.write_text(before)


def test_report_reads_at_a_glance(report_html):
    """A CPU sweep with one combination: the forest plot first, no one-row heatmap, core-hours,
    times to the second, Reproduce commands without the machine's paths."""
    md = (report_html.parent / "report.md").read_text()
    assert md.index("report_files/forest.png") < md.index("report_files/curves-")
    assert "interaction-heatmap" not in md
    assert "core-h" in md and "GPU-h" not in md
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", md)
    reproduce = md[md.index('<a id="reproduce"></a>'):]
    assert "grpo-lab sweep e2e.yaml\n" in reproduce and not re.search(r"(^|\s)/", reproduce)


def test_eval_curves_start_at_each_runs_base_eval(swept):
    import polars as pl

    from grpo_lab.execution import registry as reg
    from grpo_lab.execution.report_inputs import sweep_data

    _, ws = swept
    with reg.connect(reg.default_url(ws))() as session:
        sweep = reg.get_sweep(session, "e2e")
        data = sweep_data(sweep)
        base = {c.run_id: json.loads((Path(c.run.out_dir) / "summary.json").read_text())["base"]["eval/pass@1"]
                for c in sweep.cells}
    first = data.eval_steps().filter(pl.col("step") == 0)
    assert dict(first.select("run_id", "eval/pass@1").iter_rows()) == base


def test_the_report_prices_each_trick_set_planned_against_measured(report_html):
    md = (report_html.parent / "report.md").read_text()
    table = md[md.index("Planned against measured"):]
    assert "measured / planned" in table.splitlines()[2] and re.search(r"\| [\d.]+x \|", table)
