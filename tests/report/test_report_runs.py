"""A verdict row leads to the runs it rests on: their folders, eval samples, metrics and MLflow names."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from urllib.parse import unquote

from grpo_lab.report import write_report
from grpo_lab.report.runs import arm_anchor


def test_arm_anchors_differ_for_names_that_read_alike() -> None:
    assert arm_anchor("a-b", "c", "x") != arm_anchor("a", "b-c", "x")
    assert arm_anchor("tiny", "math", "a+b") != arm_anchor("tiny", "math", "a-b")
    assert arm_anchor("tiny", "math", "a+b") == arm_anchor("tiny", "math", "a+b")


def test_each_verdict_row_links_to_its_arms_runs_and_their_files(report_data, tmp_path: Path) -> None:
    runs_dir = tmp_path / "ws #1" / "runs"  # a '#' in a path must not cut the link into an anchor
    folders = {r: runs_dir / r for r in report_data.runs["run_id"].to_list()}
    for folder in folders.values():
        folder.mkdir(parents=True)
        for name in ("completions.jsonl", "metrics.jsonl"):
            (folder / name).write_text("{}\n")
    runs = report_data.runs.with_columns(
        report_data.runs["run_id"].replace_strict({k: str(v) for k, v in folders.items()}).alias("folder"),
        (report_data.runs["tricks"] + "-s" + report_data.runs["seed"].cast(str)).alias("mlflow_run"))
    html_path, md_path = write_report(dataclasses.replace(report_data, runs=runs), tmp_path / "report")
    page, md = html_path.read_text(), md_path.read_text()

    target = arm_anchor("tiny", "math", "kl_decay+ema_ref")
    assert f'<a href="#{target}">kl_decay+ema_ref</a>' in page  # the verdict row's trick set
    assert page.count(f'<tr id="{target}">') == 1  # the arm's first run
    assert f'<a id="{target}"></a>' in md
    hrefs = set(re.findall(r'<a href="([^"#][^"]*)"', page))
    assert "../ws%20%231/runs/math-kl_decay%2Bema_ref-1/completions.jsonl" in hrefs
    for href in hrefs:  # every file link resolves from the report's folder
        assert (html_path.parent / unquote(href)).exists(), href
    assert "(<../ws%20%231/runs/math-kl_decay%2Bema_ref-1/metrics.jsonl>)" in md
    assert "kl_decay+ema_ref-s2" in page  # the MLflow run's name
