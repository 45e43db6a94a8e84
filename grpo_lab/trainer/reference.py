"""The reference model of the KL term: frozen, hard-synced every N steps, or an EMA of the policy."""

from __future__ import annotations

import copy

import torch


class Reference:
    def __init__(self, policy: torch.nn.Module, cfg):
        self.cfg = cfg
        self.model = copy.deepcopy(policy).eval()
        for p in self.model.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, policy: torch.nn.Module, step: int) -> None:
        """After optimizer step `step` (0-based): hard copy every sync_every steps, or
        EMA: ref <- alpha * ref + (1 - alpha) * policy."""
        UPDATES[self.cfg.mode](self.model, policy, step, self.cfg)

    @torch.no_grad()
    def drift(self, policy: torch.nn.Module) -> float:
        """||policy - ref|| / ||ref|| over all parameters: how far the policy has moved from it."""
        # One host sync per call, not two per parameter tensor: this runs every step.
        pairs = list(zip(policy.parameters(), self.model.parameters()))
        num = torch.stack([(p - r).float().pow(2).sum() for p, r in pairs]).sum()
        den = torch.stack([r.float().pow(2).sum() for _, r in pairs]).sum()
        return float((num / den.clamp(min=1e-12)).sqrt())


def _hard_sync(ref: torch.nn.Module, policy: torch.nn.Module, step: int, cfg) -> None:
    if (step + 1) % cfg.sync_every == 0:
        ref.load_state_dict(policy.state_dict())


def _ema(ref: torch.nn.Module, policy: torch.nn.Module, step: int, cfg) -> None:
    for r, p in zip(ref.parameters(), policy.parameters()):
        r.mul_(cfg.ema_alpha).add_(p.detach(), alpha=1 - cfg.ema_alpha)


UPDATES = {"frozen": lambda ref, policy, step, cfg: None, "hard": _hard_sync, "ema": _ema}  # reference.mode
