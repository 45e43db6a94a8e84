"""The sweep's contrasts: which effects and interactions a cell gets, their weights, and their order."""

from grpo_lab.analysis.contrast import contrasts, effect_coefs, interaction_coefs

KEYS = ["baseline", "a", "b", "c", "a+b", "a+b+c"]


def test_contrasts_are_effects_and_interactions_whose_singles_ran():
    comps = contrasts({("tiny", "math"): KEYS + ["d+e"]})
    kinds = [(c.kind, c.target) for c in comps]
    assert kinds.count(("effect", "d+e")) == 1 and ("interaction", "d+e") not in kinds  # d, e never ran alone
    inter = next(c for c in comps if c.kind == "interaction" and c.target == "a+b+c")
    assert dict(inter.coefs) == {"a+b+c": 1.0, "a": -1.0, "b": -1.0, "c": -1.0, "baseline": 2.0}
    assert sum(w for _, w in inter.coefs) == 0 and inter.span == (-3.0, 3.0)
    assert inter.name == "tiny/math/interaction:a+b+c"
    assert inter.arms()[0] == ("tiny", "math", "a+b+c")


def test_contrasts_order_per_cell_effects_then_interactions_and_skip_a_cell_without_baseline():
    comps = contrasts({("m", "u"): ["a", "b", "a+b"], ("m", "t"): ["b", "a+b", "baseline", "a"]})
    assert [c.name for c in comps] == ["m/t/effect:a", "m/t/effect:a+b", "m/t/effect:b", "m/t/interaction:a+b"]


def test_the_weights_sum_to_zero_with_the_contrasts_arm_first():
    assert effect_coefs("a", "ref") == (("a", 1.0), ("ref", -1.0))
    coefs = interaction_coefs("a+b")
    assert coefs[0] == ("a+b", 1.0) and sum(w for _, w in coefs) == 0 and dict(coefs)["baseline"] == 1.0
