"""Rollout and training throughput of grpo-lab's torch engine and trainer, printed as a table.

    python benchmarks/throughput.py [--models tiny,smollm2-135m] [--device cpu|cuda] [--dtype float32]

For each model: tokens/s of the project's engine vs `transformers` generate() on the same model
and batch (ratio measured in the same run), training tokens/s (forward + backward), peak memory.
For smollm2-135m, one full GRPO step at 4 prompts x G=8 x 64 new tokens (beta 0.04, one inner
update) against its FLOP floor: (6N per trained token + 2N per reference token + 2N per
generated token) / the fp32 matmul rate measured here (median of three steps). The trainer runs
a group's shared prompt once, so it also prints the stricter floor of the tokens it forwards.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from grpo_lab.models import load_card, load_model
from grpo_lab.rollout.torch_engine import TorchEngine, left_pad
from grpo_lab.spec.config import RunConfig
from grpo_lab.tasks import make_task
from grpo_lab.trainer.batch import build_batch, token_logprobs

DEFAULT_THREADS = torch.get_num_threads()


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def matmul_rate(device, dtype, n: int = 2048, reps: int = 10) -> float:
    a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
    a @ b
    sync(device)
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n**3 * reps / (time.perf_counter() - t)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, reps: int = 2):
    """Median wall seconds of `reps` calls after one warm-up call, and the last call's output."""
    fn()
    times = []
    for _ in range(reps):
        sync(device)
        t = time.perf_counter()
        out = fn()
        sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def bench_model(name: str, device, dtype, prompts_n: int, G: int, new: int, reps: int) -> dict:
    card = load_card(name)
    # Both sides run with the thread count the trainer uses for this model (1 for tiny).
    torch.set_num_threads(card.cpu_threads or DEFAULT_THREADS)
    task = make_task("math", register=card.prompt_register)
    model, codec = load_model(card, [task], device, dtype)
    model.eval()
    N = sum(p.numel() for p in model.parameters())
    problems = task.problems("train", prompts_n, seed=0)
    prompts = [codec.encode(codec.format_prompt(p.prompt)) for p in problems]
    engine = TorchEngine(model, codec.eos_id, codec.pad_id)
    # Both sides generate exactly `new` tokens per row (EOS suppressed by max length only) so
    # the token counts are equal; the engine's early exit is not what is measured here.
    eos = codec.eos_id
    engine.eos_id = -1
    t_eng, ro = timed(lambda: engine.generate(prompts, G, 1.0, 1.0, new, seed=0), device, reps)
    engine.eos_id = eos
    rows = [p for p in prompts for _ in range(G)]
    ids, mask = left_pad(rows, codec.pad_id, device)

    def hf():
        with torch.no_grad():
            return model.generate(input_ids=ids, attention_mask=mask.long(), do_sample=True, temperature=1.0,
                                  top_p=1.0, top_k=0, max_new_tokens=new, min_new_tokens=new, pad_token_id=codec.pad_id)

    t_hf, _ = timed(hf, device, reps)
    tokens = len(rows) * new
    batch = build_batch(ro, codec.pad_id, device)

    def fwd_bwd():
        model.zero_grad(set_to_none=True)
        logp, _ = token_logprobs(model, batch, 1.0)
        logp.mean().backward()

    t_train, _ = timed(fwd_bwd, device, reps)
    return {"model": name, "params": N, "engine_tok_s": tokens / t_eng, "hf_tok_s": tokens / t_hf,
            "ratio": t_hf / t_eng, "train_tok_s": batch.tokens / t_train, "peak_gb": peak_rss_gb()}


