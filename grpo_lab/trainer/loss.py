"""The GRPO policy loss as pure functions: KL estimators, clipped surrogates, aggregation.

Shapes: B sequences, T completion tokens (right-padded); `mask` [B, T] is 1 on trained tokens.
"""

from __future__ import annotations

import math

import torch

from grpo_lab.trainer.importance import off_policy_sequence_mask

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


def kl_penalised_reward(reward: torch.Tensor, logps: list[torch.Tensor], ref_logps: list[torch.Tensor],
                        masks: list[torch.Tensor], beta: float, kind: str = "k3") -> torch.Tensor:
    """KL in the reward (kl.in_reward): r_i − β·Σ_t KL_t(π‖ref) over each completion's tokens.
    reward [N,G]; logps, ref_logps, masks: per micro-batch [b,T] whose rows, in order, are the
    N·G completions. Returns [N,G] on reward's device."""
    seq_kl = torch.cat([(kl_estimate(lp, rp, kind) * m).sum(1) for lp, rp, m in zip(logps, ref_logps, masks)])
    return reward - beta * seq_kl.view_as(reward).to(reward.device)


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


def cispo_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, clip_low: float = 1.0, clip_high: float = 4.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """CISPO (MiniMax-M1): L = -sg(clip(rho, 1 - e_lo, 1 + e_hi)) * A * logp, rho = exp(logp - old_logp).

    REINFORCE weighted by a clipped, stop-gradient importance ratio: a token whose ratio left the
    range keeps its gradient (scaled by the bound), where PPO's min() drops it. clip_low 1 is no
    lower bound; 1 + clip_high is ScaleRL's eps_max. adv [B,1]. Returns (loss [B,T], clipped [B,T]).
    """
    ratio = torch.exp(logp - old_logp)
    weight = ratio.clamp(1 - clip_low, 1 + clip_high).detach()
    return -weight * adv * logp, (ratio < 1 - clip_low) | (ratio > 1 + clip_high)


