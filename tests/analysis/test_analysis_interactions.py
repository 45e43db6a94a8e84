import itertools

import numpy as np
import polars as pl
import pytest
from scipy import stats as sst

from grpo_lab.analysis.interactions import effects, interactions


def frame(values: dict[str, list[float]], seeds=None, model="m", task="math", **extra) -> pl.DataFrame:
    rows = []
    for tricks, ys in values.items():
        for i, y in enumerate(ys):
            seed = seeds[tricks][i] if seeds else i
            rows.append({"model": model, "task": task, "tricks": tricks, "seed": seed, "m": y,
                         **{k: v[tricks][i] for k, v in extra.items()}})
    return pl.DataFrame(rows)


HAND = {"baseline": [0.0, 1.0, 2.0], "a": [1.0, 2.0, 3.0], "b": [2.0, 3.0, 4.0], "a+b": [1.0, 3.0, 2.0]}


def test_paired_interaction_on_a_hand_made_frame():
    # per seed: ab - a - b + base = [-2, -1, -3]: mean -2, sd 1, se 1/sqrt(3), 2 df
    r = interactions(frame(HAND), "m", variance="paired").row(0, named=True)
    assert (r["tricks"], r["n_tricks"], r["n_seeds"], r["method"]) == ("a+b", 2, 3, "paired")
    assert r["expected"] == pytest.approx(3.0) and r["observed"] == pytest.approx(1.0)
    assert r["interaction"] == pytest.approx(-2.0)
    half = sst.t.ppf(0.975, 2) / np.sqrt(3)
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((-2 - half, -2 + half))
    assert r["p_value"] == pytest.approx(2 * sst.t.sf(2 * np.sqrt(3), 2))
    assert r["best_single"] == "b" and r["best_single_effect"] == pytest.approx(2.0)


def test_pooled_interaction_uses_the_two_way_residual_of_the_cell():
    r = interactions(frame(HAND), "m").row(0, named=True)
    assert r["interaction"] == pytest.approx(-2.0) and r["method"] == "pooled"
    Y = np.array(list(HAND.values()))
    resid = Y - Y.mean(1, keepdims=True) - Y.mean(0, keepdims=True) + Y.mean()
    sigma = np.sqrt((resid**2).sum() / 6)  # (4 sets - 1) x (3 seeds - 1) df
    assert r["noise_sd"] == pytest.approx(sigma) and r["delta"] == pytest.approx(sigma)
    assert r["ci_high"] - r["interaction"] == pytest.approx(sst.t.ppf(0.975, 6) * sigma * np.sqrt(4 / 3))


def test_welch_when_no_seeds_are_shared():
    seeds = {"baseline": [0, 1, 2], "a": [3, 4, 5], "b": [6, 7, 8], "a+b": [9, 10, 11]}
    r = interactions(frame(HAND, seeds), "m", variance="paired").row(0, named=True)
    assert r["method"] == "welch" and r["interaction"] == pytest.approx(-2.0)
    assert np.isfinite(r["p_value"]) and r["ci_low"] < -2 < r["ci_high"]
    e = effects(frame(HAND, seeds), "m", variance="paired")
    assert set(e["method"]) == {"welch"}
    assert e.filter(pl.col("tricks") == "b")["effect"][0] == pytest.approx(2.0)


def test_effects_are_paired_by_seed_when_seeds_are_shared():
    e = effects(frame(HAND), "m", variance="paired").sort("tricks")
    assert e["tricks"].to_list() == ["a", "a+b", "b"] and set(e["method"]) == {"paired"}
    a = e.row(0, named=True)  # a - base = 1 on every seed: no spread, no interval
    assert a["effect"] == pytest.approx(1.0) and a["n"] == 3 and a["baseline"] == pytest.approx(1.0)
    assert np.isnan(a["p_value"])


