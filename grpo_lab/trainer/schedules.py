"""Schedules and controllers: learning rate, KL coefficient, entropy coefficient, temperature, group size.

The schedules are pure functions of (step, total steps, config). The controllers (adaptive KL,
the entropy coefficient, dynamic G) keep a little state and expose it via `state_dict` for checkpoints.
"""

from __future__ import annotations

import math


WARMUPS = {  # optim.warmup -> the LR multiplier at a warmup step
    "fraction": lambda step, cfg: cfg.warmup_factor,
    "linear": lambda step, cfg: (step + 1) / cfg.warmup_steps,
}


def _cosine(step: int, total: int, cfg) -> float:
    span = max(total - cfg.warmup_steps - 1, 1)
    progress = min((step - cfg.warmup_steps) / span, 1.0)
    return cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * progress))


LR_SCHEDULES = {"constant": lambda step, total, cfg: 1.0, "cosine": _cosine}  # optim.schedule, after warmup


def lr_factor(step: int, total: int, cfg) -> float:
    """Multiplier on the base LR at `step` (0-based).

    Warmup for the first `warmup_steps`: 'fraction' holds lr * warmup_factor (the study's
    "first 3-5 steps at lr/5"), 'linear' ramps from lr/warmup_steps to lr. Then constant, or
    cosine from lr down to lr * min_lr_frac at the last step.
    """
    if step < cfg.warmup_steps:
        return WARMUPS[cfg.warmup](step, cfg)
    return LR_SCHEDULES[cfg.schedule](step, total, cfg)


def _linear_beta(step: int, total: int, cfg) -> float:
    progress = step / max(total - 1, 1)
    if progress <= cfg.hold_frac:
        return cfg.beta
    frac = (progress - cfg.hold_frac) / max(1 - cfg.hold_frac, 1e-9)
    final = cfg.beta / cfg.decay_ratio
    return cfg.beta + (final - cfg.beta) * frac


# kl.schedule -> beta at a step. `adaptive` starts at beta; the AdaptiveKL controller moves it from there.
KL_SCHEDULES = {
    "fixed": lambda step, total, cfg: cfg.beta,
    "linear": _linear_beta,
    "adaptive": lambda step, total, cfg: cfg.beta,
}


def beta_at(step: int, total: int, cfg) -> float:
    """KL coefficient for the fixed and linear schedules.

    linear: beta0 for progress < hold_frac, then linearly to beta0 / decay_ratio at the last
    step. progress = step / (total - 1).
    """
    return KL_SCHEDULES[cfg.schedule](step, total, cfg)


class AdaptiveKL:
    """Target-KL controller after Ziegler et al. 2019: beta *= exp(clip(kl/target - 1, -1, 1) / horizon).

    horizon is in steps: at the largest error, beta changes e-fold over `horizon` steps."""

    def __init__(self, beta: float, target: float, horizon: int):
        self.beta, self.target, self.horizon = beta, target, horizon

    def update(self, kl: float) -> float:
        error = max(min(kl / self.target - 1.0, 1.0), -1.0)
        self.beta *= math.exp(error / self.horizon)
        return self.beta

    def state_dict(self) -> dict:
        return {"beta": self.beta}

    def load_state_dict(self, state: dict) -> None:
        self.beta = state["beta"]


class FixedEntropy:
    """The entropy bonus at loss.entropy_coef every step."""

    def __init__(self, cfg):
        self.coef = cfg.entropy_coef

    def applied(self) -> float:
        return self.coef

    def update(self, entropy: float) -> None:
        """Nothing to adjust."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Nothing kept."""


class AdaptiveEntropy:
    """Skywork-OR1's adaptive entropy control: after a step of mean token entropy H,
    c <- min(c + delta, c_max) if H <= target, else max(c - delta, 0); starting at loss.entropy_coef.
    The bonus applied at the next step is c * 1{H <= target} (TRL's use_adaptive_entropy gates it
    the same way), so it acts only once entropy has fallen to the target, and grows while it stays
    there."""

    def __init__(self, cfg):
        self.cfg, self.coef, self.entropy = cfg, cfg.entropy_coef, None

    def applied(self) -> float:
        return self.coef if self.entropy is not None and self.entropy <= self.cfg.entropy_target else 0.0

    def update(self, entropy: float) -> None:
        self.entropy = entropy
        step = self.cfg.entropy_coef_delta if entropy <= self.cfg.entropy_target else -self.cfg.entropy_coef_delta
        self.coef = min(max(self.coef + step, 0.0), self.cfg.entropy_coef_max)

    def state_dict(self) -> dict:
        return {"coef": self.coef, "entropy": self.entropy}

    def load_state_dict(self, state: dict) -> None:
        self.coef, self.entropy = state["coef"], state["entropy"]


ENTROPY_SCHEDULES = {"fixed": FixedEntropy, "adaptive": AdaptiveEntropy}  # loss.entropy_schedule -> controller


def temperature_at(step: int, total: int, cfg) -> float:
    """Sampling temperature: fixed, or the last [fraction, T] entry of the schedule already reached."""
    if not cfg.temperature_schedule:
        return cfg.temperature
    progress = step / max(total, 1)
    value = cfg.temperature
    for frac, temp in sorted(cfg.temperature_schedule):
        if progress >= frac:
            value = temp
    return value


class GroupSize:
    """Fixed or dynamic G. Dynamic: every `check_every` steps look at the mean in-group reward std
    since the last check; above `high` step up the ladder; below `low` for `patience` checks in a
    row step down."""

    def __init__(self, cfg):
        self.ladder = sorted(cfg.group_ladder) if cfg.group_ladder else None
        self.G = cfg.group_size
        self.cfg = cfg
        self.stds: list[float] = []
        self.low_checks = 0

    def update(self, step: int, mean_group_std: float) -> int:
        if self.ladder is None:
            return self.G
        self.stds.append(mean_group_std)
        if (step + 1) % self.cfg.group_check_every:
            return self.G
        std = sum(self.stds) / len(self.stds)
        self.stds = []
        i = self.ladder.index(self.G)
        if std > self.cfg.group_std_high and i + 1 < len(self.ladder):
            self.G, self.low_checks = self.ladder[i + 1], 0
        elif std < self.cfg.group_std_low:
            self.low_checks += 1
            if self.low_checks >= self.cfg.group_patience and i > 0:
                self.G, self.low_checks = self.ladder[i - 1], 0
        else:
            self.low_checks = 0
        return self.G

    def state_dict(self) -> dict:
        return {"G": self.G, "stds": self.stds, "low_checks": self.low_checks}

    def load_state_dict(self, state: dict) -> None:
        self.G, self.stds, self.low_checks = state["G"], state["stds"], state["low_checks"]
