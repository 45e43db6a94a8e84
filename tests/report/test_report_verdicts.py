"""The verdict table's labels control the family's error, follow the detector's flags, and after
--decide say what --decide decided."""

from __future__ import annotations

import numpy as np
import polars as pl
from scipy import stats

from grpo_lab.report.verdicts import (
    HARMFUL,
    HARMFUL_COMBO,
    NO_EFFECT,
    UNDECIDED,
    WORTH_IT,
    VerdictPolicy,
    verdict_table,
)

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


def test_after_decide_the_labels_are_its_verdicts():
    keys = [("math", "g16"), ("math", "temp"), ("math", "kl")]
    effects = _effects(np.array([5.0, -5.0, 0.1]), keys)  # fixed-sample CIs: two clear effects
    decisions = {"waves": [{"wave": 0}], "verdicts": [
        {"kind": "effect", "model": "m", "task": "math", "target": "g16", "est": 0.05, "verdict": "open"},
        {"kind": "effect", "model": "m", "task": "math", "target": "temp", "est": -0.05, "verdict": "significant"},
        {"kind": "effect", "model": "m", "task": "math", "target": "kl", "est": 0.001, "verdict": "equivalent"}]}
    table = verdict_table(_stats(keys + [("math", "baseline")]), effects, NO_INTERACTIONS, VerdictPolicy(), decisions)
    got = {t: (v, why) for t, v, why in table.select("tricks", "verdict", "reason").iter_rows()}
    assert got["g16"][0] == UNDECIDED and "open" in got["g16"][1]
    assert got["temp"][0] == HARMFUL and got["kl"][0] == NO_EFFECT and "equivalent" in got["kl"][1]


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
