"""The sampler/trainer mismatch weights in each of TRL's four modes, by hand (the token_truncate
case with its metrics is in tests/rollout/test_vllm_engine.py)."""

import math

import pytest
import torch

from grpo_lab.spec.config import LossConfig
from grpo_lab.trainer.importance import off_policy_sequence_mask, tis_weights
from grpo_lab.trainer.loss import policy_loss

# row 0: token log-ratios 0.5, -1, 0 and a padded token whose e^100 must never form;
# row 1: log-ratios 1, 0 and two padded tokens
TRAINER = torch.tensor([[-1.0, -2.0, -0.5, -3.0], [0.0, 0.0, 0.0, 0.0]])
ENGINE = torch.tensor([[-1.5, -1.0, -0.5, -103.0], [-1.0, 0.0, 0.0, -50.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
E = math.exp


@pytest.mark.parametrize("mode, expected, capped_tokens", [
    ("token_truncate", [[1.5, E(-1), 1.0, 0.0], [1.5, 1.0, 0.0, 0.0]], 2),
    ("token_mask", [[0.0, E(-1), 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]], 2),
    # sequence ratios: e^(0.5 - 1 + 0) = e^-0.5 (under C), e^(1 + 0) = e (over C: every token of it)
    ("sequence_truncate", [[E(-0.5)] * 3 + [0.0], [1.5, 1.5, 0.0, 0.0]], 2),
    ("sequence_mask", [[E(-0.5)] * 3 + [0.0], [0.0, 0.0, 0.0, 0.0]], 2),
])
def test_mismatch_weights_hand_computed(mode, expected, capped_tokens):
    w, m = tis_weights(TRAINER, ENGINE, MASK, cap=1.5, mode=mode)
    assert torch.allclose(w, torch.tensor(expected))
    assert m["tis/capped_frac"] == pytest.approx(capped_tokens / 5)
    assert m["tis/weight_mean"] == pytest.approx(sum(map(sum, expected)) / 5)
    assert not w.requires_grad and torch.isfinite(w).all()


def test_off_policy_sequence_mask_drops_punished_sequences_the_policy_moved_away_from():
    sampling = torch.zeros(4, 3)
    # mean over trained tokens of sampling - logp: 0.6 (2 tokens), 0.2, 0.6, 0.9 (its third token is padding)
    logp = torch.tensor([[-0.6, -0.6, -5.0], [-0.2, -0.2, -0.2], [-0.6, -0.6, -0.6], [-0.9, -0.9, 4.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv = torch.tensor([[-1.0], [-1.0], [0.0], [2.0]])
    # drop only where A < 0 and the drift 0.6 > 0.5; A = 0 and A > 0 stay whatever the drift
    assert off_policy_sequence_mask(logp, sampling, adv, mask, 0.5).flatten().tolist() == [0.0, 1.0, 1.0, 1.0]


def test_the_off_policy_mask_leaves_the_kl_term_and_the_denominator():
    logp = torch.tensor([[-1.0, -1.0], [-0.1, -0.1]], requires_grad=True)
    sampling, ref = torch.zeros(2, 2), torch.full((2, 2), -0.5)
    loss, m = policy_loss(logp, logp.detach(), ref, torch.tensor([-1.0, -1.0]), torch.ones(2, 2), beta=0.1,
                          cfg=LossConfig(off_policy_mask=0.5), sampling_logp=sampling)
    loss.backward()
    # the first sequence drifted 1.0 > 0.5: its policy term (A / 4 per token at ratio 1) is gone, its KL stays
    dkl = lambda lp: 0.1 * (1 - math.exp(-0.5 - lp)) / 4  # noqa: E731  d/dlogp of beta * k3 / 4 tokens
    assert logp.grad.tolist() == [[pytest.approx(dkl(-1.0))] * 2, [pytest.approx(0.25 + dkl(-0.1))] * 2]
    assert m["loss/off_policy_frac"] == 0.5
