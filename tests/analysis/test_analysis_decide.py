"""Sequential decisions: betting and t-mixture confidence sequences hold at every look, verdicts, pairing,
what closing a comparison needs, and where the next seeds go."""

import numpy as np
import pytest

from grpo_lab.analysis import betting, decide

KEYS = ["baseline", "a", "b", "c", "a+b", "a+b+c"]


def test_comparisons_are_effects_and_interactions_whose_singles_ran():
    comps = decide.comparisons({("tiny", "math"): KEYS + ["d+e"]})
    kinds = [(c.kind, c.target) for c in comps]
    assert kinds.count(("effect", "d+e")) == 1 and ("interaction", "d+e") not in kinds  # d, e never ran alone
    inter = next(c for c in comps if c.kind == "interaction" and c.target == "a+b+c")
    assert dict(inter.coefs) == {"a+b+c": 1.0, "a": -1.0, "b": -1.0, "c": -1.0, "baseline": 2.0}
    assert sum(w for _, w in inter.coefs) == 0 and inter.span == (-3.0, 3.0)


@pytest.mark.parametrize("p", [0.03, 0.5])
def test_betting_sequence_holds_at_every_look_where_repeated_t_intervals_do_not(p):
    """Bernoulli(p) observations (skewed at p = 0.03), 40 looks: the sequence ever excludes the
    truth in at most α of the paths; a 95% t interval at every look does more often."""
    rng = np.random.default_rng(1)
    alpha, paths, looks = 0.1, 300, 40
    x = (rng.random((paths, looks)) < p).astype(float)
    miss_cs = miss_t = 0
    for path in x:
        ever_cs = ever_t = False
        for n in range(2, looks + 1):
            lo, hi = betting.bounds(path[:n], 0.0, 1.0, alpha, looks)
            ever_cs |= not lo <= p <= hi
            sd = path[:n].std(ddof=1)
            ever_t |= abs(path[:n].mean() - p) > 2.0 * sd / np.sqrt(n) or sd == 0
        miss_cs += ever_cs
        miss_t += ever_t
    assert miss_cs / paths <= alpha
    assert miss_t / paths > 2 * alpha


def test_bounds_shrink_around_the_mean_and_respect_the_noise_free_floor():
    x = np.full(200, 0.3)
    lo, hi = betting.bounds(x, 0.0, 1.0, 0.01, 200)
    assert lo < 0.3 < hi and hi - lo < 0.1
    assert betting.bounds(x[:10], 0.0, 1.0, 0.01, 200)[1] > hi  # fewer seeds: wider
    floor = betting.min_samples(0.05, -1.0, 1.0, 0.0, 0.01)
    assert betting.radius(int(floor) - 1, 0.0, 0.0, -1.0, 1.0, 0.01, 100) > 0.05


def test_verdicts():
    assert decide.classify(0.01, 0.2, 0.02) == "significant"
    assert decide.classify(-0.2, -0.01, 0.02) == "significant"
    assert decide.classify(-0.01, 0.015, 0.02) == "equivalent"
    assert decide.classify(-0.01, 0.03, 0.02) == "open"
    assert decide.classify(-np.inf, np.inf, 0.02) == "open"


def test_paired_differences_use_the_seed_indices_every_arm_ran_in_seed_order():
    arms = {"a": {0: 0.5, 1: 0.6, 3: 0.9, 2: 0.7}, "baseline": {2: 0.1, 0: 0.2, 1: 0.4}}
    d = decide.paired_differences((("a", 1.0), ("baseline", -1.0)), arms)
    assert d == pytest.approx([0.3, 0.2, 0.6])


def scores_for(effects: dict, n: int, sd=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return {("m", "t"): {k: list(np.clip(0.3 + effects.get(k, 0.0) + rng.normal(0, sd, n), 0, 1)) for k in KEYS}}


@pytest.mark.parametrize("sequence", decide.SEQUENCES)
@pytest.mark.parametrize("method", decide.METHODS)
def test_a_big_effect_is_decided_and_kept_and_small_ones_stay_open_at_few_seeds(method, sequence):
    comps = decide.comparisons({("m", "t"): KEYS})
    rows, m = decide.decide(comps, scores_for({"a": 0.5}, 40), alpha=0.05, delta=0.005, method=method,
                            sequence=sequence)
    by = {r["name"]: r for r in rows}
    assert by["m/t/effect:a"]["verdict"] == "significant" and by["m/t/effect:b"]["verdict"] == "open"
    assert by["m/t/effect:a"]["lower"] > 0 and m["significant"] + m["equivalent"] + m["open"] == len(comps)
    later, _ = decide.decide(comps, scores_for({}, 40, seed=1), alpha=0.05, delta=0.005, previous=by, method=method,
                             sequence=sequence)
    assert {r["name"]: r for r in later}["m/t/effect:a"]["verdict"] == "significant"  # kept


@pytest.mark.parametrize("sequence", decide.SEQUENCES)
def test_pairing_cancels_a_shared_seed_part(sequence):
    """Arms that share a large seed-level component: the paired interval is narrower."""
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.15, 120)
    scores = {("m", "t"): {k: list(np.clip(0.5 + shared + rng.normal(0, 0.01, 120), 0, 1)) for k in ["baseline", "a"]}}
    comps = decide.comparisons({("m", "t"): ["baseline", "a"]})
    (p,), _ = decide.decide(comps, scores, alpha=0.05, delta=0.05, method="paired", target=120, sequence=sequence)
    (u,), _ = decide.decide(comps, scores, alpha=0.05, delta=0.05, method="unpaired", target=120, sequence=sequence)
    assert p["upper"] - p["lower"] < 0.8 * (u["upper"] - u["lower"])


