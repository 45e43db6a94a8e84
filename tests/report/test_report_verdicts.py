"""The verdict table's labels control the family's error, follow the detector's flags, and after
--decide say what --decide decided."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy import stats

from grpo_lab.report.verdicts import (
    COLLAPSES_LESS,
    COLLAPSES_MORE,
    HARMFUL,
    HARMFUL_COMBO,
    ON_ESTIMAND,
    UNDECIDED,
    WORTH_IT,
    VerdictPolicy,
    verdict_table,
)
from tests.report.conftest import verdict

TRICKS = [f"t{i}" for i in range(13)]
TASKS = ["code", "logic", "math"]


def _stats(keys) -> pl.DataFrame:
    return pl.DataFrame([{"model": "m", "task": task, "tricks": t, "hours_per_run": 1.0,
                          "cost_per_effective_sample": 1e-6} for task, t in keys])


def _effects(z: np.ndarray, keys, se: float = 0.01) -> pl.DataFrame:
    est = z * se
    half = stats.norm.ppf(0.975) * se
    return pl.DataFrame([{"model": "m", "task": task, "tricks": t, "n": 5, "effect": e, "ci_low": e - half,
                          "ci_high": e + half, "p_value": 2 * stats.norm.sf(abs(e) / se)}
                         for (task, t), e in zip(keys, est)])


NO_INTERACTIONS = pl.DataFrame(schema={"model": pl.String, "task": pl.String, "tricks": pl.String,
                                       "verdict": pl.String, "interaction": pl.Float64, "flagged": pl.Boolean})


def test_no_true_effect_gives_a_label_in_at_most_alpha_of_sweeps():
    """39 null effects per sweep: an uncorrected CI labels a trick in most sweeps, Holm in ≤ α."""
    rng = np.random.default_rng(0)
    keys = [(task, t) for task in TASKS for t in TRICKS]
    base = [(task, "baseline") for task in TASKS]
    reps, labelled = 300, 0
    for _ in range(reps):
        table = verdict_table(_stats(keys + base), _effects(rng.normal(size=len(keys)), keys), NO_INTERACTIONS,
                              VerdictPolicy())
        labelled += bool(table["verdict"].is_in([WORTH_IT, HARMFUL]).any())
    assert labelled / reps <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / reps)
    uncorrected = np.mean([(np.abs(rng.normal(size=len(keys))) > 1.96).any() for _ in range(reps)])
    assert uncorrected > 0.5  # what labelling every uncorrected CI did


def test_a_helpful_trick_in_an_additive_pair_with_a_harmful_one_is_not_harmful_in_combination():
    keys = [("math", "good"), ("math", "bad"), ("math", "good+bad")]
    effects = _effects(np.array([6.0, -12.0, -6.0]), keys)  # good + bad = good+bad: additive
    inter = pl.DataFrame([{"model": "m", "task": "math", "tricks": "good+bad", "verdict": "harmful",
                           "interaction": 0.0, "flagged": False}])
    got = dict(verdict_table(_stats(keys + [("math", "baseline")]), effects, inter, VerdictPolicy())
                 .select("tricks", "verdict").iter_rows())
    assert got == {"good": WORTH_IT, "bad": HARMFUL, "good+bad": HARMFUL}
    flagged = inter.with_columns(pl.lit("negative_interaction").alias("verdict"), pl.lit(True).alias("flagged"))
    again = dict(verdict_table(_stats(keys + [("math", "baseline")]), effects, flagged, VerdictPolicy())
                   .select("tricks", "verdict").iter_rows())
    assert again["good"] == HARMFUL_COMBO


HEALTHY = ON_ESTIMAND["healthy"]


def _decided(verdicts, keys, options=None) -> dict:
    effects = _effects(np.array([5.0, -5.0, 0.1, 0.2][:len(keys)]), keys)  # fixed-sample CIs: two clear effects
    decisions = {"waves": [{"wave": 0}], "verdicts": verdicts, "options": options or {"most_seeds": 32}}
    table = verdict_table(_stats(keys + [("math", "baseline")]), effects, NO_INTERACTIONS, VerdictPolicy(), decisions)
    return {r["tricks"]: r for r in table.iter_rows(named=True)}


def test_after_decide_the_labels_are_its_verdicts_named_by_their_estimand():
    keys = [("math", "g16"), ("math", "temp"), ("math", "kl")]
    got = _decided([verdict("g16", "open", 0.05, 0.08, model="m"),
                    verdict("temp", "significant", -0.05, 0.02, model="m"),
                    verdict("kl", "equivalent", 0.001, 0.01, model="m")], keys)
    assert got["g16"]["verdict"] == UNDECIDED and "still being sampled" in got["g16"]["reason"]
    assert got["temp"]["verdict"] == f"{HARMFUL} {HEALTHY}" and got["temp"]["tone"] == "bad"
    assert got["kl"]["verdict"] == f"no change {HEALTHY}" and "±δ" in got["kl"]["reason"]


def test_a_healthy_verdict_never_reads_as_plain_no_effect_or_harmful():
    keys = [("math", "a"), ("math", "b"), ("math", "c")]
    got = _decided([verdict("a", "equivalent", 0.0, 0.01, model="m"),
                    verdict("b", "significant", -0.04, 0.01, model="m"),
                    verdict("c", "significant", 0.04, 0.01, model="m")], keys)
    for row in got.values():
        assert row["verdict"] not in ("no effect", HARMFUL, WORTH_IT) and row["verdict"].endswith(HEALTHY)
        assert "no effect" not in row["verdict"]
    mean = _decided([verdict("a", "equivalent", 0.0, 0.01, model="m", estimand="mean")], keys[:1])
    assert mean["a"]["verdict"] == "no change (assuming no unseen collapse mode)"


def test_the_table_shows_the_interval_and_seeds_the_label_rests_on():
    """The fixed-sample CI (±0.02, significant) is not what --decide's open label rests on: the row
    shows the confidence sequence (±0.08) and its 7 healthy seeds of 9 runs, and no uncorrected p."""
    keys = [("math", "g16")]
    row = _decided([verdict("g16", "open", 0.03, 0.08, model="m", seeds=7, runs=9)], keys)["g16"]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((-0.05, 0.11))
    assert row["effect"] == pytest.approx(0.03) and (row["seeds"], row["runs"]) == (7, 9)
    assert row["p_value"] is None and row["p_holm"] is None


def test_an_open_verdict_gives_its_true_reason():
    keys = [("math", "cap"), ("math", "money"), ("math", "going")]
    got = _decided([verdict("cap", "open", 0.0, 0.05, model="m", reason="seed cap", delta_at_cap=0.031),
                    verdict("money", "open", 0.0, 0.05, model="m", reason="budget"),
                    verdict("going", "open", 0.0, 0.05, model="m", reason="")], keys)
    assert got["cap"]["reason"].startswith("blocked by the seed cap (32 per arm)")
    assert "a margin of ±0.031 could close within it" in got["cap"]["reason"]
    assert got["money"]["reason"].startswith("the budget ran out")
    assert got["going"]["reason"].startswith("still being sampled when the sweep stopped")
    assert not any("within its budget" in r["reason"] for r in got.values())


def test_a_trick_that_collapses_more_is_labelled_harm_whatever_its_pass1_label():
    keys = [("math", "up"), ("math", "same"), ("math", "safer")]
    got = _decided([verdict("up", "significant", 0.03, 0.01, model="m", collapsed=(5, 0), runs=25, seeds=20,
                            collapse="more", collapse_span=(0.02, 0.4)),
                    verdict("same", "equivalent", 0.0, 0.01, model="m", collapsed=(4, 0), runs=25,
                            collapse="more", collapse_span=(0.01, 0.3)),
                    verdict("safer", "equivalent", 0.0, 0.01, model="m", collapsed=(0, 6), runs=25,
                            collapse="fewer", collapse_span=(-0.45, -0.05))], keys)
    for name in ("up", "same"):
        assert got[name]["verdict"] == COLLAPSES_MORE and got[name]["tone"] == "bad"
    assert "pass@1 on seeds that did not collapse: worth it" in got["up"]["reason"]
    assert got["up"]["collapse"].startswith("collapsed 5 of 25 (≤ 50%); baseline 0 of 25 (≤ 19%); collapses more often: +2 to +40 points")
    assert got["safer"]["verdict"] == f"no change {HEALTHY}; {COLLAPSES_LESS}" and got["safer"]["tone"] == "good"


def test_beside_every_verdict_the_collapse_counts_and_what_is_not_excluded():
    keys = [("math", "kl")]
    row = _decided([verdict("kl", "equivalent", 0.0, 0.01, model="m", collapsed=(1, 0), runs=7,
                            collapse_span=(-0.2, 0.35))], keys)["kl"]
    assert row["collapse"] == "collapsed 1 of 7 (≤ 67%); baseline 0 of 7 (≤ 48%); a collapse-rate rise up to 35 points not excluded"


def test_an_interaction_shows_the_collapse_counts_of_its_singles_too():
    from dataclasses import replace

    from grpo_lab.report.verdicts import collapse_text

    v = verdict("a+b", "open", 0.0, 0.05, kind="interaction", collapsed=(3, 0), runs=8)
    counts = (("a+b", 3, 8), ("b", 2, 8), ("a", 0, 8), ("baseline", 0, 8))
    text = collapse_text(v.with_(collapse=replace(v.collapse, counts=counts)))
    assert text.startswith("collapsed 3 of 8 (≤ 84%); a 0 of 8 (≤ 44%); b 2 of 8 (≤ 75%); baseline 0 of 8 (≤ 44%); ")


def test_a_combination_decide_finds_collapsing_more_marks_its_tricks():
    keys = [("math", "a"), ("math", "b"), ("math", "a+b")]
    vs = [verdict("a", "equivalent", 0.0, 0.01, model="m"), verdict("b", "equivalent", 0.0, 0.01, model="m"),
          verdict("a+b", "equivalent", 0.0, 0.01, model="m"),
          verdict("a+b", "equivalent", 0.0, 0.01, model="m", kind="interaction", collapse="more",
                  collapse_span=(0.05, 0.5))]
    got = _decided(vs, keys)
    assert {t: r["verdict"] for t, r in got.items()} == {t: f"{COLLAPSES_MORE} in combination" for t in ("a", "b", "a+b")}


def test_fixed_design_without_effects_labels_follow_the_corrected_tests():
    """5 seeds, Gaussian noise, no effect or interaction planted, the real effects and interactions
    frames: a 'worth it' or 'harmful' label in at most α of sweeps (Holm), and 'harmful in
    combination' exactly where the interaction detector flags a combination."""
    from grpo_lab.analysis.interactions import effects, interactions

    rng = np.random.default_rng(3)
    sets = ["baseline", "a", "b", "c", "d", "a+b", "c+d", "a+b+c"]
    keys = [(task, t) for task in TASKS for t in sets]
    reps, labelled, combo, flagged = 150, 0, 0, 0
    for _ in range(reps):
        runs = pl.DataFrame([{"model": "m", "task": task, "tricks": t, "seed": s, "pass@1": 0.3 + rng.normal(0, 0.02)}
                             for task, t in keys for s in range(5)])
        inter = interactions(runs, "pass@1")
        table = verdict_table(_stats(keys), effects(runs, "pass@1"), inter, VerdictPolicy())
        labelled += bool(table["verdict"].is_in([WORTH_IT, HARMFUL]).any())
        combo += bool((table["verdict"] == HARMFUL_COMBO).any())
        flagged += bool(inter["flagged"].any())
    assert labelled / reps <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / reps)
    assert combo == flagged


def test_an_undecided_row_says_how_many_seeds_would_resolve_the_resolution():
    keys = [("math", "small"), ("math", "other")]
    effects = _effects(np.array([1.0, 0.5]), keys, se=0.02)  # CI ±0.039 at 5 seeds: includes 0
    table = verdict_table(_stats(keys + [("math", "baseline")]), effects, NO_INTERACTIONS, VerdictPolicy())
    got = dict(table.select("tricks", "reason").iter_rows())
    assert set(table["verdict"]) == {UNDECIDED}
    # half-width 0.039 -> 0.02 needs (0.039/0.02)^2 x 5 seeds, widened for the first Holm step (α/2)
    widen = stats.norm.ppf(1 - 0.05 / 4) / stats.norm.ppf(0.975)
    need = int(np.ceil(5 * (stats.norm.ppf(0.975) * 0.02 * widen / 0.02) ** 2))
    assert f"about {need:,} seeds per arm (now 5) would resolve ±0.02" in got["small"]
    coarser = verdict_table(_stats(keys + [("math", "baseline")]), effects, NO_INTERACTIONS,
                            VerdictPolicy(resolution=0.04))
    assert "resolve ±0.04" in dict(coarser.select("tricks", "reason").iter_rows())["small"]