def grpo_step_vs_floor(device) -> dict:
    """One GRPO step of the real trainer on smollm2-135m, natural-language math, vs its FLOP floor."""
    from grpo_lab.trainer.grpo import Timer, train_step
    from grpo_lab.trainer.setup import setup

    cfg = RunConfig(model="smollm2-135m", task="math", steps=10, device=str(device),
                    sampling={"prompts_per_step": 4, "group_size": 8, "max_new_tokens": 64},
                    kl={"beta": 0.04}, loss={"inner_updates": 1}, eval={"problems": 4, "samples": 1, "k": [1]})
    run = setup(cfg, Path(tempfile.mkdtemp()))
    run.engine.eos_id = -1  # always 64 new tokens, so the floor's token count is exact
    N = sum(p.numel() for p in run.policy.parameters())
    rate = matmul_rate(device, torch.float32)
    train_step(run, 0, Timer())  # warm-up: first-touch allocations, fused-weight build
    steps = []
    for step in range(1, 4):  # the median of three steps (prompts, so token counts, differ a little)
        timer = Timer()
        t = time.perf_counter()
        m = train_step(run, step, timer)
        wall = time.perf_counter() - t
        gen, trained, forwarded = m["tokens/generated"], m["tokens/trained"], m["tokens/forwarded"]
        floor = (6 * N * trained + 2 * N * trained + 2 * N * gen) / rate
        # The trainer runs each group's prompt once, so it forwards fewer tokens than it trains on;
        # the floor of that smaller work is the stricter yardstick.
        strict = (8 * N * forwarded + 2 * N * gen) / rate
        steps.append({"generated": gen, "trained": trained, "forwarded": forwarded, "floor_s": floor,
                      "strict_floor_s": strict, "strict_ratio": wall / strict, "step_s": wall,
                      "ratio": wall / floor, "phases": timer.pop_step()})
    median = sorted(steps, key=lambda r: r["ratio"])[1]
    return {"N": N, "rate_gflops": rate / 1e9, **median, "ratios": [r["ratio"] for r in steps], "peak_gb": peak_rss_gb()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tiny,smollm2-135m")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--skip-step", action="store_true")
    args = ap.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    console = Console()
    table = Table(title=f"rollout and training throughput ({device}, {args.dtype})")
    for col in ("model", "params", "engine tok/s", "generate() tok/s", "engine / generate()", "train tok/s", "peak RSS GB"):
        table.add_column(col, justify="right")
    for name in args.models.split(","):
        shape = (16, 8, 16, 15) if name == "tiny" else (4, 8, 64, 3)  # prompts, G, new tokens, timed reps
        r = bench_model(name, device, dtype, *shape)
        table.add_row(r["model"], f"{r['params'] / 1e6:.2f}M", f"{r['engine_tok_s']:.0f}", f"{r['hf_tok_s']:.0f}",
                      f"{r['ratio']:.2f}x", f"{r['train_tok_s']:.0f}", f"{r['peak_gb']:.2f}")
    console.print(table)
    if "smollm2-135m" in args.models and not args.skip_step:
        s = grpo_step_vs_floor(device)
        t = Table(title="GRPO step (median of 3), smollm2-135m, 4 prompts x G=8 x 64 new tokens, beta 0.04, mu=1")
        for col in ("N", "matmul GFLOP/s", "generated", "trained (=ref) tokens", "forwarded", "floor s", "step s",
                    "step / floor", "step / floor of forwarded", "peak RSS GB"):
            t.add_column(col, justify="right")
        t.add_row(f"{s['N'] / 1e6:.1f}M", f"{s['rate_gflops']:.0f}", str(s["generated"]), str(s["trained"]),
                  str(s["forwarded"]), f"{s['floor_s']:.1f}", f"{s['step_s']:.1f}", f"{s['ratio']:.2f}",
                  f"{s['strict_ratio']:.2f}", f"{s['peak_gb']:.2f}")
        console.print(t)
        console.print("step / floor of the three steps: " + ", ".join(f"{r:.2f}" for r in s["ratios"]))
        console.print("phases of the median step: " + ", ".join(f"{k} {v:.2f}s" for k, v in s["phases"].items()))


if __name__ == "__main__":
    sys.exit(main())
