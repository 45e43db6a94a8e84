"""Sequential decisions: the confidence sequences hold at every wave, verdicts and allocation."""

import numpy as np
import pytest

from grpo_lab.analysis import decide

KEYS = ["baseline", "a", "b", "c", "a+b", "a+b+c"]


def test_comparisons_are_effects_and_interactions_whose_singles_ran():
    comps = decide.comparisons({("tiny", "math"): KEYS + ["d+e"]})
    kinds = [(c.kind, c.target) for c in comps]
    assert kinds.count(("effect", "d+e")) == 1 and ("interaction", "d+e") not in kinds  # d, e never ran alone
    inter = next(c for c in comps if c.kind == "interaction" and c.target == "a+b+c")
    assert dict(inter.coefs) == {"a+b+c": 1.0, "a": -1.0, "b": -1.0, "c": -1.0, "baseline": 2.0}
    assert sum(w for _, w in inter.coefs) == 0


def test_sequence_holds_at_every_wave_while_repeated_t_tests_do_not():
    """30 looks, one seed per arm per look, no effect: the confidence sequence ever excludes the
    truth in at most α of the paths; a plain 95% interval at every look does far more often."""
    rng = np.random.default_rng(0)
    alpha, paths, looks, arms = 0.05, 600, 30, 6
    comps = decide.comparisons({("m", "t"): ["baseline", "x1", "x2", "x3", "x4", "x5"]})
    miss_cs = miss_naive = 0
    for _ in range(paths):
        y = rng.normal(0.3, 0.02, (arms, looks + 1))
        ever_cs = ever_naive = False
        for n in range(2, looks + 1):
            scores = {("m", "t"): {k: list(y[i, :n]) for i, k in enumerate(["baseline", "x1", "x2", "x3", "x4", "x5"])}}
            rows, _ = decide.decide(comps[:1], scores, alpha=alpha, delta=1e-9)
            ever_cs |= rows[0]["verdict"] == "significant"
            d = y[1, :n].mean() - y[0, :n].mean()
            ever_naive |= abs(d) > 1.96 * 0.02 * np.sqrt(2 / n)
        miss_cs += ever_cs
        miss_naive += ever_naive
    assert miss_cs / paths <= alpha
    assert miss_naive / paths > 2 * alpha


def test_verdicts():
    assert decide.classify(0.1, 0.05, 0.02) == "significant"
    assert decide.classify(0.001, 0.01, 0.02) == "equivalent"
    assert decide.classify(0.008, 0.015, 0.02) == "open"
    assert decide.classify(0.0, np.inf, 0.02) == "open"


def scores_for(effects: dict, n: int, sd=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return {("m", "t"): {k: list(0.3 + effects.get(k, 0.0) + rng.normal(0, sd, n)) for k in KEYS}}


def test_a_big_effect_is_decided_and_kept_and_small_ones_stay_open_at_few_seeds():
    comps = decide.comparisons({("m", "t"): KEYS})
    rows, m = decide.decide(comps, scores_for({"a": 0.3}, 4), alpha=0.05, delta=0.005)
    by = {r["name"]: r for r in rows}
    assert by["m/t/effect:a"]["verdict"] == "significant" and by["m/t/effect:b"]["verdict"] == "open"
    assert m["significant"] + m["equivalent"] + m["open"] == len(comps)
    later, _ = decide.decide(comps, scores_for({}, 4, seed=1), alpha=0.05, delta=0.005, previous=by)
    assert {r["name"]: r for r in later}["m/t/effect:a"]["verdict"] == "significant"  # kept


def test_allocation_goes_to_open_comparisons_and_prefers_cheap_arms():
    comps = decide.comparisons({("m", "t"): KEYS})
    rows, _ = decide.decide(comps, scores_for({"a": 0.3, "c": 0.3}, 3), alpha=0.05, delta=0.005)
    n = {("m", "t", k): 3 for k in KEYS}
    cost = {arm: 1.0 for arm in n}
    added, m = decide.allocate(comps, rows, n, cost, slots=8, alpha=0.05, delta=0.005)
    assert sum(added.values()) == 8 == m["runs"] and m["hours"] == 8.0
    assert ("m", "t", "baseline") in added  # it serves every open comparison
    cheap_b = decide.allocate(comps, rows, n, {**cost, ("m", "t", "b"): 0.01}, slots=4, alpha=0.05, delta=0.005)[0]
    assert cheap_b.get(("m", "t", "b"), 0) >= 3
    done = [{**r, "verdict": "significant"} for r in rows]
    assert decide.allocate(comps, done, n, cost, slots=4, alpha=0.05, delta=0.005)[0] == {}


def test_radius_shrinks_with_seeds_and_seeds_to_close_inverts_it():
    r = decide.mixing_width(0.001)
    t = decide.seeds_to_close(0.01, 0.02, 0.001, r)
    assert float(decide.radius(t, 0.02, 0.001, r)) == pytest.approx(0.01, rel=1e-3)
    assert decide.radius(2 * t, 0.02, 0.001, r) < decide.radius(t, 0.02, 0.001, r)


def test_one_seed_per_arm_still_gets_a_second_wave():
    comps = decide.comparisons({("m", "t"): KEYS})
    rows, m = decide.decide(comps, scores_for({}, 1), alpha=0.05, delta=0.005)
    assert m["open"] == len(comps)  # no noise estimate: nothing can be decided
    added, _ = decide.allocate(comps, rows, {("m", "t", k): 1 for k in KEYS}, {}, slots=6, alpha=0.05, delta=0.005)
    assert sum(added.values()) == 6
