import math

import pytest
import torch

from grpo_lab.trainer.advantages import (
    batch_std,
    compute_advantages,
    mean_only,
    normalize_then_sum,
    quantile,
    reinforce_pp_baseline,
    rloo,
    zscore,
)


def test_zscore_hand_computed():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    # mean 0.5, unbiased std sqrt(1/3)
    a = zscore(r)
    s = math.sqrt(1 / 3)
    assert torch.allclose(a, torch.tensor([[0.5 / s, -0.5 / s, -0.5 / s, 0.5 / s]]), atol=1e-5)


def test_zero_variance_group_gives_zero_not_nan():
    r = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    for fn in (zscore, quantile, batch_std, mean_only, rloo, reinforce_pp_baseline):
        a = fn(r)
        assert torch.isfinite(a).all(), fn.__name__
        assert torch.equal(a[0], torch.zeros(3)) and torch.equal(a[1], torch.zeros(3)), fn.__name__


def test_quantile_is_robust_to_an_outlier_where_zscore_is_not():
    base = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    outlier = torch.tensor([[0.0, 1.0, 2.0, 300.0]])
    # Ranks are unchanged, so quantile advantages are identical...
    assert torch.allclose(quantile(base), quantile(outlier))
    # ...while the z-score squashes the three ordinary samples together.
    z = zscore(outlier)[0]
    assert (z[1] - z[0]).abs() < 0.02 and (quantile(outlier)[0][1] - quantile(outlier)[0][0]) > 0.3


def test_quantile_values_are_normal_quantiles_of_ranks():
    a = quantile(torch.tensor([[5.0, 1.0]]))
    q = math.sqrt(2) * torch.erfinv(torch.tensor(0.5))  # Phi^-1(0.75)
    assert torch.allclose(a, torch.tensor([[q, -q]]), atol=1e-5)


def test_batch_std_uses_the_batch_std_and_mean_only_does_not_divide():
    r = torch.tensor([[0.0, 2.0], [0.0, 0.0]])
    std = r.std()
    assert torch.allclose(batch_std(r), torch.tensor([[-1.0, 1.0], [0.0, 0.0]]) / (std + 1e-6), atol=1e-5)
    assert torch.equal(mean_only(r), torch.tensor([[-1.0, 1.0], [0.0, 0.0]]))


def test_advantage_clip_bounds_and_shape_added_after_norm():
    main = torch.tensor([[0.0, 0.0, 0.0, 10.0]])
    shape = torch.tensor([[0.5, 0.0, 0.0, 0.0]])
    adv, m = compute_advantages(main, shape, "mean_only", clip=3.0)
    assert adv.max() == 3.0 and adv.min() >= -3.0
    assert math.isclose(adv[0, 0].item(), -2.5 + 0.5)  # shape enters after normalisation
    assert m["adv/clip_frac"] == 0.25


def test_zero_group_floor_gives_a_small_negative_advantage():
    main = torch.tensor([[0.0, 0.0], [1.0, 0.0]])
    adv, m = compute_advantages(main, torch.zeros(2, 2), zero_group_floor=0.1)
    assert torch.equal(adv[0], torch.tensor([-0.1, -0.1]))
    assert adv[1, 0] > 0 and m["adv/zero_std_frac"] == 0.5


def test_rloo_baseline_leaves_the_sample_out():
    r = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 3.0, 1.0]])
    loo = torch.stack([r[:, i] - torch.cat([r[:, :i], r[:, i + 1:]], 1).mean(1) for i in range(4)], 1)
    assert torch.allclose(rloo(r), loo)
    assert torch.allclose(rloo(r)[0], torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]))
    assert torch.equal(rloo(torch.tensor([[1.0], [0.0]])), torch.zeros(2, 1))  # G = 1: no baseline


def test_reinforce_pp_baseline_divides_the_centred_rewards_by_their_batch_std():
    r = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    # centred [[.5, -.5], [0, 0]]: mean 0, unbiased variance (.25 + .25) / 3
    std = math.sqrt(0.5 / 3)
    assert torch.allclose(reinforce_pp_baseline(r), torch.tensor([[0.5, -0.5], [0.0, 0.0]]) / (std + 1e-6))
    # Lite PPO divides by the raw rewards' std (0.5) instead
    assert torch.allclose(batch_std(r), torch.tensor([[1.0, -1.0], [0.0, 0.0]]), atol=1e-5)


def test_normalize_then_sum_gives_each_reward_component_the_same_say():
    # one group of 3; component a: 1, 0, 0 (mean 1/3, std sqrt(1/3)); b: 10, 30, 20 (mean 20, std 10)
    r = torch.tensor([[[1.0, 10.0], [0.0, 30.0], [0.0, 20.0]]])
    got = normalize_then_sum(r, torch.tensor([1.0, 0.5]))
    za = [(2 / 3) / math.sqrt(1 / 3), -(1 / 3) / math.sqrt(1 / 3), -(1 / 3) / math.sqrt(1 / 3)]
    zb = [-1.0, 1.0, 0.0]
    assert got.tolist() == [[pytest.approx(a + 0.5 * b, abs=1e-5) for a, b in zip(za, zb)]]
    assert got[0].argmax() == 0  # the weighted sum (6, 15, 10) would rank the a-winner last
    constant = torch.tensor([[[1.0, 5.0], [0.0, 5.0]]])  # b constant in the group: it adds 0
    assert torch.allclose(normalize_then_sum(constant, torch.tensor([1.0, 3.0])), zscore(constant[..., 0]))
