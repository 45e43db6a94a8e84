"""analysis/collapse.py: which runs collapsed (from the run alone), anytime bounds on an arm's
collapse rate, and the trick-vs-baseline collapse-rate verdict."""

import math

import numpy as np
import pytest

from grpo_lab.analysis import collapse
from grpo_lab.analysis.rule import DecisionRule
from grpo_lab.rundir import Summary

EFFECT = (("a", 1.0), ("baseline", -1.0))


# -- is_collapsed / from_summary -------------------------------------------------------------------

@pytest.mark.parametrize("base, final, stopped, alarms, collapsed", [
    (0.30, 0.31, True, {}, True),  # stopped by an alarm: the trainer gave up on it
    (0.30, 0.31, False, {"nan": 1}, True),  # its loss went NaN, whatever its last eval said
    (0.30, 0.10, False, {}, True),  # below half its base, 0.2 down
    (0.30, 0.16, False, {}, False),  # down 0.14, but not below half
    (0.03, 0.012, False, {}, False),  # below half of a small base, by less than 0.02: eval noise
    (0.05, 0.02, False, {}, True),  # below half and 0.03 down
    (0.30, 0.29, False, {"entropy_collapse": 3, "kl_spike": 2, "diversity_collapse": 1}, False),  # alarms alone
    (0.30, 0.29, False, {"nan": 0}, False),  # an alarm kind that never fired
    (0.30, math.nan, False, {}, True),  # a NaN final eval
    (None, 0.10, False, {}, False),  # no base eval: nothing to fall from
    (None, None, False, {}, False),
])
def test_the_run_level_rule(base, final, stopped, alarms, collapsed):
    assert collapse.is_collapsed(base, final, stopped, alarms) is collapsed


def test_from_summary_reads_the_runs_own_pass_at_1():
    def summary(**over):
        return Summary(**{"base": {"eval/pass@1": 0.3}, "final": {"eval/pass@1": 0.29}, **over})

    assert not collapse.from_summary(summary())
    assert collapse.from_summary(summary(final={"eval/pass@1": 0.1}))
    assert collapse.from_summary(summary(stopped=True, stop_reason="nan at step 3"))
    assert not collapse.from_summary(summary(alarms={"entropy_collapse": 4}))
    assert not collapse.from_summary(summary(base=None))  # a run from before base evals
    assert collapse.from_summary(summary(final={"eval/pass@1": 0.1, "eval/math/pass@1": 0.3}))


# -- rate_bounds -----------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.05, 0.3])
def test_rate_bounds_cover_the_rate_at_every_look(p):
    """Bernoulli(p) collapse flags over 40 looks: the 95% sequence ever misses p in at most α of
    the paths; a 95% Wald interval looked at every time misses more often."""
    rng = np.random.default_rng(2)
    paths, looks = 300, 40
    flags = rng.random((paths, looks)) < p
    miss_cs = miss_wald = 0
    for path in flags:
        ever_cs = ever_wald = False
        for n in range(1, looks + 1):
            lo, hi = collapse.rate_bounds(int(path[:n].sum()), n)
            ever_cs |= not lo <= p <= hi
            rate = path[:n].mean()
            ever_wald |= abs(rate - p) > 1.96 * np.sqrt(rate * (1 - rate) / n)
        miss_cs += ever_cs
        miss_wald += ever_wald
    assert miss_cs / paths <= collapse.RATE_ALPHA
    assert miss_wald / paths > 2 * collapse.RATE_ALPHA


def test_rate_bounds_of_no_collapse_shrink_with_seeds():
    lo8, hi8 = collapse.rate_bounds(0, 8)
    lo32, hi32 = collapse.rate_bounds(0, 32)
    assert lo8 == lo32 == 0.0 and 0 < hi32 < hi8
    assert hi32 < 0.16  # 0 of 32 seeds: a rate above ~15% is excluded
    lo, hi = collapse.rate_bounds(16, 32)
    assert 0 < lo < 0.5 < hi < 1 and hi - 0.5 == pytest.approx(0.5 - lo)  # symmetric at half
    assert collapse.rate_bounds(32, 32)[1] == 1.0 and collapse.rate_bounds(0, 0) == (0.0, 1.0)


