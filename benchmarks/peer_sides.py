"""One side of the TRL comparison (benchmarks/peer_trl.py), in its own process; prints one JSON line.

    python benchmarks/peer_sides.py {grpo-lab,trl} {speed,learn} [--steps N --seed S --lr LR --problems P]

The workload is grpo-lab's RunConfig (`workload`), and both sides take what they share from it:
SmolLM2-135M fp32 from grpo-lab's cache, natural-language math at level 0 through the model's chat
template, 4 prompts x G=8 x 64 new tokens, beta 0.04, one inner update, AdamW (0.9, 0.99), grad
clip 1, constant lr. TRL is fed exactly the problems grpo-lab's curriculum draws, step by step, and
scored by the same task code; both are evaluated by grpo-lab's evaluation (the same test problems
and sampling seeds), so the pass@1 numbers differ only by the training.

speed: every completion is exactly 64 tokens (grpo-lab: no EOS; TRL: min_new_tokens=64); the first
step is a warm-up, the next `steps` are timed from step start to step end.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from grpo_lab.spec.config import RunConfig

G, PROMPTS, NEW, BETA = 8, 4, 64, 0.04


def workload(steps: int, seed: int, lr: float, problems: int) -> RunConfig:
    return RunConfig(model="smollm2-135m", task="math", difficulty=0, seed=seed, steps=steps, device="cpu",
                     sampling={"prompts_per_step": PROMPTS, "group_size": G, "max_new_tokens": NEW},
                     kl={"beta": BETA}, loss={"inner_updates": 1}, optim={"lr": lr},
                     checkpoint_every=10_000, eval={"every": 10_000, "problems": problems, "samples": 4, "k": [1]})


def grpo_lab_speed(cfg: RunConfig) -> dict:
    from grpo_lab.trainer.grpo import Timer, train_step
    from grpo_lab.trainer.setup import setup

    run = setup(cfg, Path(tempfile.mkdtemp()))
    run.engine.eos_id = -1  # no EOS: exactly 64 new tokens, as TRL's min_new_tokens gives
    times = []
    for step in range(cfg.steps + 1):
        t = time.perf_counter()
        train_step(run, step, Timer())
        times.append(time.perf_counter() - t)
    return {"side": "grpo-lab", "step_s": times[1:]}


def grpo_lab_learn(cfg: RunConfig, out: Path) -> dict:
    from grpo_lab.trainer.grpo import train

    t = time.perf_counter()
    summary = train(cfg, out)
    return {"side": "grpo-lab", "base": summary.base["eval/pass@1"], "final": summary.final["eval/pass@1"],
            "wall_s": time.perf_counter() - t, "out": str(out)}


def trl_dataset(run, steps: int):
    """The problems grpo-lab's curriculum draws at each step, in order, as TRL prompt rows."""
    from datasets import Dataset

    assert run.cfg.curriculum.mode == "uniform"  # draws depend on the seed only, not on rewards
    drawn = [p for step in range(steps) for p in run.curriculum.sample(step, PROMPTS)]
    return Dataset.from_list([{"prompt": run.codec.format_prompt(p.prompt), "uid": p.uid} for p in drawn]), drawn


def trl_trainer(cfg: RunConfig, run, steps: int, speed: bool, out: Path):
    from trl import GRPOConfig, GRPOTrainer

    from grpo_lab.models import cache_dir
    from grpo_lab.models.smollm import smollm2_cache_path

    data, drawn = trl_dataset(run, steps)
    by_uid = {p.uid: p for p in drawn}
    task = run.tasks["math"]

    def reward(prompts, completions, uid, **_):
        return [s.reward for s in task.score([by_uid[u] for u in uid], completions)]

    args = GRPOConfig(
        output_dir=str(out), use_cpu=True, bf16=False, fp16=False, seed=cfg.seed, max_steps=steps,
        learning_rate=cfg.optim.lr, lr_scheduler_type="constant", warmup_steps=0, adam_beta1=0.9, adam_beta2=0.99,
        weight_decay=0.0, max_grad_norm=1.0, beta=BETA, num_iterations=1, num_generations=G,
        per_device_train_batch_size=PROMPTS * G, gradient_accumulation_steps=1, steps_per_generation=1,
        max_completion_length=NEW, temperature=1.0, top_p=1.0, top_k=0, loss_type="dapo", shuffle_dataset=False,
        generation_kwargs={"min_new_tokens": NEW} if speed else {}, logging_steps=1, report_to="none",
        save_strategy="no", dataloader_num_workers=0, disable_tqdm=True, model_init_kwargs={"dtype": "float32"},
        gradient_checkpointing=False,  # TRL's default trades time for memory; grpo-lab keeps activations
    )
    model = str(smollm2_cache_path(cache_dir()))
    return GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=data,
                       processing_class=run.codec.tok)


def step_times(trainer) -> list[float]:
    """Seconds of every optimizer step: generation, reference, loss, backward and update."""
    from transformers import TrainerCallback

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *a, **k):
            self.t = time.perf_counter()

        def on_step_end(self, *a, **k):
            times.append(time.perf_counter() - self.t)

    trainer.add_callback(Clock())
    return times


def trl_speed(cfg: RunConfig) -> dict:
    from grpo_lab.trainer.setup import setup

    run = setup(cfg, Path(tempfile.mkdtemp()))
    trainer = trl_trainer(cfg, run, cfg.steps + 1, speed=True, out=Path(tempfile.mkdtemp()))
    del run  # its policy copy is not needed while TRL trains
    times = step_times(trainer)
    trainer.train()
    return {"side": "trl", "step_s": times[1:]}


def trl_learn(cfg: RunConfig, out: Path) -> dict:
    """TRL trains; grpo-lab's RunState evaluates before (its own policy) and after (TRL's weights)."""
    from grpo_lab.trainer.setup import setup

    t = time.perf_counter()
    run = setup(cfg, out)
    base, _ = run.evaluate(-1, out)
    trainer = trl_trainer(cfg, run, cfg.steps, speed=False, out=out / "trl")
    trainer.train()
    curve = [{"step": e["step"] - 1, "reward": e["reward"]} for e in trainer.state.log_history if "reward" in e]
    (out / "trl_curve.json").write_text(json.dumps(curve))
    with torch.no_grad():
        run.policy.load_state_dict(trainer.model.state_dict())
    run.engine.sync_weights(run.policy)
    final, _ = run.evaluate(cfg.steps - 1, out)
    return {"side": "trl", "base": base["eval/pass@1"], "final": final["eval/pass@1"],
            "wall_s": time.perf_counter() - t, "out": str(out)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("side", choices=["grpo-lab", "trl"])
    ap.add_argument("mode", choices=["speed", "learn"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-6)
    ap.add_argument("--problems", type=int, default=64)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    cfg = workload(a.steps, a.seed, a.lr, a.problems)
    out = a.out or Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    if a.mode == "speed":
        result = grpo_lab_speed(cfg) if a.side == "grpo-lab" else trl_speed(cfg)
    else:
        result = grpo_lab_learn(cfg, out) if a.side == "grpo-lab" else trl_learn(cfg, out)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
