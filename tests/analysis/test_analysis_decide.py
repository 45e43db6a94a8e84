"""Sequential decisions: betting and t-mixture confidence sequences hold at every look, verdicts, pairing,
the healthy estimand, what closing a comparison needs, where the next seeds go, and the loop's step."""

from dataclasses import replace

import numpy as np
import pytest

from grpo_lab.analysis import betting, decide
from grpo_lab.analysis.contrast import contrasts
from grpo_lab.analysis.decide import Outcome
from grpo_lab.analysis.rule import DecisionRule

KEYS = ["baseline", "a", "b", "c", "a+b", "a+b+c"]


def rule(**over) -> DecisionRule:
    return DecisionRule(**{"alpha": 0.05, **over})


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
    arms = {"a": decide.by_seed({0: 0.5, 1: 0.6, 3: 0.9, 2: 0.7}), "baseline": decide.by_seed({2: 0.1, 0: 0.2, 1: 0.4})}
    coefs = (("a", 1.0), ("baseline", -1.0))
    assert decide.paired_differences(coefs, arms, healthy=False) == pytest.approx([0.3, 0.2, 0.6])
    arms["baseline"][1] = Outcome(0.0, collapsed=True)  # one arm's run at index 1 collapsed
    assert decide.paired_differences(coefs, arms, healthy=True) == pytest.approx([0.3, 0.6])
    assert decide.paired_differences(coefs, arms, healthy=False) == pytest.approx([0.3, 0.6, 0.6])


def scores_for(effects: dict, n: int, sd=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return {("m", "t"): {k: list(np.clip(0.3 + effects.get(k, 0.0) + rng.normal(0, sd, n), 0, 1)) for k in KEYS}}


@pytest.mark.parametrize("sequence", decide.SEQUENCES)
@pytest.mark.parametrize("method", decide.METHODS)
def test_a_big_effect_is_decided_and_kept_and_small_ones_stay_open_at_few_seeds(method, sequence):
    comps = contrasts({("m", "t"): KEYS})
    r = rule(delta=0.005, method=method, sequence=sequence)
    verdicts = decide.decide(r, comps, scores_for({"a": 0.5}, 40))
    by = {v.name: v for v in verdicts}
    m = decide.counts(verdicts)
    assert by["m/t/effect:a"].label == "significant" and by["m/t/effect:b"].label == "open"
    assert by["m/t/effect:a"].lower > 0 and by["m/t/effect:a"].direction == 1
    assert m["significant"] + m["equivalent"] + m["open"] == len(comps)
    assert all(v.estimand == "healthy" and v.seeds == 40 and v.runs == 40 for v in verdicts)
    later = decide.decide(r, comps, scores_for({}, 40, seed=1), previous=by)
    assert {v.name: v for v in later}["m/t/effect:a"] == by["m/t/effect:a"]  # kept as it was decided


@pytest.mark.parametrize("sequence", decide.SEQUENCES)
def test_pairing_cancels_a_shared_seed_part(sequence):
    """Arms that share a large seed-level component: the paired interval is narrower."""
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.15, 120)
    scores = {("m", "t"): {k: list(np.clip(0.5 + shared + rng.normal(0, 0.01, 120), 0, 1)) for k in ["baseline", "a"]}}
    comps = contrasts({("m", "t"): ["baseline", "a"]})
    (p,) = decide.decide(rule(delta=0.05, most_seeds=120, method="paired", sequence=sequence), comps, scores)
    (u,) = decide.decide(rule(delta=0.05, most_seeds=120, method="unpaired", sequence=sequence), comps, scores)
    assert p.upper - p.lower < 0.8 * (u.upper - u.lower)


@pytest.mark.parametrize("sequence, delta, most", [("betting", 0.02, 32), ("t", 0.002, 12)])  # beyond reach at the cap
def test_needs_flags_what_the_cap_cannot_close_and_the_margin_it_could(sequence, delta, most):
    comps = contrasts({("m", "t"): KEYS})
    r = rule(delta=delta, most_seeds=most, sequence=sequence)
    verdicts = decide.decide(r, comps, scores_for({"a": 0.5}, 8))
    n = {("m", "t", k): 8 for k in KEYS}
    plan = {p.name: p for p in decide.needs(r, comps, verdicts, n, {})}
    assert "m/t/effect:a" not in plan or plan["m/t/effect:a"].seeds_needed <= most
    b = plan["m/t/effect:b"]
    assert b.blocked == "seed cap" and b.seeds_needed > most and b.delta_at_cap > delta and b.seeds == 8
    wider = decide.needs(replace(r, delta=b.delta_at_cap * 1.2), comps, verdicts, n, {})
    assert {p.name: p for p in wider}["m/t/effect:b"].blocked == ""
    tight = decide.needs(rule(delta=0.5, most_seeds=most, sequence=sequence), comps, verdicts, n, {}, budget_left=1.0)
    assert {p.name: p for p in tight}["m/t/effect:b"].blocked == "budget"


