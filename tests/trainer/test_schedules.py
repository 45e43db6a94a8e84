import math

import pytest
import torch

from grpo_lab.spec.config import KLConfig, LossConfig, OptimConfig, ReferenceConfig, SamplingConfig
from grpo_lab.trainer.evaluate import pass_at_k
from grpo_lab.trainer.reference import Reference
from grpo_lab.trainer.schedules import (
    ENTROPY_SCHEDULES,
    AdaptiveKL,
    GroupSize,
    beta_at,
    lr_factor,
    temperature_at,
)


def test_pass_at_k_matches_closed_form():
    assert pass_at_k(10, 0, 1) == 0.0
    assert math.isclose(pass_at_k(10, 3, 1), 0.3)
    assert math.isclose(pass_at_k(10, 3, 2), 1 - (7 * 6) / (10 * 9))
    assert pass_at_k(8, 2, 7) == 1.0  # fewer than k wrong samples
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 8)


def test_beta_linear_anneal_at_0_10_55_100_percent():
    cfg = KLConfig(beta=0.01, schedule="linear", hold_frac=0.1, decay_ratio=5)
    total = 101  # progress = step / 100
    assert beta_at(0, total, cfg) == 0.01
    assert beta_at(10, total, cfg) == 0.01
    assert math.isclose(beta_at(55, total, cfg), 0.01 + (0.002 - 0.01) * 0.5)
    assert math.isclose(beta_at(100, total, cfg), 0.002)
    assert beta_at(55, total, KLConfig(beta=0.01)) == 0.01


def test_adaptive_kl_moves_towards_target():
    c = AdaptiveKL(0.1, target=0.02, horizon=10)
    assert c.update(0.2) > 0.1  # KL far above target: raise beta
    b = c.beta
    assert c.update(0.0) < b


def test_lr_warmup_fraction_linear_and_cosine():
    cfg = OptimConfig(warmup_steps=3, warmup="fraction", warmup_factor=0.2, schedule="cosine", min_lr_frac=0.1)
    assert [lr_factor(s, 13, cfg) for s in range(3)] == [0.2, 0.2, 0.2]
    assert lr_factor(3, 13, cfg) == 1.0
    assert math.isclose(lr_factor(12, 13, cfg), 0.1)
    lin = OptimConfig(warmup_steps=4, warmup="linear")
    assert [lr_factor(s, 10, lin) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]


def test_temperature_step_schedule():
    cfg = SamplingConfig(temperature=1.0, temperature_schedule=[[0.0, 1.0], [0.25, 0.85]])
    assert temperature_at(0, 100, cfg) == 1.0 and temperature_at(24, 100, cfg) == 1.0
    assert temperature_at(25, 100, cfg) == 0.85 and temperature_at(99, 100, cfg) == 0.85


def test_dynamic_group_size_steps_up_over_threshold_and_down_when_stable():
    cfg = SamplingConfig(group_size=8, group_ladder=[4, 8, 12, 16], group_check_every=2,
                         group_std_high=0.4, group_std_low=0.1, group_patience=2)
    g = GroupSize(cfg)
    assert g.update(0, 0.5) == 8  # not a check step yet
    assert g.update(1, 0.5) == 12  # mean std 0.5 > 0.4
    for step in (2, 3, 4):
        g.update(step, 0.05)
    assert g.G == 12  # one low check so far
    assert g.update(5, 0.05) == 8  # second low check in a row
    fixed = GroupSize(SamplingConfig(group_size=8))
    assert fixed.update(1, 10.0) == 8


def test_ema_reference_after_one_update():
    policy = torch.nn.Linear(2, 2)
    ref = Reference(policy, ReferenceConfig(mode="ema", ema_alpha=0.9))
    r0 = ref.model.weight.clone()
    with torch.no_grad():
        policy.weight.add_(1.0)
    ref.update(policy, 0)
    assert torch.allclose(ref.model.weight, 0.9 * r0 + 0.1 * policy.weight)
    assert ref.drift(policy) > 0


def test_hard_reference_syncs_every_n_steps():
    policy = torch.nn.Linear(2, 2)
    ref = Reference(policy, ReferenceConfig(mode="hard", sync_every=3))
    with torch.no_grad():
        policy.weight.add_(1.0)
    ref.update(policy, 0)
    assert not torch.equal(ref.model.weight, policy.weight)
    ref.update(policy, 2)
    assert torch.equal(ref.model.weight, policy.weight)
    frozen = Reference(policy, ReferenceConfig())
    w = frozen.model.weight.clone()
    with torch.no_grad():
        policy.weight.add_(1.0)
    frozen.update(policy, 2)
    assert torch.equal(frozen.model.weight, w)


def test_adaptive_entropy_raises_the_coefficient_only_while_entropy_is_at_the_target_and_gates_it():
    cfg = LossConfig(entropy_schedule="adaptive", entropy_target=0.2, entropy_coef_delta=0.005, entropy_coef_max=0.012)
    control = ENTROPY_SCHEDULES["adaptive"](cfg)
    seen = [control.applied()]  # nothing measured yet: no bonus
    for entropy in (0.1, 0.15, 0.19, 0.5, 0.5, 0.5):
        control.update(entropy)
        seen.append(control.applied())
    # c: 0.005, 0.010, min(0.015, 0.012); then 0.007, 0.002, max(-0.003, 0) while entropy is above 0.2 (gated: 0)
    assert seen == pytest.approx([0.0, 0.005, 0.010, 0.012, 0.0, 0.0, 0.0])
    assert control.coef == 0.0
    control.update(0.2)  # at the target counts as collapse: up again, and applied
    restored = ENTROPY_SCHEDULES["adaptive"](cfg)
    restored.load_state_dict(control.state_dict())
    assert restored.applied() == pytest.approx(0.005)
    fixed = ENTROPY_SCHEDULES["fixed"](LossConfig(entropy_coef=0.01))
    fixed.update(0.0)
    assert fixed.applied() == 0.01
