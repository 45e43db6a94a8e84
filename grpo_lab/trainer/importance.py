"""Importance weights for the sampler/trainer mismatch, per token or per sequence, truncated or masked.

A fast sampler (vLLM: other kernels, bf16, fused layers) does not sample from exactly the
distribution the trainer computes, so "on-policy" samples are slightly off-policy. Each token's
policy-gradient term is reweighted by the likelihood ratio of the trainer's pre-update policy to
the sampler, bounded so that a rare token (or sequence) the sampler under-weighted cannot
dominate the batch (Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy
RL Training"). The modes are TRL's `vllm_importance_sampling_mode`; the cap C is its
`vllm_importance_sampling_clip_max`, with no lower bound (its default).
"""

from __future__ import annotations

import math

import torch


def _sequence(log_ratio: torch.Tensor) -> torch.Tensor:
    return log_ratio.sum(dim=1, keepdim=True).expand_as(log_ratio)


def _truncate(log_ratio: torch.Tensor, log_cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.exp(log_ratio.clamp(max=log_cap)), log_ratio > log_cap  # clamp first: exp never overflows


def _mask(log_ratio: torch.Tensor, log_cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    over = log_ratio > log_cap
    return torch.where(over, torch.zeros_like(log_ratio), torch.exp(log_ratio.clamp(max=log_cap))), over


# vllm.tis_mode -> (log_ratio [B,T], 0 off the trained tokens; log C) -> (weights [B,T], beyond C [B,T])
IS_MODES = {
    "token_truncate": _truncate,  # w_t = min(r_t, C)
    "token_mask": _mask,  # w_t = r_t, or 0 where r_t > C
    "sequence_truncate": lambda d, c: _truncate(_sequence(d), c),  # w = min(prod_t r_t, C) on every token
    "sequence_mask": lambda d, c: _mask(_sequence(d), c),  # w = prod_t r_t, or 0 for the sequence where > C
}


def tis_weights(
    trainer_logp: torch.Tensor, engine_logp: torch.Tensor, mask: torch.Tensor, cap: float,
    mode: str = "token_truncate",
) -> tuple[torch.Tensor, dict[str, float]]:
    """Detached weights from r_t = exp(logp_trainer_old - logp_engine), bounded by C as `mode` says.

    trainer_logp: [B, T] log-probs of the sampled tokens under the trainer's policy before the
    update (the PPO "old" log-probs); engine_logp: [B, T] the sampler's log-probs of the same
    tokens (Batch.engine_logp); mask: [B, T], nonzero on trained tokens; cap: C > 0. A sequence
    mode's ratio is the product of its trained tokens' ratios (TRL's; OpenRLHF's seq-mask-tis
    takes their geometric mean). Returns (weights [B, T], 0 where mask is 0; metrics):
    tis/weight_mean (over trained tokens) and tis/capped_frac (share of trained tokens whose
    ratio exceeded C: truncated or masked). Multiply the per-token surrogate by the weights.
    """
    on = mask != 0
    diff = (trainer_logp.detach() - engine_logp.detach()).float()
    log_ratio = torch.where(on, diff, torch.zeros_like(diff))  # a padded token never enters a sequence's product
    weights, capped = IS_MODES[mode](log_ratio, math.log(cap))
    weights = torch.where(on, weights, torch.zeros_like(weights))
    n = on.sum().clamp(min=1)
    metrics = {
        "tis/weight_mean": float(weights.sum() / n),
        "tis/capped_frac": float((capped & on).sum() / n),
    }
    return weights, metrics


def off_policy_sequence_mask(
    logp: torch.Tensor, sampling_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, threshold: float,
) -> torch.Tensor:
    """DeepSeek-V3.2's off-policy sequence mask: M_i = 0 where A_i < 0 and
    mean_t(log pi_sampler(o_t) - log pi_theta(o_t)) > delta over the sequence's trained tokens, else 1.

    A sequence the model was punished for that the current policy has already moved far from
    (sampled off-policy: stale rollouts, several updates per batch, a sampler/trainer mismatch)
    gives a noisy, destabilising negative gradient; positive-advantage sequences are kept.
    logp, sampling_logp, mask: [B,T]; adv: [B,1]. Returns [B,1] (0/1, detached; as TRL's
    get_off_policy_mask), to multiply the policy term by.
    """
    m = mask.to(logp.dtype)
    drift = ((sampling_logp.detach() - logp.detach()) * m).sum(dim=1, keepdim=True)
    kl = drift / m.sum(dim=1, keepdim=True).clamp(min=1)
    return ((adv >= 0) | (kl <= threshold)).to(logp.dtype)
