"""The decisions section: shown with a variance budget or --decide waves, absent otherwise."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl

from grpo_lab.report import write_report
from tests.report.conftest import make_data

VARIANCE = pl.DataFrame([{"model": "tiny", "task": "math", "seeds": 2.0, "problems": 200, "sd_seed": 0.01,
                          "sd_resid": 0.3, "sd_arm_problem": 0.02, "share_seed": 0.25, "share_eval": 0.75,
                          "seeds_needed_now": 40.0, "hours_now": 0.8, "best_problems": 900, "best_seeds": 12.0,
                          "hours_best": 0.31, "delta": 0.02}])
DECISIONS = {
    "waves": [{"wave": 0, "hours": 0.5, "runs": 26, "significant": 1, "equivalent": 0, "open": 2, "added": 4},
              {"wave": 1, "hours": 0.6, "runs": 30, "significant": 1, "equivalent": 1, "open": 1, "added": 0}],
    "verdicts": [
        {"name": "tiny/math/effect:g16", "kind": "effect", "model": "tiny", "task": "math", "target": "g16",
         "est": 0.05, "radius": 0.02, "verdict": "significant", "wave": 0, "hours": 0.5},
        {"name": "tiny/math/effect:kl", "kind": "effect", "model": "tiny", "task": "math", "target": "kl",
         "est": 0.001, "radius": 0.01, "verdict": "equivalent", "wave": 1, "hours": 0.6},
        {"name": "tiny/math/interaction:g16+kl", "kind": "interaction", "model": "tiny", "task": "math",
         "target": "g16+kl", "est": -0.01, "radius": 0.05, "verdict": "open", "wave": None, "hours": None}],
}


def test_decisions_section_reports_waves_verdicts_and_the_budget(tmp_path: Path) -> None:
    data = dataclasses.replace(make_data(), variance=VARIANCE, decisions=DECISIONS)
    _, md = write_report(data, tmp_path)
    text = md.read_text()
    assert '<a id="decisions"></a>' in text and text.index('id="decisions"') < text.index('id="costs"')
    assert "Decided 2 of 2 effects and 0 of 1 interactions: 1 significant, 1 equivalent within ±δ, 1 open" in text
    assert "| 900 |" in text and "75%" in text  # best eval size, eval share


def test_no_decisions_section_without_its_inputs(tmp_path: Path) -> None:
    _, md = write_report(make_data(), tmp_path)
    assert 'id="decisions"' not in md.read_text()


def test_the_section_names_the_sequence_the_waves_used(tmp_path: Path) -> None:
    said = {}
    for case, options in {"t": {"sequence": "t", "method": "paired"}, "old": {"method": "unpaired"},
                          "unrecorded": None}.items():
        data = dataclasses.replace(make_data(), decisions={**DECISIONS, "options": options})
        said[case] = " ".join(write_report(data, tmp_path / case)[1].read_text().split())
    assert "t-mixture confidence sequences" in said["t"] and "seed-index paired contrasts" in said["t"]
    assert "Betting confidence sequences" in said["old"] and "per-arm means" in said["old"]  # before t existed
    assert "options were not recorded" in said["unrecorded"]


def test_the_section_says_which_scores_the_eval_design_changed(tmp_path: Path) -> None:
    design = {"sequence": "t", "method": "paired", "eval_samples": "auto",
              "eval_design": [["models/tiny.yaml", "logic", 32], ["models/tiny.yaml", "math", 16]]}
    said = {}
    for case, options in {"design": design, "none": {**design, "eval_design": []}}.items():
        data = dataclasses.replace(make_data(), decisions={**DECISIONS, "options": options})
        said[case] = " ".join(write_report(data, tmp_path / case)[1].read_text().split())
    assert "more completions per problem (logic at 32, math at 16; the eval design" in said["design"]
    assert "completions per problem" not in said["none"]