def gmpo_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
    clip_low: float = 0.2, clip_high: float = 0.2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GMPO: L_s = -A_s * exp(mean_t(sgn(A_s) * min(sgn(A_s) * d_t, sgn(A_s) * clip(d_t)))), d = logp - old_logp.

    The geometric mean of the clipped token ratios replaces GRPO's arithmetic mean, so one
    extreme token moves the sequence's weight less; clip(d) bounds the log-ratio to
    [log(1 - clip_low), log(1 + clip_high)]. Spread over the sequence's tokens like
    sequence_surrogate (GMPO's own mean is over sequences: aggregation seq_mean). adv: [B, 1].
    Returns (loss [B,T], clipped [B,T]: tokens whose log-ratio left the range).
    """
    d = logp - old_logp
    d_clip = d.clamp(math.log(1 - clip_low), math.log1p(clip_high))
    sign = torch.sign(adv)
    d_min = sign * torch.minimum(sign * d, sign * d_clip)
    n = mask.sum(dim=1, keepdim=True).clamp(min=1)
    ratio = torch.exp((d_min * mask).sum(dim=1, keepdim=True) / n)
    return (-adv * ratio).expand_as(logp), d != d_clip


def sapo_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, tau_pos: float = 1.0, tau_neg: float = 1.05,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SAPO (Gao et al. 2025): L = -f(rho) * A, f(rho) = sigmoid(tau * (rho - 1)) * 4 / tau, rho = exp(logp - old_logp),
    tau = tau_pos where A > 0, else tau_neg.

    A smooth gate instead of PPO's hard clip: df/drho = 4 s (1 - s), s = sigmoid(tau (rho - 1)), is 1 at
    rho = 1 (the policy gradient) and decays as the ratio leaves 1, faster for the larger tau; the
    paper's tau_neg > tau_pos damps negative updates sooner. adv [B,1], logp/old_logp [B,T].
    Returns (loss [B,T], gated [B,T]: tokens whose gradient weight 4 s (1 - s) fell below 1/2).
    """
    ratio = torch.exp(logp - old_logp)
    tau = torch.where(adv > 0, torch.full_like(adv, tau_pos), torch.full_like(adv, tau_neg))
    s = torch.sigmoid(tau * (ratio - 1))
    return -s * (4 / tau) * adv, (4 * s * (1 - s)).detach() < 0.5


def _cov(logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-token centred product (A - mean A)(logp - mean logp), means over the trained tokens
    (token-weighted, as in verl): the term whose batch sum drives the entropy change (Cui et al.).
    Detached: it only selects tokens. [B,T] (adv broadcast) -> [B,T]."""
    m = mask.to(logp.dtype)
    a = adv.expand_as(logp).detach()
    lp = logp.detach()
    n = m.sum().clamp(min=1)
    return (a - (a * m).sum() / n) * (lp - (lp * m).sum() / n)


def clip_cov_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
    clip_low: float = 0.2, clip_high: float = 0.2, frac: float = 2e-4, lb: float = 1.0, ub: float = 5.0,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clip-Cov (Cui et al. 2025): PPO's clipped loss with the gradient of a few high-covariance
    tokens cut. cov_t = (A - mean A)(logp_t - mean logp) over trained tokens; of the tokens with
    lb < cov_t < ub that PPO did not already clip, max(1, int(frac * n_trained)) drawn uniformly
    at random get loss 0 (their gradient detached), the rest keep L_t = -min(rho A, clip(rho) A).
    Those tokens push entropy down fastest, so cutting them slows entropy collapse. adv [B,1],
    logp/old_logp/mask [B,T]. Returns (loss [B,T], clipped [B,T]: PPO-clipped or cut tokens).
    The draw uses `generator` (None: torch's global RNG, as verl's randperm).
    """
    loss, ppo_clipped = clipped_surrogate(logp, old_logp, adv, clip_low, clip_high)
    on = mask != 0
    cov = _cov(logp, adv, mask)
    # verl leaves tokens PPO already clipped out of the draw: their gradient is already gone.
    band = torch.nonzero((cov > lb) & (cov < ub) & on & ~ppo_clipped)
    n_cut = max(int(frac * int(on.sum())), 1)
    picked = band[torch.randperm(len(band), generator=generator)[:n_cut]]
    cut = torch.zeros_like(on)
    cut[picked[:, 0], picked[:, 1]] = True
    return torch.where(cut, torch.zeros_like(loss), loss), ppo_clipped | cut


def kl_cov_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor,
    frac: float = 2e-3, coef: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """KL-Cov (Cui et al. 2025): the unclipped surrogate L_t = -rho_t A, plus coef * |logp_t -
    old_logp_t| on the top max(1, int(frac * n_trained)) trained tokens by cov_t = (A - mean A)
    (logp_t - mean logp). The penalty holds those tokens near the sampling policy, where PPO's
    clip would hold every token; it is 0 at the first update (logp = old_logp) and acts from the
    second. No ratio clip, as in verl's kl_cov. adv [B,1], logp/old_logp/mask [B,T].
    Returns (loss [B,T], penalised [B,T] bool).
    """
    d = logp - old_logp
    on = mask != 0
    cov = _cov(logp, adv, mask).masked_fill(~on, -math.inf)
    k = min(max(int(frac * int(on.sum())), 1), int(on.sum()))
    top = torch.zeros(cov.numel(), dtype=torch.bool, device=cov.device)
    top[torch.topk(cov.flatten(), k).indices] = True
    top = top.view_as(cov) & on
    return -adv * torch.exp(d) + coef * d.abs() * top, top


WEIGHTINGS = {  # loss.weighting -> (logp, old_logp, adv [B,1], mask, LossConfig) -> (loss [B,T], clipped [B,T])
    "token": lambda lp, old, a, mask, c: clipped_surrogate(lp, old, a, c.clip_low, c.clip_high, c.dual_clip),
    "sequence": lambda lp, old, a, mask, c: sequence_surrogate(lp, old, a, mask, c.clip_low, c.clip_high),
    "cispo": lambda lp, old, a, mask, c: cispo_surrogate(lp, old, a, c.clip_low, c.clip_high),
    "gmpo": lambda lp, old, a, mask, c: gmpo_surrogate(lp, old, a, mask, c.clip_low, c.clip_high),
    "clip_cov": lambda lp, old, a, mask, c: clip_cov_surrogate(
        lp, old, a, mask, c.clip_low, c.clip_high, c.cov_frac, c.clip_cov_lb, c.clip_cov_ub),
    "kl_cov": lambda lp, old, a, mask, c: kl_cov_surrogate(lp, old, a, mask, c.cov_frac, c.kl_cov_coef),
    "sapo": lambda lp, old, a, mask, c: sapo_surrogate(lp, old, a, c.sapo_tau_pos, c.sapo_tau_neg),
}


def top_entropy_mask(entropy: torch.Tensor, mask: torch.Tensor, frac: float) -> torch.Tensor:
    """1 on the trained tokens whose entropy is in the top `frac` of the batch's trained tokens.

    "Beyond the 80/20 rule": the policy gradient of the high-entropy "forking" tokens carries the
    learning. Threshold = the (1 - frac) quantile (linear interpolation) of entropy over trained
    tokens; a token at the threshold is kept, as in TRL. entropy, mask: [B,T] -> [B,T] (0/1).
    """
    on = mask != 0
    if frac >= 1 or not on.any():
        return on.to(entropy.dtype)
    threshold = torch.quantile(entropy.detach()[on].float(), 1 - frac)
    return ((entropy.detach() >= threshold) & on).to(entropy.dtype)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    m = mask.to(x.dtype)
    return float((x * m).sum() / m.sum().clamp(min=1))


def policy_loss(
    logp, old_logp, ref_logp, adv, mask, *, beta: float, cfg, kl_estimator: str = "k3", entropy=None,
    norm: float = 1.0, is_weights=None, sampling_logp=None, entropy_coef: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """GRPO objective: aggregate(w * e * M * surrogate + beta * KL - entropy_coef * H) over trained tokens.
    entropy_coef: the controller's value this step (trainer/schedules.py); None: cfg.entropy_coef.

    logp, old_logp, ref_logp, mask, entropy, is_weights, sampling_logp: [B,T]; adv: [B] (one
    advantage per sequence). ref_logp may be None when beta == 0 or when the KL is put in the
    reward instead. is_weights w (detached importance weights for a sampler/trainer mismatch,
    trainer/importance.py), the high-entropy token mask e (cfg.top_entropy_frac < 1) and the
    off-policy sequence mask M (cfg.off_policy_mask set: against the sampler's log-probs
    sampling_logp, old_logp when None) scale only the policy term: KL and entropy are about the
    trainer's own distribution, and the aggregation still counts every token.
    """
    surr, clipped = WEIGHTINGS[cfg.weighting](logp, old_logp, adv[:, None], mask, cfg)
    surr = surr if is_weights is None else surr * is_weights
    if cfg.top_entropy_frac < 1:
        surr = surr * top_entropy_mask(entropy, mask, cfg.top_entropy_frac)
    metrics = {"loss/clip_frac": masked_mean(clipped.float(), mask)}
    if cfg.off_policy_mask is not None:
        keep = off_policy_sequence_mask(logp, old_logp if sampling_logp is None else sampling_logp, adv[:, None],
                                        mask, cfg.off_policy_mask)
        surr = surr * keep
        metrics["loss/off_policy_frac"] = float(1 - keep.mean())  # loss/*: reported from the last update, where it acts
    per_token = surr
    if ref_logp is not None:
        kl = kl_estimate(logp, ref_logp, kl_estimator)
        metrics["kl/mean"] = masked_mean(kl.detach(), mask)
        if beta > 0:
            per_token = per_token + beta * kl
    entropy_coef = cfg.entropy_coef if entropy_coef is None else entropy_coef
    if entropy is not None and entropy_coef:
        per_token = per_token - entropy_coef * entropy
    loss = aggregate(per_token, mask, cfg.aggregation, norm)
    metrics["loss/policy"] = float(aggregate(surr.detach(), mask, cfg.aggregation, norm))
    metrics["loss/total"] = float(loss.detach())
    return loss, metrics
