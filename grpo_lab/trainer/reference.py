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
        if self.cfg.mode == "hard" and (step + 1) % self.cfg.sync_every == 0:
            self.model.load_state_dict(policy.state_dict())
        elif self.cfg.mode == "ema":
            a = self.cfg.ema_alpha
            for r, p in zip(self.model.parameters(), policy.parameters()):
                r.mul_(a).add_(p.detach(), alpha=1 - a)

    @torch.no_grad()
    def drift(self, policy: torch.nn.Module) -> float:
        """||policy - ref|| / ||ref|| over all parameters: how far the policy has moved from it."""
        num = sum(float((p - r).pow(2).sum()) for p, r in zip(policy.parameters(), self.model.parameters()))
        den = sum(float(r.pow(2).sum()) for r in self.model.parameters())
        return (num / max(den, 1e-12)) ** 0.5
