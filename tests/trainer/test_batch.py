"""Teacher-forced log-probs: a group's shared prompt runs once, with the result of running every row."""

import torch

from grpo_lab.models.tiny import CharCodec, TinySpec, build
from grpo_lab.rollout.torch_engine import TorchEngine
from grpo_lab.trainer import batch as batch_mod
from grpo_lab.trainer.batch import build_batch, prompt_owners, token_logprobs


def test_prompt_owners_finds_runs_of_identical_prompts():
    p = torch.tensor([[0, 5, 6], [0, 5, 6], [7, 8, 9], [7, 8, 9], [7, 8, 9], [0, 5, 6]])
    first, owner = prompt_owners(p)
    assert first.tolist() == [0, 2, 5]  # a prompt seen again later is a new run: rows stay in order
    assert owner.tolist() == [0, 0, 1, 1, 1, 2]


def run_logprobs(model, batch, share: bool, monkeypatch):
    if not share:  # every row its own run: the one-forward path
        monkeypatch.setattr(batch_mod, "prompt_owners", lambda p: (torch.arange(len(p)), torch.arange(len(p))))
    model.zero_grad(set_to_none=True)
    logp, ent = token_logprobs(model, batch, 0.9, entropy="monitor")
    weights = torch.randn(logp.shape, generator=torch.Generator().manual_seed(0))
    (logp * weights).sum().backward()
    monkeypatch.undo()
    return logp.detach(), ent, [p.grad.clone() for p in model.parameters()]


def test_shared_prompt_forward_gives_the_same_logprobs_and_gradients(monkeypatch):
    codec = CharCodec()
    torch.manual_seed(0)
    model = build(TinySpec(layers=2, hidden=64, intermediate=128), codec)
    prompts = [codec.encode(s) for s in ("3+4+2=", "1=", "12+50-3=")]  # unequal: left padding
    ro = TorchEngine(model, codec.eos_id, codec.pad_id).generate(prompts, 4, 1.0, 1.0, 9, seed=1)
    batch = build_batch(ro, codec.pad_id, "cpu")
    assert len({len(c) for c in ro.completion_ids}) > 1  # unequal completions: right padding
    model.train()
    shared = run_logprobs(model, batch, True, monkeypatch)
    full = run_logprobs(model, batch, False, monkeypatch)
    torch.testing.assert_close(shared[0], full[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shared[1], full[1], atol=1e-5, rtol=1e-5)
    for a, b in zip(shared[2], full[2]):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    assert (shared[0] * batch.completion_mask).min() < 0 and (shared[0][batch.completion_mask == 0] == 0).all()
