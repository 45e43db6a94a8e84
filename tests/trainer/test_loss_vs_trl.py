"""grpo-lab's policy loss against TRL's own GRPOTrainer._compute_loss on identical inputs (float64,
unequal lengths, a ratio away from 1): loss and gradient agree to 1e-9. TRL's method runs on a
stand-in trainer that hands it the log-probs and entropies instead of running a model. Needs
the bench extra (trl==1.16.0); skipped without it."""

from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from grpo_lab.spec.config import LossConfig
from grpo_lab.trainer.loss import policy_loss
from grpo_lab.trainer.schedules import ENTROPY_SCHEDULES

grpo_trainer = pytest.importorskip("trl.trainer.grpo_trainer", exc_type=ImportError)

B, T = 6, 5


class Accelerator:
    num_processes = 1
    sync_gradients = True  # every call is an optimizer step: the adaptive entropy controller updates

    def pad_across_processes(self, x, dim=0, pad_index=0):
        return x

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x


# what TRL reads from self.args, not self
TRAINER_ARGS = ("sapo_temperature_pos", "sapo_temperature_neg", "entropy_target", "entropy_coef_delta",
                "entropy_coef_min", "entropy_coef_max")


def trl_loss(logp, old, adv, mask, entropy, state=None, **args):
    """TRL's loss (and d loss / d logp) for these tensors under GRPOConfig-named `args`; `state`:
    trainer attributes carried from one call to the next (set before, read back after)."""
    logp = logp.clone().requires_grad_()
    config = {k: args.pop(k) for k in TRAINER_ARGS if k in args}
    trainer = SimpleNamespace(
        accelerator=Accelerator(), model=SimpleNamespace(training=True), beta=0.0, use_vllm=False,
        aux_loss_enabled=False,
        current_gradient_accumulation_steps=1, max_completion_length=T, _metrics=defaultdict(lambda: defaultdict(list)),
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1, **config),
        _get_per_token_logps_and_entropies=lambda *a, **k: (logp, entropy, None),
        **{"top_entropy_quantile": 1.0, "importance_sampling_level": "token", "epsilon_low": 0.2,
           "epsilon_high": 0.2, "off_policy_mask_threshold": None, "_entropy_bonus_enabled": False,
           **args, **(state or {})})
    trainer.get_high_entropy_mask = lambda e, m, q: grpo_trainer.GRPOTrainer.get_high_entropy_mask(trainer, e, m, q)
    trainer.get_off_policy_mask = grpo_trainer.GRPOTrainer.get_off_policy_mask  # a staticmethod
    inputs = {"prompt_ids": torch.zeros(B, 1, dtype=torch.long), "prompt_mask": torch.ones(B, 1),
              "completion_ids": torch.zeros(B, T, dtype=torch.long), "completion_mask": mask,
              "advantages": adv, "old_per_token_logps": old, "num_items_in_batch": mask.sum()}
    loss = grpo_trainer.GRPOTrainer._compute_loss(trainer, None, inputs)
    loss.backward()
    if state is not None:
        state.update({k: getattr(trainer, k) for k in state})
    return loss.detach(), logp.grad


def ours(logp, old, adv, mask, entropy, **loss_cfg):
    logp = logp.clone().requires_grad_()
    loss, _ = policy_loss(logp, old, None, adv, mask, beta=0.0, cfg=LossConfig(**loss_cfg), entropy=entropy,
                          norm=T)
    loss.backward()
    return loss.detach(), logp.grad


@pytest.fixture
def inputs():
    g = torch.Generator().manual_seed(0)
    lengths = torch.tensor([5, 3, 1, 4, 5, 2])
    mask = (torch.arange(T)[None] < lengths[:, None]).double()
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    logp = old + torch.randn(B, T, generator=g, dtype=torch.float64) * 0.4  # ratios well outside [0.8, 1.2]
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    entropy = torch.rand(B, T, generator=g, dtype=torch.float64) * 4
    return logp, old, adv, mask, entropy


