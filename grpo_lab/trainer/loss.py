"""The GRPO policy loss as pure functions: KL estimators, clipped surrogates, aggregation.

Shapes: B sequences, T completion tokens (right-padded); `mask` [B, T] is 1 on trained tokens.
"""

from __future__ import annotations

import torch


KL_ESTIMATORS = {  # d = ref_logp - logp
    "k1": lambda d: -d,  # unbiased, can be negative
    "k2": lambda d: 0.5 * d.pow(2),
    "k3": lambda d: torch.expm1(d) - d,  # unbiased, >= 0
}


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi || ref) from samples of pi; d = ref_logp - logp. [B,T] -> [B,T].

    k1 = -d (unbiased, can be negative); k2 = d^2 / 2; k3 = exp(d) - d - 1 (unbiased, >= 0).
    """
    if kind not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {kind!r}; use {', '.join(KL_ESTIMATORS)}")
    return KL_ESTIMATORS[kind](ref_logp - logp)


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO: L = -min(rho * A, clip(rho, 1 - e_lo, 1 + e_hi) * A), rho = exp(logp - old_logp).

    clip_high > clip_low is DAPO's clip-higher. Dual clip (c > 1) bounds the loss of negative
    advantages at -c * A. adv broadcasts to [B, T]. Returns (loss [B,T], clipped [B,T] bool).
    """
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * adv
    clipped = ratio.clamp(1 - clip_low, 1 + clip_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    if dual_clip is not None:
        loss = torch.where(adv < 0, torch.minimum(loss, -dual_clip * adv), loss)
    return loss, (clipped < unclipped)


def sequence_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
    clip_low: float = 0.2, clip_high: float = 0.2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequence-weighted: one ratio per sequence, rho_s = exp(mean_t(logp - old_logp)).

    L_s = -min(rho_s * A_s, clip(rho_s) * A_s), spread over the sequence's tokens so the same
    aggregation applies. adv: [B, 1]. Returns (loss [B,T], clipped [B,T]).
    """
    n = mask.sum(dim=1, keepdim=True).clamp(min=1)
    log_ratio = ((logp - old_logp) * mask).sum(dim=1, keepdim=True) / n
    ratio = torch.exp(log_ratio)
    unclipped, clipped = ratio * adv, ratio.clamp(1 - clip_low, 1 + clip_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    return loss.expand_as(logp), (clipped < unclipped).expand_as(logp)


def _token_mean(x: torch.Tensor, m: torch.Tensor, norm: float) -> torch.Tensor:
    return (x * m).sum() / m.sum().clamp(min=1)


def _seq_mean(x: torch.Tensor, m: torch.Tensor, norm: float) -> torch.Tensor:
    return ((x * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)).mean()


def _token_sum_norm(x: torch.Tensor, m: torch.Tensor, norm: float) -> torch.Tensor:
    return (x * m).sum() / (x.size(0) * norm)


AGGREGATIONS = {"token_mean": _token_mean, "seq_mean": _seq_mean, "token_sum_norm": _token_sum_norm}


def aggregate(x: torch.Tensor, mask: torch.Tensor, mode: str = "token_mean", norm: float = 1.0) -> torch.Tensor:
    """Reduce per-token values [B,T] to a scalar; this choice is one ablation axis.

    token_mean:     sum(x*m) / sum(m)                      (every token weighs the same; DAPO)
    seq_mean:       mean_b( sum_t(x*m) / sum_t(m) )        (every sequence weighs the same; GRPO)
    token_sum_norm: sum(x*m) / (B * norm)                  (Dr. GRPO: a constant, e.g. max tokens)
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"unknown aggregation {mode!r}; use {', '.join(AGGREGATIONS)}")
    return AGGREGATIONS[mode](x, mask.to(x.dtype), norm)


WEIGHTINGS = {  # loss.weighting -> (logp, old_logp, adv [B,1], mask, LossConfig) -> (loss, clipped)
    "token": lambda lp, old, a, mask, c: clipped_surrogate(lp, old, a, c.clip_low, c.clip_high, c.dual_clip),
    "sequence": lambda lp, old, a, mask, c: sequence_surrogate(lp, old, a, mask, c.clip_low, c.clip_high),
}


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    m = mask.to(x.dtype)
    return float((x * m).sum() / m.sum().clamp(min=1))


def policy_loss(
    logp, old_logp, ref_logp, adv, mask, *, beta: float, cfg, kl_estimator: str = "k3", entropy=None,
    norm: float = 1.0, is_weights=None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO objective: aggregate(w * surrogate + beta * KL - entropy_coef * H) over trained tokens.

    logp, old_logp, ref_logp, mask, entropy, is_weights: [B,T]; adv: [B] (one advantage per sequence).
    ref_logp may be None when beta == 0 or when the KL is put in the reward instead. is_weights
    (detached truncated importance weights for a sampler/trainer mismatch, trainer/importance.py)
    scale only the policy term: KL and entropy are about the trainer's own distribution.
    """
    surr, clipped = WEIGHTINGS[cfg.weighting](logp, old_logp, adv[:, None], mask, cfg)
    surr = surr if is_weights is None else surr * is_weights
    per_token = surr
    metrics = {"loss/clip_frac": masked_mean(clipped.float(), mask)}
    if ref_logp is not None:
        kl = kl_estimate(logp, ref_logp, kl_estimator)
        metrics["kl/mean"] = masked_mean(kl.detach(), mask)
        if beta > 0:
            per_token = per_token + beta * kl
    if entropy is not None and cfg.entropy_coef:
        per_token = per_token - cfg.entropy_coef * entropy
    loss = aggregate(per_token, mask, cfg.aggregation, norm)
    metrics["loss/policy"] = float(aggregate(surr.detach(), mask, cfg.aggregation, norm))
    metrics["loss/total"] = float(loss.detach())
    return loss, metrics
