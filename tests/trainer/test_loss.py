import math

import pytest
import torch

from grpo_lab.spec.config import LossConfig
from grpo_lab.trainer.loss import (
    aggregate,
    cispo_surrogate,
    clipped_surrogate,
    gmpo_surrogate,
    kl_estimate,
    policy_loss,
    sapo_surrogate,
    top_entropy_mask,
)


def test_k3_is_zero_when_policy_equals_reference_and_matches_formula():
    lp = torch.tensor([[-1.0, -2.0]])
    assert torch.equal(kl_estimate(lp, lp, "k3"), torch.zeros(1, 2))
    ref = torch.tensor([[-1.5, -1.0]])
    d = ref - lp
    assert torch.allclose(kl_estimate(lp, ref, "k3"), torch.exp(d) - d - 1)
    assert torch.allclose(kl_estimate(lp, ref, "k1"), -d)
    assert torch.allclose(kl_estimate(lp, ref, "k2"), d * d / 2)
    assert (kl_estimate(lp, ref, "k3") >= 0).all()


def test_clipped_surrogate_hand_computed():
    old = torch.zeros(1, 3)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1]]))  # ratios 1.5, 0.5, 1.1
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    loss, clipped = clipped_surrogate(logp, old, adv, 0.2, 0.2)
    # A>0, rho=1.5 -> clipped to 1.2; A>0, rho=0.5 -> min(0.5, 0.8) = 0.5; A<0, rho 1.1 -> -1.1
    assert torch.allclose(loss, torch.tensor([[-1.2, -0.5, 1.1]]), atol=1e-6)
    assert clipped.tolist() == [[True, False, False]]


def test_clip_higher_and_dual_clip():
    old = torch.zeros(1, 2)
    logp = torch.log(torch.tensor([[1.25, 5.0]]))
    loss, _ = clipped_surrogate(logp, old, torch.tensor([[1.0, -1.0]]), 0.2, 0.28)
    assert math.isclose(loss[0, 0].item(), -1.25, rel_tol=1e-6)  # inside 1 + 0.28
    assert math.isclose(loss[0, 1].item(), 5.0, rel_tol=1e-6)  # unbounded for A<0 without dual clip
    loss, _ = clipped_surrogate(logp, old, torch.tensor([[1.0, -1.0]]), 0.2, 0.28, dual_clip=3.0)
    assert math.isclose(loss[0, 1].item(), 3.0, rel_tol=1e-6)


def test_aggregation_modes_on_unequal_lengths():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert math.isclose(aggregate(x, m, "token_mean").item(), 10 / 4)
    assert math.isclose(aggregate(x, m, "seq_mean").item(), (2.0 + 4.0) / 2)
    assert math.isclose(aggregate(x, m, "token_sum_norm", norm=8).item(), 10 / (2 * 8))
    with pytest.raises(ValueError):
        aggregate(x, m, "mean")


def test_policy_loss_gradient_is_policy_gradient_and_masked_tokens_get_none():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.7]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    adv = torch.tensor([2.0, -1.0])
    loss, metrics = policy_loss(logp, logp.detach(), None, adv, mask, beta=0.0, cfg=LossConfig())
    loss.backward()
    # token_mean over 3 tokens: d/dlogp = -A / 3 on trained tokens, 0 on the masked one
    expected = torch.tensor([[-2 / 3, -2 / 3], [1 / 3, 0.0]])
    assert torch.allclose(logp.grad, expected, atol=1e-6)
    assert metrics["loss/clip_frac"] == 0.0


def test_policy_loss_adds_beta_times_kl():
    logp = torch.tensor([[-1.0]])
    ref = torch.tensor([[-2.0]])
    loss, m = policy_loss(logp, logp, ref, torch.tensor([0.0]), torch.ones(1, 1), beta=0.5, cfg=LossConfig())
    d = -1.0
    assert math.isclose(loss.item(), 0.5 * (math.exp(d) - d - 1), rel_tol=1e-6)
    assert math.isclose(m["kl/mean"], math.exp(d) - d - 1, rel_tol=1e-6)