CASES = {  # grpo-lab LossConfig <-> TRL GRPOConfig
    "ppo_clip_higher": ({"clip_high": 0.28}, {"loss_type": "dapo", "epsilon_high": 0.28}),  # the anchor
    "cispo": ({"weighting": "cispo", "clip_low": 1.0, "clip_high": 4.0},
              {"loss_type": "cispo", "epsilon_high": 5.0}),
    "gspo": ({"weighting": "sequence", "clip_low": 3e-4, "clip_high": 4e-4, "aggregation": "seq_mean"},
             {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon_low": 3e-4, "epsilon_high": 4e-4}),
    "top_entropy": ({"top_entropy_frac": 0.2}, {"loss_type": "dapo", "top_entropy_quantile": 0.2}),
    "top_entropy_seq_mean": ({"top_entropy_frac": 0.5, "aggregation": "seq_mean"},
                             {"loss_type": "grpo", "top_entropy_quantile": 0.5}),
    # TRL builds its temperatures with torch.where on Python floats, in float32: 1.05 would become
    # 1.0499999523 (a 1e-8 difference); 1.25 is exact in float32.
    "sapo": ({"weighting": "sapo", "sapo_tau_pos": 1.0, "sapo_tau_neg": 1.25, "aggregation": "seq_mean"},
             {"loss_type": "sapo", "sapo_temperature_pos": 1.0, "sapo_temperature_neg": 1.25}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_loss_and_gradient_match_trl(case, inputs):
    ours_cfg, trl_args = CASES[case]
    our_loss, our_grad = ours(*inputs, **ours_cfg)
    their_loss, their_grad = trl_loss(*inputs, **trl_args)
    assert our_loss.item() == pytest.approx(their_loss.item(), abs=1e-9)
    assert torch.allclose(our_grad, their_grad, atol=1e-9, rtol=0)
    assert our_grad.abs().sum() > 0


def test_off_policy_mask_matches_trl_where_it_masks(inputs):
    logp, old, adv, mask, entropy = inputs
    adv = -adv.abs()  # every sequence punished: those whose mean old - new log-prob passes 0.1 leave the loss
    drift = ((old - logp) * mask).sum(1) / mask.sum(1)
    assert 0 < int((drift > 0.1).sum()) < B
    our_loss, our_grad = ours(logp, old, adv, mask, entropy, off_policy_mask=0.1)
    their_loss, their_grad = trl_loss(logp, old, adv, mask, entropy, loss_type="dapo", off_policy_mask_threshold=0.1)
    assert our_loss.item() == pytest.approx(their_loss.item(), abs=1e-9)
    assert torch.allclose(our_grad, their_grad, atol=1e-9, rtol=0)
    assert (our_grad[drift > 0.1] == 0).all() and our_grad[drift <= 0.1].abs().sum() > 0


def test_adaptive_entropy_follows_trls_controller_and_bonus_step_by_step(inputs):
    logp, old, adv, mask, entropy = inputs  # token entropies in [0, 4): a batch mean near 2
    control = ENTROPY_SCHEDULES["adaptive"](LossConfig(entropy_schedule="adaptive", entropy_target=1.5,
                                                       entropy_coef_delta=0.05))
    state = {"entropy_coef": 0.0, "_last_world_entropy": float("inf"), "_entropy_window_stats": None}
    trl_args = {"loss_type": "dapo", "use_adaptive_entropy": True, "_entropy_bonus_enabled": True,
                "entropy_target": 1.5, "entropy_coef_delta": 0.05, "entropy_coef_min": 0.0, "entropy_coef_max": 1.0}
    applied = []
    for scale in (0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 0.2):  # under the target three steps, over it three, under again
        h = entropy * scale
        applied.append(control.applied())
        our_loss, our_grad = ours(logp, old, adv, mask, h, entropy_coef=applied[-1])
        their_loss, their_grad = trl_loss(logp, old, adv, mask, h, state=state, **trl_args)
        assert our_loss.item() == pytest.approx(their_loss.item(), abs=1e-9)
        assert torch.allclose(our_grad, their_grad, atol=1e-9, rtol=0)
        control.update(float((h * mask).sum() / mask.sum()))
        assert control.coef == pytest.approx(state["entropy_coef"], abs=1e-12)
    assert applied == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.0, 0.0, 0.0])
