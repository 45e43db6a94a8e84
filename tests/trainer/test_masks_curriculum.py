import torch

from grpo_lab.models.tiny import CharCodec
from grpo_lab.rollout.base import Rollout
from grpo_lab.spec.config import CurriculumConfig, RunConfig
from grpo_lab.tasks.base import Problem
from grpo_lab.trainer.batch import build_batch, code_token_mask
from grpo_lab.trainer.curriculum import Curriculum
from grpo_lab.trainer.loss import policy_loss
from grpo_lab.trainer.scoring import Scored, loss_mask


class FakeTask:
    """Two difficulty levels of constant problems (the curriculum only needs problems())."""
    name, register, levels = "math", "compact", 2

    def problems(self, split, n, seed, difficulty=None):
        return [Problem(f"p{difficulty}", "math", f"{difficulty}=", "0", "0", difficulty)] * n


def test_two_stage_curriculum_is_adaptive_before_40_percent_then_uniform():
    cur = Curriculum([FakeTask()], CurriculumConfig(mode="two_stage", switch_frac=0.4), 100, 0, None, 4)
    assert cur.mode_at(39) == "adaptive" and cur.mode_at(40) == "uniform"
    p0, p1 = cur.pools[("math", 0)][0], cur.pools[("math", 1)][0]
    cur.observe([p0, p1], [0.0, 1.0])  # level 0 is failing, level 1 is solved
    w = cur.weights(10)
    assert w[("math", 0)] > 1.0 > w[("math", 1)]
    assert cur.weights(50) == {("math", 0): 1.0, ("math", 1): 1.0}
    picks = [p.difficulty for p in cur.sample(10, 400)]
    assert picks.count(0) > 3 * picks.count(1)


def rollout_of(codec, completions, stops):
    return Rollout([codec.encode("1=")] * len(completions), [codec.encode(c) for c in completions],
                   [[0.0] * len(c) for c in completions], stops, [0] * len(completions))


def test_format_masked_samples_carry_no_gradient():
    codec = CharCodec()
    ro = rollout_of(codec, ["12", "x?", "7"], ["eos", "eos", "length"])
    batch = build_batch(ro, codec.pad_id, "cpu")
    scored = Scored(torch.zeros(1, 3), torch.zeros(1, 3), torch.zeros(1, 3),
                    torch.tensor([[True, False, True]]), [[None] * 3], ["12", "x?", "7"])
    cfg = RunConfig(reward={"format": "mask", "mask_truncated": True})
    mask = loss_mask(batch, scored, ro, codec, cfg)
    assert mask.sum(1).tolist() == [2.0, 0.0, 0.0]  # bad format and truncated rows leave the loss
    logp = torch.randn(3, 2, requires_grad=True)
    loss, _ = policy_loss(logp, logp.detach(), None, torch.tensor([1.0, -1.0, 2.0]), mask, beta=0.0, cfg=cfg.loss)
    loss.backward()
    assert torch.all(logp.grad[1:] == 0) and torch.all(logp.grad[0] != 0)


def test_code_token_mask_keeps_only_code_inside_the_fence():
    codec = CharCodec()
    text = "Here:\n```python\nx+1\n```\nDone."
    ids = codec.encode(text) + [codec.eos_id]
    m = code_token_mask(codec, ids, codec.eos_id)
    kept = "".join(ch for ch, keep in zip(text, m) if keep)
    assert kept == "x+1\n" and m[-1] == 1.0
    assert code_token_mask(codec, codec.encode("3*x+1"), codec.eos_id) == [1.0] * 5


def test_one_pool_size_sizes_both_trainers_curricula_so_they_draw_the_same_problems():
    from grpo_lab.trainer.setup import pool_size
    from grpo_lab.trainer.trl_reward import drawn_problems

    class Distinct(FakeTask):  # a pool of distinct problems, so the draws tell pools apart
        def problems(self, split, n, seed, difficulty=None):
            return [Problem(f"p{difficulty}-{seed}-{i}", "math", f"{i}=", "0", "0", difficulty) for i in range(n)]

    cfg = RunConfig(steps=3, sampling={"prompts_per_step": 8}, curriculum={"mode": "uniform"})
    assert [pool_size(cfg.model_copy(update={"steps": s})) for s in (1, 100, 10_000)] == [256, 800, 4096]
    ours = Curriculum([Distinct()], cfg.curriculum, cfg.steps, cfg.seed, cfg.difficulty, pool_size(cfg))
    drawn = drawn_problems(cfg, {"math": Distinct()})
    assert drawn == [p for s in range(3) for p in ours.sample(s, 8)] and len({p.uid for p in drawn}) > 8
