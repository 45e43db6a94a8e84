"""Clip-Cov and KL-Cov (Cui et al. 2025) against hand-computed tensors from verl's formulas."""

import math

import torch

from grpo_lab.spec.config import LossConfig
from grpo_lab.trainer.loss import clip_cov_surrogate, kl_cov_surrogate, policy_loss

# Two sequences of two tokens. Trained-token means: A 0, logp -2, so
# cov = (A - 0)(logp + 2) = [[2, -2], [-1, 1]].
LOGP = [[0.0, -4.0], [-1.0, -3.0]]
ADV = torch.tensor([[1.0], [-1.0]])
ONES = torch.ones(2, 2)


def test_clip_cov_cuts_the_token_in_the_band_and_only_its_gradient():
    logp = torch.tensor(LOGP, requires_grad=True)
    loss, cut = clip_cov_surrogate(logp, logp.detach(), ADV, ONES, frac=0.25, lb=1.5, ub=5.0)
    # ratio 1: L = -A everywhere, 0 on the one token with 1.5 < cov < 5 (cov 2 at [0, 0])
    assert torch.allclose(loss, torch.tensor([[0.0, -1.0], [1.0, 1.0]]))
    assert cut.tolist() == [[True, False], [False, False]]
    loss.sum().backward()
    assert torch.allclose(logp.grad, torch.tensor([[0.0, -1.0], [1.0, 1.0]]))


def test_clip_cov_skips_tokens_ppo_clipped_and_draws_at_most_its_share():
    logp = torch.tensor(LOGP)
    old = logp.clone()
    old[0, 0] = -1.0  # ratio e at [0, 0], A > 0: PPO clips it, so it is not a candidate
    loss, cut = clip_cov_surrogate(logp, old, ADV, ONES, frac=0.25, lb=1.5, ub=5.0)
    assert cut.tolist() == [[True, False], [False, False]]  # PPO's clip only
    assert torch.allclose(loss[0, 0], torch.tensor(-1.2))
    # band (0.5, 5) holds [0, 0] and [1, 1]; 25% of 4 tokens is one, drawn by the generator
    draws = set()
    for seed in range(20):
        _, cut = clip_cov_surrogate(logp, logp, ADV, ONES, frac=0.25, lb=0.5, ub=5.0,
                                    generator=torch.Generator().manual_seed(seed))
        assert int(cut.sum()) == 1
        draws.add(tuple(cut.nonzero()[0].tolist()))
    assert draws == {(0, 0), (1, 1)}


def test_kl_cov_penalises_the_top_covariance_token_by_its_abs_log_ratio():
    logp = torch.tensor(LOGP, requires_grad=True)
    old = logp.detach() - 0.5  # every ratio e^0.5
    loss, top = kl_cov_surrogate(logp, old, ADV, ONES, frac=0.25, coef=1.0)
    r = math.exp(0.5)
    assert torch.allclose(loss, torch.tensor([[-r + 0.5, -r], [r, r]]))
    assert top.tolist() == [[True, False], [False, False]]
    loss.sum().backward()  # d/dlogp of -A e^d + |d| = -A e^d + sign(d)
    assert torch.allclose(logp.grad, torch.tensor([[-r + 1, -r], [r, r]]))


def test_kl_cov_means_and_top_k_over_trained_tokens_only():
    mask = torch.tensor([[0.0, 1.0], [1.0, 1.0]])
    # means over the three trained tokens: A -1/3, logp -8/3; cov = [-16/9, -10/9, 2/9] -> [1, 1] on top
    _, top = kl_cov_surrogate(torch.tensor(LOGP), torch.tensor(LOGP) - 0.5, ADV, mask, frac=0.25)
    assert top.tolist() == [[False, False], [False, True]]


def test_policy_loss_selects_them_from_config():
    logp, old = torch.tensor(LOGP), torch.tensor(LOGP) - 0.5
    cfg = LossConfig(weighting="kl_cov", cov_frac=0.25)
    loss, _ = policy_loss(logp, old, None, ADV[:, 0], ONES, beta=0.0, cfg=cfg)
    assert torch.allclose(loss, torch.tensor(0.5 / 4))  # -r + 0.5 - r + r + r over 4 tokens
    cfg = LossConfig(weighting="clip_cov", cov_frac=0.25, clip_cov_lb=1.5)
    loss, metrics = policy_loss(logp, logp, None, ADV[:, 0], ONES, beta=0.0, cfg=cfg)
    assert torch.allclose(loss, torch.tensor(1 / 4)) and metrics["loss/clip_frac"] == 0.25
