"""The decisions section: shown with a variance budget or --decide waves, absent otherwise."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import polars as pl

from grpo_lab.report import write_report
from tests.report.conftest import make_data, verdict

VARIANCE = pl.DataFrame([{"model": "tiny", "task": "math", "seeds": 2.0, "problems": 200, "sd_seed": 0.01,
                          "sd_resid": 0.3, "sd_arm_problem": 0.02, "share_seed": 0.25, "share_eval": 0.75,
                          "seeds_needed_now": 40.0, "hours_now": 0.8, "best_problems": 900, "best_seeds": 12.0,
                          "hours_best": 0.31, "delta": 0.02}])
DECISIONS = {
    "waves": [{"wave": 0, "hours": 0.5, "runs": 26, "significant": 1, "equivalent": 0, "open": 2, "added": 4},
              {"wave": 1, "hours": 0.6, "runs": 30, "significant": 1, "equivalent": 1, "open": 1, "added": 0}],
    "verdicts": [
        verdict("g16", "significant", 0.05, 0.02, seeds=7, runs=9, collapsed=(2, 0)),
        verdict("kl", "equivalent", 0.001, 0.01, wave=1, hours=0.6),
        verdict("g16+kl", "open", -0.01, 0.05, kind="interaction", reason="seed cap", wave=None, hours=None)],
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


OPTIONS = {"alpha": 0.05, "delta": 0.02, "most_seeds": 32, "method": "paired", "sequence": "t", "estimand": "healthy"}


def _said(tmp_path: Path, options: dict | None, decisions: dict = DECISIONS) -> str:
    data = dataclasses.replace(make_data(), decisions={**decisions, "options": options})
    return " ".join(write_report(data, tmp_path)[1].read_text().split())


def test_the_method_sentence_names_the_estimand_the_alpha_split_and_the_guarantee(tmp_path: Path) -> None:
    said = _said(tmp_path / "healthy", OPTIONS)
    assert "Estimand: pass@1 on the seeds where no run of the comparison collapsed." in said
    # K = 3 comparisons: pass@1 labels at 0.05·0.8/3, collapse labels at 0.05·0.2/3
    assert "(K = 3 comparisons): pass@1 labels at α·0.8/K = 0.013 each" in said
    assert "collapse labels (betting sequences on the paired collapse indicators) at α·0.2/K = 0.0033 each" in said
    assert ("Family-wise error ≤ α over every label, at every wave, whenever the sweep stopped, for Gaussian-like "
            "seed noise on the seeds that did not collapse; collapse labels for any distribution.") in said
    mean = _said(tmp_path / "mean", {**OPTIONS, "estimand": "mean"})
    assert "Estimand: mean pass@1 over all seeds, assuming no collapse mode the seeds have not shown" in mean
    assert "provided no trick has a collapse mode the seeds have not shown" in mean
    old = _said(tmp_path / "old", {k: v for k, v in OPTIONS.items() if k != "estimand"})
    assert "recorded before the estimand was an option; no collapse labels" in old


def test_every_verdict_row_shows_its_interval_seeds_collapses_and_true_reason(tmp_path: Path) -> None:
    said = _said(tmp_path, OPTIONS)
    decisions = said[said.index('<a id="decisions"></a>'):said.index('<a id="costs"></a>')]
    # g16: ±0.02 around +0.05 on 7 of 9 seeds, 2 of its 9 runs collapsed
    assert r"| +0.05 | \[+0.03, +0.07\] | 7 of 9 | **higher on seeds that did not collapse** |" in decisions
    assert "collapsed 2 of 9 (≤ 70%); baseline 0 of 9 (≤ 41%); a collapse-rate rise up to 30 points not excluded" in decisions
    assert "blocked by the seed cap (32 per arm)" in decisions  # the interaction's reason
    assert "within its budget" not in said and "no effect" not in said


def test_a_collapse_more_verdict_is_a_harm_label_in_the_table_and_the_figure(tmp_path: Path) -> None:
    from grpo_lab.report import prepare

    more = verdict("kl_decay", "equivalent", 0.0, 0.01, collapsed=(6, 0), runs=20, collapse="more",
                   collapse_span=(0.05, 0.5))
    data = dataclasses.replace(make_data(), decisions={**DECISIONS, "verdicts": [more], "options": OPTIONS})
    parts = prepare(data)
    row = parts.verdicts.filter((pl.col("task") == "math") & (pl.col("tricks") == "kl_decay")).row(0, named=True)
    assert (row["verdict"], row["tone"]) == ("collapses more often", "bad")
    assert "anytime-valid confidence sequence its label rests on" in parts.figures["glance"][0].caption
