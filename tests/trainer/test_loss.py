import math

import pytest
import torch

from grpo_lab.spec.config import LossConfig
from grpo_lab.trainer.loss import aggregate, clipped_surrogate, kl_estimate, policy_loss


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
