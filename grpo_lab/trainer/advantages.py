"""Group-relative advantages: pure functions over a [N groups, G samples] reward table.

Each normaliser maps rewards r[N, G] to advantages A[N, G]. A zero-variance group always gets
zero advantages (never NaN). `compute_advantages` composes: normalise the main reward, add the
shape rewards after normalisation, floor all-zero groups, clip.
"""

from __future__ import annotations

import math

import torch


def zscore(r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """GRPO: A = (r - mean_g(r)) / (std_g(r) + eps), std unbiased over the group. [N,G] -> [N,G]."""
    mean = r.mean(dim=1, keepdim=True)
    std = r.std(dim=1, keepdim=True) if r.size(1) > 1 else torch.zeros_like(mean)
    return torch.where(std > eps, (r - mean) / (std + eps), torch.zeros_like(r))


def quantile(r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Rank normalisation: A = Phi^-1((rank_g(r) + 0.5) / G), ties get their average rank.

    Only the order inside the group matters, so one outlier moves no other sample's advantage
    by more than one rank. [N,G] -> [N,G]; a group of ties gives zeros.
    """
    G = r.size(1)
    less = (r[:, None, :] < r[:, :, None]).sum(-1).to(r.dtype)  # [N,G]: how many are smaller
    equal = (r[:, None, :] == r[:, :, None]).sum(-1).to(r.dtype)
    rank = less + (equal - 1) / 2
    u = (rank + 0.5) / G
    a = math.sqrt(2.0) * torch.erfinv(2 * u - 1)
    return a - a.mean(dim=1, keepdim=True)  # ties can shift the mean slightly off zero


def batch_std(r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Lite PPO: A = (r - mean_g(r)) / (std over the whole batch + eps). [N,G] -> [N,G]."""
    centred = r - r.mean(dim=1, keepdim=True)
    std = r.std() if r.numel() > 1 else torch.zeros(())
    return centred / (std + eps) if std > eps else torch.zeros_like(r)


def mean_only(r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Dr. GRPO: A = r - mean_g(r); no std division, so easy and hard groups are not rescaled."""
    return r - r.mean(dim=1, keepdim=True)


def rloo(r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RLOO: A_i = r_i - mean_{j != i}(r_j) = G / (G - 1) * (r_i - mean_g(r)). [N,G] -> [N,G].

    Each sample's baseline leaves the sample out, so it is independent of it (an unbiased
    REINFORCE baseline); G = 1 has no baseline and gives zeros.
    """
    G = r.size(1)
    return (r - r.mean(dim=1, keepdim=True)) * (G / (G - 1)) if G > 1 else torch.zeros_like(r)


def reinforce_pp_baseline(r: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++-baseline: c = r - mean_g(r), then A = c / (std over the batch of c + eps). [N,G] -> [N,G].

    The group mean removes the prompt's difficulty, the batch std sets one scale for all prompts
    (Lite PPO divides by the std of the raw rewards instead). The batch mean of c is 0 with equal
    group sizes, so the batch whitening of verl and OpenRLHF reduces to the division; they whiten
    over tokens (a completion counts once per token), this over completions.
    """
    centred = r - r.mean(dim=1, keepdim=True)
    std = centred.std() if centred.numel() > 1 else torch.zeros(())
    return centred / (std + eps) if std > eps else torch.zeros_like(r)


NORMALIZERS = {"zscore": zscore, "quantile": quantile, "batch_std": batch_std, "mean_only": mean_only,
               "rloo": rloo, "reinforce_pp_baseline": reinforce_pp_baseline}


def normalize_then_sum(r: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """GDPO: R = sum_k w_k * zscore_g(r_k), each reward component z-scored in its group before the
    weighted sum. r [N,G,K] (K components, unweighted), w [K] -> [N,G].

    Summing first lets the component with the largest in-group spread decide the ranking, and
    distinct mixes of component values can collapse to one sum; normalising each first gives
    every component the same say in the advantage. A component constant in a group adds 0 there.
    """
    return sum((w[k] * zscore(r[..., k], eps) for k in range(r.size(-1))), torch.zeros_like(r[..., 0]))


# reward.combine -> (r [N,G,K], w [K], eps) -> [N,G]; "sum" is the weighted sum scoring already forms
REWARD_COMBINERS = {"normalize_then_sum": normalize_then_sum}


def compute_advantages(
    main: torch.Tensor,
    shape: torch.Tensor,
    normalization: str = "zscore",
    eps: float = 1e-6,
    clip: float | None = None,
    zero_group_floor: float = 0.0,
) -> tuple[torch.Tensor, dict[str, float]]:
    """A = clip(norm(main) + shape, -c, c); groups of all-zero main reward get -floor if floor > 0.

    main, shape: [N, G]. Shape rewards are added after normalisation, so a format bonus never
    enters the z-score (callers that want it inside add it to `main` and pass zeros).
    """
    adv = NORMALIZERS[normalization](main, eps) + shape
    zero_std = main.std(dim=1) <= eps if main.size(1) > 1 else torch.ones(main.size(0), dtype=torch.bool)
    all_zero = (main == 0).all(dim=1)
    if zero_group_floor > 0:
        adv = torch.where(all_zero[:, None], torch.full_like(adv, -zero_group_floor), adv)
    clipped = torch.zeros_like(adv, dtype=torch.bool)
    if clip is not None:
        clipped = adv.abs() > clip
        adv = adv.clamp(-clip, clip)
    metrics = {
        "adv/mean": adv.mean().item(),
        "adv/std": adv.std().item() if adv.numel() > 1 else 0.0,
        "adv/max_abs": adv.abs().max().item(),
        "adv/group_std_mean": adv.std(dim=1).mean().item() if adv.size(1) > 1 else 0.0,
        "adv/zero_std_frac": zero_std.float().mean().item(),
        "adv/clip_frac": clipped.float().mean().item(),
    }
    return adv, metrics
