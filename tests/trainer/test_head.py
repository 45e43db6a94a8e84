"""The fused, chunked LM-head log-prob against the plain log-softmax over full logits."""

import torch

from grpo_lab.trainer import head
from grpo_lab.trainer.head import chosen_logprobs


def plain(h, w, b, c, T):
    logp_all = torch.log_softmax(torch.nn.functional.linear(h, w, b) / T, dim=-1)
    return logp_all.gather(-1, c[:, None]).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)


def test_values_entropy_and_gradients_match_the_plain_path(monkeypatch):
    monkeypatch.setattr(head, "CHUNK_ELEMENTS", 3 * 50)  # 3 rows per chunk: 11 rows -> 4 chunks, last short
    g = torch.Generator().manual_seed(0)
    h = torch.randn(11, 16, generator=g, dtype=torch.float64)
    w = torch.randn(50, 16, generator=g, dtype=torch.float64)
    b = torch.randn(50, generator=g, dtype=torch.float64)
    c = torch.randint(0, 50, (11,), generator=g)
    coef = torch.randn(11, generator=g, dtype=torch.float64)  # a loss that weighs rows differently
    grads = []
    for fn in (plain, lambda *a: chosen_logprobs(*a, entropy=True)):
        leaves = [t.clone().requires_grad_(True) for t in (h, w, b)]
        logp, ent = fn(*leaves, c, 0.7)
        (logp * coef).sum().backward()
        grads.append((logp.detach(), ent.detach(), *[t.grad for t in leaves]))
    for ours, ref in zip(grads[1], grads[0]):
        torch.testing.assert_close(ours, ref)
    assert grads[1][0].max() < 0  # log-probs of a 50-way softmax


def test_no_bias_no_entropy_and_tied_weight_gradient_accumulates():
    g = torch.Generator().manual_seed(1)
    emb = torch.randn(7, 4, generator=g, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([1, 2, 3])
    hid = torch.nn.functional.embedding(ids, emb) * 2.0  # the weight is both embedding and head
    logp, ent = chosen_logprobs(hid, emb, None, torch.tensor([3, 0, 6]), 1.0)
    assert ent is None
    logp.sum().backward()
    emb2 = emb.detach().clone().requires_grad_(True)
    ref, _ = plain(torch.nn.functional.embedding(ids, emb2) * 2.0, emb2, None, torch.tensor([3, 0, 6]), 1.0)
    ref.sum().backward()
    torch.testing.assert_close(emb.grad, emb2.grad)


def test_fp32_compute_from_bf16_weights_matches_the_plain_path_on_the_upcast_values(monkeypatch):
    from grpo_lab.models.precision import Float32Head

    monkeypatch.setattr(head, "CHUNK_ELEMENTS", 3 * 50)
    g = torch.Generator().manual_seed(2)
    h, w, b = (torch.randn(*s, generator=g).bfloat16() for s in ((11, 16), (50, 16), (50,)))
    c = torch.randint(0, 50, (11,), generator=g)
    ref = plain(*(t.double() for t in (h, w, b)), c, 0.7)[0]  # exact on the bf16 values
    leaves = [t.clone().requires_grad_(True) for t in (h, w, b)]
    ours, _ = chosen_logprobs(*leaves, c, 0.7, compute=torch.float32)
    ours.sum().backward()
    bf16, _ = chosen_logprobs(h, w, b, c, 0.7)  # logits rounded to bf16 first
    error, bf16_error = ((ours.double() - ref) / ref).abs().max(), ((bf16.double() - ref) / ref).abs().max()
    assert ours.dtype == torch.float32 and error < 1e-6 and bf16_error > 100 * error
    assert [t.grad.dtype for t in leaves] == [torch.bfloat16] * 3  # gradients in the weights' dtype
    dense = [t.double().requires_grad_(True) for t in (h, w, b)]
    plain(*dense, c, 0.7)[0].sum().backward()
    for ours_grad, ref_grad in zip((t.grad for t in leaves), (t.grad for t in dense)):
        torch.testing.assert_close(ours_grad.double(), ref_grad, rtol=2e-2, atol=2e-2)  # bf16 storage of the grad
    module = torch.nn.Linear(16, 50).bfloat16()
    wrapped = Float32Head(module)
    assert wrapped.weight is module.weight and wrapped(h).dtype == torch.float32
