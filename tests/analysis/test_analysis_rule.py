"""analysis/rule.py's DecisionRule (validated, frozen, α split between the two label families) and
analysis/verdict.py's Verdict (its reading, and a lossless round trip through JSON)."""

import dataclasses
import json
import math

import pytest

from grpo_lab.analysis import rule as rl
from grpo_lab.analysis.collapse import CollapseVerdict
from grpo_lab.analysis.rule import DecisionRule
from grpo_lab.analysis.verdict import LABELS, REASONS, Verdict


def test_the_default_rule_is_the_healthy_estimand_on_paired_t_sequences():
    r = DecisionRule()
    assert (r.alpha, r.delta, r.most_seeds, r.method, r.sequence, r.estimand) == (0.05, 0.02, 32, "paired", "t", "healthy")
    assert r.estimand_text == rl.ESTIMAND_TEXT["healthy"] and "collapsed" in r.estimand_text
    assert "assuming" in DecisionRule(estimand="mean").estimand_text  # the opt-in names its assumption
    assert set(rl.ESTIMAND_TEXT) == set(rl.ESTIMANDS)
    assert r.as_dict() == {"alpha": 0.05, "delta": 0.02, "most_seeds": 32, "method": "paired", "sequence": "t",
                           "estimand": "healthy"}
    assert DecisionRule(**r.as_dict()) == r


def test_a_rule_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DecisionRule().delta = 0.5


def test_alpha_is_split_between_pass_at_1_and_collapse_labels_bonferroni_over_each_family():
    r = DecisionRule(alpha=0.05)
    assert r.alpha_each(45) == pytest.approx(0.05 * (1 - rl.COLLAPSE_SHARE) / 45)
    assert r.collapse_alpha_each(45) == pytest.approx(0.05 * rl.COLLAPSE_SHARE / 45)
    # every label of both families together spends α
    assert 45 * (r.alpha_each(45) + r.collapse_alpha_each(45)) == pytest.approx(0.05)
    assert r.alpha_each(0) == r.alpha_each(1)  # an empty family is not a division by zero


@pytest.mark.parametrize("field, value", [
    ("alpha", 0), ("alpha", 1), ("alpha", -0.1), ("alpha", "0.05"), ("alpha", None),
    ("delta", 0), ("delta", 1.5), ("delta", float("nan")),
    ("most_seeds", 1), ("most_seeds", 2.5), ("most_seeds", True),
    ("method", "pairs"), ("sequence", "bet"), ("estimand", "median"),
])
def test_a_bad_value_is_refused_naming_its_field(field, value):
    with pytest.raises(ValueError, match=rf"^{field}: "):
        DecisionRule(**{field: value})


def test_a_bad_choice_lists_the_allowed_ones():
    with pytest.raises(ValueError, match="healthy, mean"):
        DecisionRule(estimand="median")


# -- Verdict ---------------------------------------------------------------------------------------

COLLAPSE = CollapseVerdict((("a", 3, 20), ("baseline", 0, 20)), 0.15, -0.05, 0.4, 20, "open")


def verdict(**over) -> Verdict:
    base = dict(name="m/t/effect:a", kind="effect", model="m", task="t", target="a", estimand="healthy",
                label="significant", est=0.05, lower=0.01, upper=0.09, sigma=0.02, seeds=17, runs=20,
                collapse=COLLAPSE, reason="", wave=2, hours=1.25)
    return Verdict(**{**base, **over})


def same(a: Verdict, b: Verdict) -> bool:
    """Field by field, NaN equal to NaN."""
    def eq(x, y):
        return (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)) or x == y
    return all(eq(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(Verdict)
               if f.name != "collapse") and all(eq(getattr(a.collapse, f.name), getattr(b.collapse, f.name))
                                                for f in dataclasses.fields(CollapseVerdict))


def round_trip(v: Verdict) -> Verdict:
    text = json.dumps(v.as_dict(), allow_nan=False)  # strict JSON: what the registry and a browser read
    return Verdict.from_dict(json.loads(text))


def test_a_decided_verdict_round_trips():
    v = verdict()
    assert round_trip(v) == v
    blocked = verdict(label="open", reason="seed cap", delta_at_cap=0.034)
    assert round_trip(blocked) == blocked


def test_an_open_verdict_before_any_seed_round_trips_with_its_infinities_and_nans():
    v = verdict(label="open", est=math.nan, lower=-math.inf, upper=math.inf, sigma=math.nan, seeds=0, runs=1,
                collapse=CollapseVerdict((("a", 0, 1), ("baseline", 0, 0)), math.nan, -math.inf, math.inf, 0, "open"),
                reason="budget", wave=None, hours=None)
    back = round_trip(v)
    assert same(back, v), back
    assert back.lower == -math.inf and back.upper == math.inf and math.isnan(back.est) and math.isnan(back.sigma)
    assert back.collapse.lower == -math.inf and back.collapse.upper == math.inf


@pytest.mark.parametrize("reason", REASONS)
def test_every_reason_and_label_round_trips(reason):
    for label in LABELS:
        v = verdict(label=label, reason=reason if label == "open" else "")
        assert round_trip(v) == v


def test_a_verdict_reads_its_direction_radius_and_whether_it_is_decided():
    assert verdict().direction == 1 and verdict().decided
    down = verdict(est=-0.05, lower=-0.09, upper=-0.01)
    assert down.direction == -1 and down.radius == pytest.approx(0.04)
    assert verdict(label="equivalent", est=0.0, lower=-0.01, upper=0.015).direction == 0
    opened = verdict(label="open", est=math.nan, lower=-math.inf, upper=math.inf)
    assert not opened.decided and opened.direction == 0 and opened.radius == math.inf
    assert verdict(est=0.05, lower=0.0, upper=0.12).radius == pytest.approx(0.07)  # the wider side
    assert verdict().with_(label="open", reason="seed cap").reason == "seed cap" and verdict().reason == ""