def test_importance_weights_scale_only_the_policy_term():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -1.0]])
    adv, mask, cfg = torch.tensor([1.0]), torch.ones(1, 2), LossConfig(aggregation="token_mean")
    plain, m = policy_loss(logp, logp.detach(), ref, adv, mask, beta=0.1, cfg=cfg)
    weighted, mw = policy_loss(logp, logp.detach(), ref, adv, mask, beta=0.1, cfg=cfg,
                               is_weights=torch.tensor([[2.0, 0.5]]))
    kl = float(kl_estimate(logp.detach(), ref).mean())
    # surrogate at ratio 1 is -adv per token: -(2 + 0.5)/2 weighted vs -1 plain; the KL term is untouched
    assert float(plain) == pytest.approx(-1.0 + 0.1 * kl)
    assert float(weighted) == pytest.approx(-1.25 + 0.1 * kl)
    assert mw["kl/mean"] == pytest.approx(m["kl/mean"])


def test_cispo_keeps_the_gradient_of_clipped_tokens_at_the_bound():
    old = torch.zeros(1, 3)
    logp = torch.log(torch.tensor([[1.5, 0.5, 6.0]])).requires_grad_()
    loss, clipped = cispo_surrogate(logp, old, torch.tensor([[1.0]]), clip_low=1.0, clip_high=4.0)
    # weights sg(clip(rho, 0, 5)) = 1.5, 0.5, 5; L = -w * A * logp, so dL/dlogp = -w * A
    assert torch.allclose(loss, -torch.tensor([[1.5, 0.5, 5.0]]) * logp.detach())
    loss.sum().backward()
    assert torch.allclose(logp.grad, torch.tensor([[-1.5, -0.5, -5.0]]))
    assert clipped.tolist() == [[False, False, True]]
    ppo_logp = logp.detach().clone().requires_grad_()
    clipped_surrogate(ppo_logp, old, torch.tensor([[1.0]]), 0.2, 4.0)[0].sum().backward()
    assert ppo_logp.grad[0, 0] == pytest.approx(-1.5) and ppo_logp.grad[0, 2] == 0  # PPO drops the token CISPO keeps


def test_gmpo_is_the_geometric_mean_of_sign_aware_clipped_ratios():
    old = torch.zeros(2, 3)
    logp = torch.log(torch.tensor([[2.0, 0.9, 1.0], [0.5, 1.1, 1.0]])).requires_grad_()
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # the third token is padding
    adv = torch.tensor([[1.0], [-1.0]])
    loss, clipped = gmpo_surrogate(logp, old, adv, mask, 0.2, 0.2)
    # A > 0: min(d, clip(d)) = log 1.2, log 0.9; A < 0: max(d, clip(d)) = log 0.8, log 1.1
    assert loss[0, 0].item() == pytest.approx(-math.sqrt(1.2 * 0.9))
    assert loss[1, 0].item() == pytest.approx(math.sqrt(0.8 * 1.1))
    assert clipped[:, :2].tolist() == [[True, False], [True, False]]
    aggregate(loss, mask, "seq_mean").backward()
    # only unclipped tokens carry gradient: d/dlogp of -A * exp(mean d) = -A * ratio / n, halved by seq_mean
    expected = torch.tensor([[0.0, -math.sqrt(1.08) / 4, 0.0], [0.0, math.sqrt(0.88) / 4, 0.0]])
    assert torch.allclose(logp.grad, expected, atol=1e-6)


def test_gmpo_cispo_and_sapo_at_ratio_one_are_the_policy_gradient():
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.7]], requires_grad=True)
    mask, adv = torch.ones(2, 2), torch.tensor([[2.0], [-1.0]])
    for surrogate in (lambda: cispo_surrogate(logp, logp.detach(), adv)[0],
                      lambda: gmpo_surrogate(logp, logp.detach(), adv, mask)[0],
                      lambda: sapo_surrogate(logp, logp.detach(), adv)[0]):
        logp.grad = None
        aggregate(surrogate(), mask, "seq_mean").backward()
        assert torch.allclose(logp.grad, -adv.expand(2, 2) / 4), logp.grad  # -A / (n * B)


