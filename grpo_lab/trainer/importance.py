"""Truncated importance sampling (TIS) for the sampler/trainer mismatch.

A fast sampler (vLLM: other kernels, bf16, fused layers) does not sample from exactly the
distribution the trainer computes, so "on-policy" samples are slightly off-policy. TIS reweights
each token's policy-gradient term by the likelihood ratio of the trainer's pre-update policy to
the sampler, capped so that a rare token the sampler under-weighted cannot dominate the batch
(Yao et al. 2025, "Your Efficient RL Framework Secretly Brings You Off-Policy RL Training").
"""

from __future__ import annotations

import math

import torch


def tis_weights(
    trainer_logp: torch.Tensor, engine_logp: torch.Tensor, mask: torch.Tensor, cap: float
) -> tuple[torch.Tensor, dict[str, float]]:
    """w = min(exp(logp_trainer_old - logp_engine), C), detached; 0 where mask is 0.

    trainer_logp: [B, T] log-probs of the sampled tokens under the trainer's policy before the
    update (the PPO "old" log-probs); engine_logp: [B, T] the sampler's log-probs of the same
    tokens (Batch.engine_logp); mask: [B, T], nonzero on trained tokens; cap: C > 0.
    Returns (weights [B, T], metrics): tis/weight_mean (over trained tokens) and tis/capped_frac
    (share of trained tokens whose ratio exceeded C). Multiply the per-token surrogate by w.
    """
    on = mask != 0
    log_ratio = (trainer_logp.detach() - engine_logp.detach()).float()
    capped = log_ratio > math.log(cap)
    weights = torch.exp(log_ratio.clamp(max=math.log(cap)))  # clamp first: exp never overflows
    weights = torch.where(on, weights, torch.zeros_like(weights))
    n = on.sum().clamp(min=1)
    metrics = {
        "tis/weight_mean": float(weights.sum() / n),
        "tis/capped_frac": float((capped & on).sum() / n),
    }
    return weights, metrics