def noisy(means: dict[str, float], seeds=5, sd=0.01, seed=0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    return frame({k: list(mu + sd * rng.normal(size=seeds)) for k, mu in means.items()})


def test_verdicts_follow_their_precedence():
    means = {"baseline": 0.0, "a": 1.0, "b": 1.0, "c": -0.5,
             "a+b": 2.0,     # = 1 + 1
             "a+c": -1.0,    # 1.5 below additive and below the baseline: harmful wins
             "b+c": 0.5,     # additive, yet below b alone
             "a+b+c": 4.0}   # 2.5 above additive
    out = interactions(noisy(means), "m", delta=0.1)
    assert dict(zip(out["tricks"], out["verdict"])) == {
        "a+b": "additive", "a+c": "harmful", "b+c": "below_best_single", "a+b+c": "synergy"}
    assert out.filter(pl.col("tricks") == "a+c")["flagged"][0]  # the flag is about the interaction
    means["a+b"] = 0.5  # above the baseline, 1.5 below additive (and below a alone)
    assert interactions(noisy(means), "m", delta=0.1)["verdict"][0] == "negative_interaction"


def test_inconclusive_reports_the_seeds_it_would_take():
    r = interactions(noisy({"baseline": 0.0, "a": 1.0, "b": 1.0, "a+b": 2.0}, seeds=3, sd=1.0), "m").row(0, named=True)
    assert r["verdict"] == "inconclusive" and r["seeds_needed"] > 3


def test_collapsed_only_in_combination_comes_first_when_the_combination_collapses_more():
    means = {"baseline": 0.0, "a": 1.0, "b": 1.0, "a+b": 3.0}
    collapsed = {k: [k == "a+b" for _ in range(5)] for k in means}
    df = noisy(means).with_columns(pl.Series("collapsed", [c for k in means for c in collapsed[k]]))
    r = interactions(df, "m").row(0, named=True)
    assert r["verdict"] == "collapsed_only_in_combination" and r["flagged"] and r["collapse_rate"] == 1.0
    # a single that collapses as often: the combination's collapses are explained by it
    df = df.with_columns(pl.when(pl.col("tricks") == "a").then(True).otherwise(pl.col("collapsed")).alias("collapsed"))
    assert interactions(df, "m")["verdict"][0] == "synergy"


def test_one_collapsed_seed_is_not_a_collapse_rate_nor_a_tight_harmful_effect():
    """Calm arms with little noise and one collapsed seed in a combination: the collapse is part of
    that arm's outcome, so the pooled noise carries it (no tight CI, no 'harmful'), and 1 of 5
    collapses is no evidence the combination collapses more than its singles."""
    rng = np.random.default_rng(0)
    rows = []
    for key in ["baseline", "a", "b", "a+b"]:
        for seed in range(5):
            down = key == "a+b" and seed == 0
            rows.append({"model": "m", "task": "t", "tricks": key, "seed": seed, "collapsed": down,
                         "pass@1": 0.0 if down else 0.3 + rng.normal(0, 0.005)})
    df = pl.DataFrame(rows)
    r = interactions(df, "pass@1", delta=0.02).row(0, named=True)
    assert not r["collapsed_only_in_combination"] and r["verdict"] not in ("harmful", "collapsed_only_in_combination")
    e = effects(df, "pass@1").filter(pl.col("tricks") == "a+b").row(0, named=True)
    assert e["ci_high"] > 0  # the collapsed seed widens its own CI


def test_logit_handles_pass_rates_of_zero_and_one():
    df = noisy({"baseline": 0.5, "a": 0.9, "b": 0.9, "a+b": 1.0}, sd=0.0).with_columns(
        pl.when(pl.col("tricks") == "a+b").then(pl.col("seed") % 2).otherwise(pl.col("m")).alias("m"))
    r = interactions(df, "m", logit=True).row(0, named=True)
    assert np.isfinite(r["interaction"]) and np.isfinite(r["ci_low"])


def test_same_dimension_combinations_carry_a_warning():
    means = {"baseline": 0.0, "group_size_16": 1.0, "dynamic_temperature": 1.0, "kl_anneal": 1.0,
             "group_size_16+dynamic_temperature": 2.0, "group_size_16+kl_anneal": 2.0}
    out = dict(zip(*interactions(noisy(means), "m").select("tricks", "warnings").to_dict().values()))
    assert "sampling" in out["group_size_16+dynamic_temperature"] and out["group_size_16+kl_anneal"] == ""


def test_trick_order_and_baseline_spelling_do_not_matter():
    df = frame({"": HAND["baseline"], "a": HAND["a"], "b": HAND["b"], "b+a": HAND["a+b"]})
    r = interactions(df, "m").row(0, named=True)
    assert r["tricks"] == "b+a" and r["interaction"] == pytest.approx(-2.0)


def test_a_missing_metric_is_named_with_a_suggestion():
    with pytest.raises(ValueError, match=r"pass@1.*did you mean 'pass@k'"):
        interactions(frame(HAND).rename({"m": "pass@k"}), "pass@1")


# --- acceptance: false positives and power on synthetic matrices ---------------------------------

TRICKS = ["t0", "t1", "t2", "t3"]
SETS = [()] + [(t,) for t in TRICKS] + list(itertools.combinations(TRICKS, 2))


def synthetic_matrix(rng, seeds=5, size=3.0, planted_share=0.3):
    """Baseline, 4 singles and their 6 pairs over `seeds` seeds. Effects are additive except in
    planted pairs, which lose `size` x the seed-to-seed noise std (1: i.i.d. noise per run)."""
    effect = dict(zip(TRICKS, rng.uniform(-1, 2, len(TRICKS))))
    planted = {"+".join(s) for s in SETS if len(s) == 2 and rng.random() < planted_share}
    rows = []
    for s in SETS:
        mu = sum(effect[t] for t in s) - size * ("+".join(s) in planted)
        rows += [{"model": "m", "task": "math", "tricks": "+".join(s), "seed": i, "m": float(y)}
                 for i, y in enumerate(mu + rng.normal(size=seeds))]
    return pl.DataFrame(rows), planted


def test_false_positive_rate_and_power_on_synthetic_matrices():
    rng = np.random.default_rng(2024)
    hits = {"additive": [0, 0], "planted": [0, 0]}  # [flagged, total]
    for _ in range(200):
        df, planted = synthetic_matrix(rng)
        out = interactions(df, "m")
        is_planted = out["tricks"].is_in(list(planted))
        for name, rows in (("planted", out.filter(is_planted)), ("additive", out.filter(~is_planted))):
            hits[name][0] += int(rows["flagged"].sum())
            hits[name][1] += rows.height
    fpr, power = hits["additive"][0] / hits["additive"][1], hits["planted"][0] / hits["planted"][1]
    print(f"\nsynthetic matrices (200, 5 seeds, planted -3 sigma): false-positive rate {fpr:.3f} "
          f"over {hits['additive'][1]} additive pairs, power {power:.3f} over {hits['planted'][1]} planted pairs")
    assert fpr <= 0.10
    assert power >= 0.80


def test_copies_of_one_run_do_not_make_the_noise_zero():
    """A trick that changes nothing reruns the baseline exactly; those copies alone must not set the
    seed noise to 0 (which would make every effect 'significant')."""
    import polars as pl

    from grpo_lab.analysis.interactions import effects

    rows = []
    for seed, (base, gain) in enumerate([(0.20, 0.05), (0.30, 0.01), (0.25, 0.03)]):
        rows += [{"model": "m", "task": "t", "tricks": "baseline", "seed": seed, "pass@1": base, "collapsed": False},
                 {"model": "m", "task": "t", "tricks": "noop", "seed": seed, "pass@1": base, "collapsed": False},
                 {"model": "m", "task": "t", "tricks": "real", "seed": seed, "pass@1": base + gain, "collapsed": True}]
    out = effects(pl.DataFrame(rows), "pass@1")
    real = out.filter(pl.col("tricks") == "real").row(0, named=True)
    assert real["ci_low"] == real["ci_low"] and real["ci_high"] > real["ci_low"]  # finite, not NaN