def test_allocation_goes_to_comparisons_that_can_close_and_prefers_cheap_arms():
    """The allocator's rule on the betting sequence, whose noise-free floor makes "cannot close" exact
    at 3 seeds (the t sequence, on 3 seeds' noise, rightly still hopes)."""
    wide, narrow = rule(delta=0.5, sequence="betting"), rule(delta=0.001, sequence="betting")
    comps = contrasts({("m", "t"): KEYS})
    verdicts = decide.decide(wide, comps, scores_for({"a": 0.3, "c": 0.3}, 3))
    n = {("m", "t", k): 3 for k in KEYS}
    cost = {arm: 1.0 for arm in n}

    def allocate(r, vs, cost, slots):
        plan = decide.needs(r, comps, vs, n, cost)
        return decide.allocate(comps, plan, n, cost, slots, r.most_seeds), plan

    added, _ = allocate(wide, verdicts, cost, 8)
    assert sum(added.values()) == 8
    assert ("m", "t", "baseline") in added  # it serves every open comparison
    cheap_b, _ = allocate(wide, verdicts, {**cost, ("m", "t", "b"): 0.01}, 4)
    assert cheap_b.get(("m", "t", "b"), 0) >= 2
    done = [v.with_(label="significant") for v in verdicts]
    assert allocate(wide, done, cost, 4)[0] == {}
    nulls = decide.decide(narrow, comps, scores_for({}, 3))
    hopeless, plan = allocate(narrow, nulls, cost, 4)
    # no effect, ±0.001 on [0, 1] outcomes: 32 seeds cannot
    assert hopeless == {} and sum(not p.blocked for p in plan) == 0
    big, plan = allocate(narrow, verdicts, cost, 4)
    assert sum(not p.blocked for p in plan) == 2 and set(big) <= {("m", "t", k) for k in ("a", "c", "baseline")}


def test_allocation_stops_at_the_seed_cap():
    comps = contrasts({("m", "t"): ["baseline", "a"]})
    r = rule(delta=0.5, most_seeds=4)
    verdicts = decide.decide(r, comps, {("m", "t"): {"baseline": [0.3], "a": [0.3]}})
    n = {("m", "t", "baseline"): 3, ("m", "t", "a"): 3}
    plan = [replace(p, seeds_needed=10.0, blocked="") for p in decide.needs(r, comps, verdicts, n, {})]  # wants 10
    added = decide.allocate(comps, plan, n, {}, slots=6, most=4)
    assert added == {("m", "t", "baseline"): 1, ("m", "t", "a"): 1}


def test_one_seed_per_arm_still_gets_a_second_wave():
    comps = contrasts({("m", "t"): KEYS})
    r = rule(delta=0.5)
    verdicts = decide.decide(r, comps, scores_for({}, 1))
    assert decide.counts(verdicts)["open"] == len(comps)
    n = {("m", "t", k): 1 for k in KEYS}
    added = decide.allocate(comps, decide.needs(r, comps, verdicts, n, {}), n, {}, slots=6, most=r.most_seeds)
    assert sum(added.values()) == 6


def test_prior_needs_is_the_noise_free_floor_and_noise_only_raises_it():
    comps = contrasts({("m", "t"): KEYS})
    r = rule(delta=0.02)
    quiet = {p.name: p for p in decide.prior_needs(r, comps, sd=0.0)}
    noisy = {p.name: p for p in decide.prior_needs(r, comps, sd=0.02)}
    assert set(quiet) == {c.name for c in comps}
    for name, p in quiet.items():
        assert noisy[name].seeds_needed >= p.seeds_needed and noisy[name].delta_at_cap >= p.delta_at_cap
        assert p.blocked == ("seed cap" if p.seeds_needed > r.most_seeds else "")
    # at sd 0.02 an effect's ±0.02 needs more than 32 seeds; what the cap decides is just above δ
    effect = noisy["m/t/effect:a"]
    assert effect.blocked == "seed cap" and 0.02 < effect.delta_at_cap < 0.03


# -- the healthy estimand -------------------------------------------------------------------------

def skewed(n: int = 40, share: float = 0.1, lift: float = 0.05, seed: int = 0) -> dict:
    """A trick whose runs collapse to 0 at `share` of the seed indices and sit `lift` higher on the
    rest (the mean unchanged when share·μ = (1 − share)·lift), beside a baseline that never collapses."""
    rng = np.random.default_rng(seed)
    base = 0.45 + rng.normal(0, 0.005, n)
    down = set(range(0, n, round(1 / share)))
    trick = {i: Outcome(0.0, True) if i in down else Outcome(float(base[i] + lift)) for i in range(n)}
    return {("m", "t"): {"baseline": {i: Outcome(float(b)) for i, b in enumerate(base)}, "a": trick}}