@pytest.mark.parametrize("sequence, delta, most", [("betting", 0.02, 32), ("t", 0.002, 12)])  # beyond reach at the cap
def test_needs_flags_what_the_cap_cannot_close_and_the_margin_it_could(sequence, delta, most):
    comps = decide.comparisons({("m", "t"): KEYS})
    rows, _ = decide.decide(comps, scores_for({"a": 0.5}, 8), alpha=0.05, delta=delta, sequence=sequence)
    n = {("m", "t", k): 8 for k in KEYS}
    plan = {p["name"]: p for p in decide.needs(comps, rows, n, {}, alpha=0.05, delta=delta, most=most,
                                               sequence=sequence)}
    assert "m/t/effect:a" not in plan or plan["m/t/effect:a"]["seeds_needed"] <= most
    b = plan["m/t/effect:b"]
    assert b["blocked"] == "seed cap" and b["seeds_needed"] > most and b["delta_at_cap"] > delta
    wider = decide.needs(comps, rows, n, {}, alpha=0.05, delta=b["delta_at_cap"] * 1.2, most=most, sequence=sequence)
    assert {p["name"]: p for p in wider}["m/t/effect:b"]["blocked"] == ""
    tight = decide.needs(comps, rows, n, {}, alpha=0.05, delta=0.5, most=most, budget_left=1.0, sequence=sequence)
    assert {p["name"]: p for p in tight}["m/t/effect:b"]["blocked"] == "budget"


def test_allocation_goes_to_comparisons_that_can_close_and_prefers_cheap_arms():
    """The allocator's rule on the betting sequence, whose noise-free floor makes "cannot close" exact
    at 3 seeds (the t sequence, on 3 seeds' noise, rightly still hopes)."""
    seq = dict(sequence="betting")
    comps = decide.comparisons({("m", "t"): KEYS})
    rows, _ = decide.decide(comps, scores_for({"a": 0.3, "c": 0.3}, 3), alpha=0.05, delta=0.5, **seq)
    n = {("m", "t", k): 3 for k in KEYS}
    cost = {arm: 1.0 for arm in n}
    added, m = decide.allocate(comps, rows, n, cost, slots=8, alpha=0.05, delta=0.5, **seq)
    assert sum(added.values()) == 8 == m["runs"] and m["hours"] == 8.0
    assert ("m", "t", "baseline") in added  # it serves every open comparison
    cheap_b = decide.allocate(comps, rows, n, {**cost, ("m", "t", "b"): 0.01}, slots=4, alpha=0.05, delta=0.5, **seq)[0]
    assert cheap_b.get(("m", "t", "b"), 0) >= 2
    done = [{**r, "verdict": "significant"} for r in rows]
    assert decide.allocate(comps, done, n, cost, slots=4, alpha=0.05, delta=0.5, **seq)[0] == {}
    nulls, _ = decide.decide(comps, scores_for({}, 3), alpha=0.05, delta=0.001, **seq)
    hopeless, m = decide.allocate(comps, nulls, n, cost, slots=4, alpha=0.05, delta=0.001, most=32, **seq)
    assert hopeless == {} and m["closable"] == 0  # no effect, ±0.001 on [0, 1] outcomes: 32 seeds cannot
    big, m = decide.allocate(comps, rows, n, cost, slots=4, alpha=0.05, delta=0.001, most=32, **seq)
    assert m["closable"] == 2 and set(big) <= {("m", "t", k) for k in ("a", "c", "baseline")}  # the two big effects


def test_one_seed_per_arm_still_gets_a_second_wave():
    comps = decide.comparisons({("m", "t"): KEYS})
    rows, m = decide.decide(comps, scores_for({}, 1), alpha=0.05, delta=0.5)
    assert m["open"] == len(comps)
    added, _ = decide.allocate(comps, rows, {("m", "t", k): 1 for k in KEYS}, {}, slots=6, alpha=0.05, delta=0.5)
    assert sum(added.values()) == 6


def test_the_cli_offers_exactly_the_registered_sequences():
    from grpo_lab.cli.sweep import Sequence

    assert [s.value for s in Sequence] == list(decide.SEQUENCES)
