"""GDPO against TRL's own code path. The gdpo trick's TRL switch (multi_objective_aggregation=
normalize_then_sum) runs in a real TRL step on the tiny test model, with the per-function rewards of
each generation batch replaced by known values of unequal scales; the advantages TRL computes from
them are grpo-lab's normalize_then_sum followed by its batch_std normaliser (the trick's settings),
to float32 rounding at TRL's epsilon and within the stated epsilon difference (1e-4 vs 1e-6) at
grpo-lab's own. Needs trl==1.16.0 (the dev extra)."""

import pytest
import torch

grpo_trainer = pytest.importorskip("trl.trainer.grpo_trainer", exc_type=ImportError)

from grpo_lab.spec.tricks import get_trick  # noqa: E402
from grpo_lab.trainer.advantages import NORMALIZERS, REWARD_COMBINERS  # noqa: E402
from grpo_lab.trainer.trl_executor import train  # noqa: E402
from tests.conftest import tiny_cfg  # noqa: E402


def _known_rewards(batch: int, funcs: int, gen: torch.Generator) -> torch.Tensor:
    """[batch, funcs]: a pass/fail column and columns of growing spread, so a plain weighted sum would
    let the widest one rank the group, and normalise-then-sum differs from it."""
    columns = [torch.bernoulli(torch.full((batch,), 0.5), generator=gen)]
    columns += [torch.randn(batch, generator=gen) * 5.0 ** k for k in range(1, funcs)]
    return torch.stack(columns, dim=1)


def test_gdpo_advantages_are_trls_normalize_then_sum(tmp_path, monkeypatch):
    gdpo = get_trick("gdpo")
    assert gdpo.settings["reward"]["combine"] == "normalize_then_sum"
    # two main reward functions, as the trick's contract runs it (its `needs`)
    cfg = tiny_cfg(trainer="trl", steps=1, tricks=["gdpo"], reward=gdpo.needs["reward"],
                   eval={"every": 1, "problems": 2, "samples": 1, "k": [1]})
    gen = torch.Generator().manual_seed(0)
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    weights: list[torch.Tensor] = []

    def calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        weights.append(self.reward_weights.clone())
        return _known_rewards(len(prompts), len(self.reward_funcs), gen)

    score = grpo_trainer.GRPOTrainer._generate_and_score_completions

    def generate_and_score(self, inputs):
        out = score(self, inputs)
        seen.append((self.grpo_lab_last_rewards, out["advantages"].detach().clone()))
        return out

    def timed_rewards(self, *args):
        self.grpo_lab_last_rewards = calculate_rewards(self, *args)
        return self.grpo_lab_last_rewards

    monkeypatch.setattr(grpo_trainer.GRPOTrainer, "_calculate_rewards", timed_rewards)
    monkeypatch.setattr(grpo_trainer.GRPOTrainer, "_generate_and_score_completions", generate_and_score)
    train(cfg, tmp_path / "run")

    G = cfg.sampling.group_size
    assert len(seen) == cfg.steps and weights[0].tolist() == pytest.approx([f.weight for f in cfg.reward.functions])
    for rewards, trl_advantages in seen:
        per_group = rewards.view(-1, G, rewards.size(1))
        assert per_group.size(0) == cfg.sampling.prompts_per_step

        def ours(eps: float) -> torch.Tensor:
            combined = REWARD_COMBINERS["normalize_then_sum"](per_group, weights[0], eps)
            return NORMALIZERS[cfg.advantage.normalization](combined, eps).flatten()

        assert torch.allclose(ours(1e-4), trl_advantages, rtol=1e-5, atol=1e-6)
        # the one stated difference, TRL's 1e-4 on each std against 1e-6 here, stays that small
        assert (ours(1e-6) - trl_advantages).abs().max() < 1e-3 * trl_advantages.abs().max()
        # and the combination acts: a weighted sum then the same normaliser ranks differently
        summed = NORMALIZERS[cfg.advantage.normalization]((per_group * weights[0]).sum(-1), 1e-4).flatten()
        assert (summed - trl_advantages).abs().max() > 0.1