def test_sapo_is_a_sigmoid_gate_on_the_ratio_with_a_temperature_per_advantage_sign():
    old = torch.zeros(2, 3)
    ratios = [[1.5, 0.5, 4.0], [1.2, 1.0, 0.7]]
    logp = torch.log(torch.tensor(ratios)).requires_grad_()
    adv = torch.tensor([[1.0], [-2.0]])  # tau_pos = 1 for the first row, tau_neg = 1.05 for the second
    loss, gated = sapo_surrogate(logp, old, adv, tau_pos=1.0, tau_neg=1.05)
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    for i, (a, tau) in enumerate([(1.0, 1.0), (-2.0, 1.05)]):
        for j, r in enumerate(ratios[i]):
            s = sig(tau * (r - 1))
            assert loss[i, j].item() == pytest.approx(-s * 4 / tau * a, rel=1e-6)
    loss.sum().backward()
    # dL/dlogp = -A * 4 s (1 - s) * rho: the policy gradient -A at rho = 1, damped away from it
    expected = [[-a * 4 * sig(tau * (r - 1)) * (1 - sig(tau * (r - 1))) * r for r in row]
                for row, (a, tau) in zip(ratios, [(1.0, 1.0), (-2.0, 1.05)])]
    assert torch.allclose(logp.grad, torch.tensor(expected), rtol=1e-6)
    assert logp.grad[1, 1].item() == pytest.approx(2.0)
    assert gated.tolist() == [[False, False, True], [False, False, False]]  # 4 s (1 - s) = 0.18 at rho 4


def test_top_entropy_mask_keeps_the_top_fraction_of_trained_tokens():
    entropy = torch.tensor([[0.1, 0.5, 0.9], [0.3, 0.7, 2.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])  # 2.0 is padding: not a candidate
    # trained entropies .1 .3 .5 .7 .9: the 0.6 quantile is .5 + 0.4 * .2 = .58, so .7 and .9 stay
    assert top_entropy_mask(entropy, mask, 0.4).tolist() == [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    assert torch.equal(top_entropy_mask(entropy, mask, 1.0), mask)


def test_top_entropy_frac_masks_only_the_policy_term_and_keeps_the_denominator():
    logp = torch.zeros(2, 3, requires_grad=True)
    ref = torch.full((2, 3), -0.5)
    entropy = torch.tensor([[0.1, 0.5, 0.9], [0.3, 0.7, 2.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    loss, _ = policy_loss(logp, logp.detach(), ref, torch.tensor([1.0, -2.0]), mask, beta=0.0,
                          cfg=LossConfig(top_entropy_frac=0.4), entropy=entropy)
    loss.backward()
    # token_mean over all 5 trained tokens; the policy gradient -A / 5 only on the two kept tokens
    assert torch.allclose(logp.grad, torch.tensor([[0.0, 0.0, -0.2], [0.0, 0.4, 0.0]]))


def test_kl_in_the_reward_subtracts_beta_times_each_completions_summed_kl():
    from grpo_lab.trainer.loss import kl_penalised_reward

    reward = torch.tensor([[1.0, 0.0]])  # one group of 2 completions, in two micro-batches of 1
    logps = [torch.tensor([[-1.0, -2.0]]), torch.tensor([[-0.5, -9.0]])]
    refs = [torch.tensor([[-1.5, -2.0]]), torch.tensor([[-0.5, -1.0]])]
    masks = [torch.tensor([[1.0, 1.0]]), torch.tensor([[1.0, 0.0]])]  # the second's last token is padding
    got = kl_penalised_reward(reward, logps, refs, masks, beta=0.1, kind="k1")
    # k1 = logp - ref: 0.5 + 0 for the first, 0 for the second (its -8 is masked)
    assert got.shape == (1, 2) and got.flatten().tolist() == pytest.approx([1.0 - 0.1 * 0.5, 0.0])


def test_the_entropy_coefficient_of_the_step_overrides_the_configured_one():
    logp = torch.zeros(1, 2, requires_grad=True)
    entropy = torch.tensor([[0.5, 1.5]])
    args = dict(beta=0.0, cfg=LossConfig(entropy_coef=0.01), entropy=entropy)
    inputs = (logp, logp.detach(), None, torch.tensor([0.0]), torch.ones(1, 2))
    fixed, _ = policy_loss(*inputs, **args)
    adaptive, _ = policy_loss(*inputs, entropy_coef=0.2, **args)
    assert float(fixed) == pytest.approx(-0.01 * 1.0) and float(adaptive) == pytest.approx(-0.2 * 1.0)  # mean H = 1
