import torch

from grpo_lab.models.tiny import CharCodec, TinySpec, build
from grpo_lab.rollout.torch_engine import TorchEngine
from grpo_lab.trainer import batch as bt


def plain(h, w, b, t, T):
    logp_all = torch.log_softmax(torch.nn.functional.linear(h, w, b).float() / T, dim=-1)
    return logp_all.gather(-1, t[:, None]).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)


def test_chosen_logprob_matches_log_softmax_values_and_gradients():
    torch.manual_seed(0)
    for T in (1.0, 0.7):
        h = torch.randn(37, 16, requires_grad=True)
        w = torch.randn(300, 16, requires_grad=True)
        b = torch.randn(300, requires_grad=True)
        t = torch.randint(300, (37,))
        g = torch.randn(37)
        lp, ent = bt.ChosenLogprob.apply(h, w, b, t, T, True)
        ref, ref_ent = plain(h, w, b, t, T)
        assert torch.allclose(lp, ref, atol=1e-5) and torch.allclose(ent, ref_ent, atol=1e-4)
        assert not ent.requires_grad
        got = torch.autograd.grad((lp * g).sum(), (h, w, b))
        want = torch.autograd.grad((ref * g).sum(), (h, w, b))
        for a, e in zip(got, want):
            assert torch.allclose(a, e, atol=1e-5)


def test_rows_with_shorter_prompts_run_unpadded_with_the_same_result():
    codec = CharCodec()
    model = build(TinySpec(layers=2, hidden=64, intermediate=128), codec).eval()
    ro = TorchEngine(model, codec.eos_id, codec.pad_id).generate(
        [codec.encode(s) for s in ("3+4+2=", "1=", "12+50-3=")], 3, 0.8, 1.0, 12, seed=3)
    batch = bt.build_batch(ro, codec.pad_id, "cpu")
    assert bt.prompt_runs(batch) == [slice(0, 3), slice(3, 6), slice(6, 9)]
    for entropy in ("none", "monitor", "grad"):
        split = bt.token_logprobs(model, batch, 0.8, entropy)
        whole = bt._token_logprobs(model, batch, 0.8, entropy)
        m = batch.completion_mask
        assert float(((split[0] - whole[0]).abs() * m).max()) < 1e-5
        if entropy != "none":
            assert float(((split[1] - whole[1]).abs() * m).max()) < 1e-4
