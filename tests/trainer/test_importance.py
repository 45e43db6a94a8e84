"""The sampler/trainer mismatch weights in each of TRL's four modes, by hand (the token_truncate
case with its metrics is in tests/rollout/test_vllm_engine.py)."""

import math

import pytest
import torch

from grpo_lab.trainer.importance import tis_weights

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