def test_the_healthy_estimand_reads_the_seeds_that_did_not_collapse():
    """10% of the trick's seeds at 0, the rest +0.05: on the healthy seeds the lift is +0.05 and
    significant; the mean over all seeds is ≈ 0 (0.9·0.05 − 0.1·0.45)."""
    comps = contrasts({("m", "t"): ["baseline", "a"]})
    outcomes = skewed()
    (h,) = decide.decide(rule(), comps, outcomes)
    (m,) = decide.decide(rule(estimand="mean"), comps, outcomes)
    assert h.estimand == "healthy" and h.est == pytest.approx(0.05, abs=1e-9) and h.seeds == 36 and h.runs == 40
    assert h.label == "significant" and h.lower > 0
    assert m.estimand == "mean" and abs(m.est) < 0.005 and m.seeds == 40
    assert h.collapse.counts == (("a", 4, 40), ("baseline", 0, 40))


@pytest.mark.parametrize("method", decide.METHODS)
def test_the_unpaired_healthy_estimand_drops_each_arms_collapsed_runs(method):
    comps = contrasts({("m", "t"): ["baseline", "a"]})
    (h,) = decide.decide(rule(method=method), comps, skewed())
    (m,) = decide.decide(rule(method=method, estimand="mean"), comps, skewed())
    assert h.est == pytest.approx(0.05, abs=0.003) and abs(m.est) < 0.005


# -- the step -------------------------------------------------------------------------------------

def step_of(r, outcomes, slots, keys=("baseline", "a"), previous=None, budget_left=None):
    comps = contrasts({("m", "t"): list(keys)})
    n = {("m", "t", k): len(v) for k, v in outcomes[("m", "t")].items()}
    return decide.step(r, comps, outcomes, previous, n, dict.fromkeys(n, 1.0), slots, budget_left)


def test_step_adds_seeds_where_a_comparison_can_close_and_gives_no_reason():
    outcomes = {("m", "t"): {"baseline": [0.30, 0.32, 0.31], "a": [0.31, 0.30, 0.33]}}
    s = step_of(rule(delta=0.1), outcomes, slots=4)
    (v,) = s.verdicts
    assert v.label == "open" and v.reason == "" and sum(s.added.values()) == 4
    assert [p.name for p in s.needs] == [v.name] and not s.needs[0].blocked


def test_step_says_seed_cap_for_a_hopeless_comparison():
    """Betting at ±0.001 on [0, 1] outcomes: no number of seeds within the cap closes it."""
    outcomes = {("m", "t"): {"baseline": [0.30, 0.32, 0.31], "a": [0.31, 0.30, 0.33]}}
    s = step_of(rule(delta=0.001, sequence="betting"), outcomes, slots=4)
    (v,) = s.verdicts
    assert v.label == "open" and v.reason == "seed cap" and s.added == {}
    assert v.delta_at_cap == pytest.approx(s.needs[0].delta_at_cap) and v.delta_at_cap > 0.001


def test_step_says_budget_when_no_slot_is_left():
    outcomes = {("m", "t"): {"baseline": [0.30, 0.32, 0.31], "a": [0.31, 0.30, 0.33]}}
    s = step_of(rule(delta=0.1), outcomes, slots=0)
    (v,) = s.verdicts
    assert v.label == "open" and v.reason == "budget" and s.added == {}
    s = step_of(rule(delta=0.1), outcomes, slots=4, budget_left=0.5)  # slots, but not the hours it needs
    assert s.verdicts[0].reason == "budget" and s.added == {}


def test_a_decided_label_is_kept_across_waves_while_the_collapse_verdict_counts_on():
    r = rule()
    first = step_of(r, skewed(n=20, share=0.25, lift=0.1), slots=2)
    (v1,) = first.verdicts
    assert v1.label == "significant" and v1.reason == ""
    # later seeds: the trick now collapses at most indices; the pass@1 label stays as decided,
    # the collapse counts follow every run
    later = skewed(n=20, share=0.25, lift=0.1)
    for i in range(20, 40):
        later[("m", "t")]["a"][i] = Outcome(0.0, True)
        later[("m", "t")]["baseline"][i] = Outcome(0.45)
    second = step_of(r, later, slots=2, previous={v1.name: v1})
    (v2,) = second.verdicts
    assert (v2.label, v2.est, v2.lower, v2.upper, v2.seeds) == (v1.label, v1.est, v1.lower, v1.upper, v1.seeds)
    assert v1.collapse.counts == (("a", 5, 20), ("baseline", 0, 20))
    # "seeds (of runs)" stays what the label was decided on; the counts are the current ones
    assert v2.collapse.counts == (("a", 25, 40), ("baseline", 0, 40)) and v2.runs == v1.runs == 20
    assert v2.collapse.label == "more" and second.added == {}


def test_the_cli_offers_exactly_the_registered_sequences_and_estimands():
    from grpo_lab.analysis.rule import ESTIMANDS
    from grpo_lab.cli.sweep import Estimand, Sequence

    assert [s.value for s in Sequence] == list(decide.SEQUENCES)
    assert [e.value for e in Estimand] == list(ESTIMANDS)
