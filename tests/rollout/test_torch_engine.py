import torch

from grpo_lab.models.tiny import CharCodec, TinySpec, build
from grpo_lab.rollout.torch_engine import TorchEngine, sample_tokens
from grpo_lab.trainer.batch import build_batch, token_logprobs


def tiny_engine():
    codec = CharCodec()
    model = build(TinySpec(layers=2, hidden=64, intermediate=128), codec).eval()
    return model, codec, TorchEngine(model, codec.eos_id, codec.pad_id)


def test_sampling_logprobs_equal_teacher_forced_logprobs_on_left_padded_batch():
    model, codec, engine = tiny_engine()
    prompts = [codec.encode(s) for s in ("3+4+2=", "1=", "12+50-3=")]
    for fast in (True, False):
        engine.fast = fast
        ro = engine.generate(prompts, 3, 0.8, 1.0, 12, seed=3)
        batch = build_batch(ro, codec.pad_id, "cpu")
        logp, _ = token_logprobs(model, batch, 0.8)
        diff = ((logp - batch.engine_logp).abs() * batch.completion_mask).max()
        assert diff < 1e-4, (fast, float(diff))
        assert ro.group == [0, 0, 0, 1, 1, 1, 2, 2, 2]


def test_stop_reasons_and_eos_rows_dropped():
    model, codec, engine = tiny_engine()
    with torch.no_grad():  # make EOS overwhelmingly likely after the first token
        model.lm_head.weight.zero_()
        model.get_decoder().norm.weight.fill_(1.0)
    ro = engine.generate([codec.encode("1+1=")], 4, 1.0, 1.0, 5, seed=0)
    assert all(len(c) >= 1 for c in ro.completion_ids)
    for c, s in zip(ro.completion_ids, ro.stop):
        assert (s == "eos") == (c[-1] == codec.eos_id)
        assert s == "eos" or len(c) == 5


def test_seeded_generation_is_reproducible():
    _, codec, engine = tiny_engine()
    p = [codec.encode("2+2=")]
    a = engine.generate(p, 4, 1.0, 1.0, 8, seed=7)
    b = engine.generate(p, 4, 1.0, 1.0, 8, seed=7)
    assert a.completion_ids == b.completion_ids


def test_top_p_keeps_only_the_nucleus():
    logits = torch.tensor([[10.0, 9.0, -10.0, -10.0]])
    gen = torch.Generator().manual_seed(0)
    toks = {int(sample_tokens(logits, 1.0, 0.5, gen)[0][0]) for _ in range(50)}
    assert toks == {0}