# -- compare ---------------------------------------------------------------------------------------

def flags_of(rate_a: float, rate_b: float, n: int = 32, seed: int = 0) -> dict:
    """Exactly round(rate·n) collapsed seed indices per arm, at random places."""
    rng = np.random.default_rng(seed)
    pick = lambda rate: set(rng.permutation(n)[:round(rate * n)].tolist())  # noqa: E731
    a, b = pick(rate_a), pick(rate_b)
    return {"a": {i: i in a for i in range(n)}, "baseline": {i: i in b for i in range(n)}}


ALPHA_K45 = DecisionRule().collapse_alpha_each(45)  # a collapse label's α in a ten_tricks-sized sweep


@pytest.mark.parametrize("seed", range(3))
def test_a_trick_that_collapses_60_percent_of_32_seeds_collapses_more(seed):
    v = collapse.compare(EFFECT, flags_of(0.6, 0.0, seed=seed), (-1.0, 1.0), ALPHA_K45, 32)
    assert v.label == "more" and v.lower > 0 and v.est == pytest.approx(19 / 32)
    assert v.counts == (("a", 19, 32), ("baseline", 0, 32)) and v.seeds == 32
    mirrored = collapse.compare(EFFECT, flags_of(0.0, 0.6, seed=seed), (-1.0, 1.0), ALPHA_K45, 32)
    assert mirrored.label == "fewer" and mirrored.upper < 0


@pytest.mark.parametrize("seed", range(3))
def test_ten_percent_against_none_stays_open_at_32_seeds(seed):
    v = collapse.compare(EFFECT, flags_of(0.1, 0.0, seed=seed), (-1.0, 1.0), ALPHA_K45, 32)
    assert v.label == "open" and v.lower < 0.1 < v.upper and v.counts[0] == ("a", 3, 32)


def test_compare_pairs_the_seed_indices_every_arm_ran_and_counts_every_run():
    flags = {"a": {0: True, 1: False, 2: True, 5: True}, "baseline": {0: False, 1: False, 2: False}}
    v = collapse.compare(EFFECT, flags, (-1.0, 1.0), 0.05, 32)
    assert v.seeds == 3 and v.est == pytest.approx(2 / 3)  # index 5 has no baseline run to pair with
    assert v.counts == (("a", 3, 4), ("baseline", 0, 3))
    none = collapse.compare(EFFECT, {"a": {0: True}}, (-1.0, 1.0), 0.05, 32)
    assert none.label == "open" and none.seeds == 0 and math.isnan(none.est) and (none.lower, none.upper) == (-1, 1)


def test_equal_collapse_rates_are_rarely_called_different_at_any_look():
    """Both arms collapse 30% of seeds, independently: over 40 looks the verdict ever leaves
    "open" in at most α of the paths."""
    rng = np.random.default_rng(3)
    alpha, paths, looks = 0.1, 200, 40
    wrong = 0
    for _ in range(paths):
        a, b = rng.random(looks) < 0.3, rng.random(looks) < 0.3
        for n in range(2, looks + 1, 2):
            flags = {"a": dict(enumerate(a[:n])), "baseline": dict(enumerate(b[:n]))}
            if collapse.compare(EFFECT, flags, (-1.0, 1.0), alpha, looks).label != "open":
                wrong += 1
                break
    assert wrong / paths <= alpha


def test_a_collapse_verdict_round_trips_through_its_dict():
    v = collapse.compare(EFFECT, flags_of(0.6, 0.0), (-1.0, 1.0), ALPHA_K45, 32)
    assert collapse.CollapseVerdict.from_dict(v.as_dict()) == v
