"""Everything a run holds (model, engine, reference, training backend, controllers) and how it is built."""

from __future__ import annotations

import ctypes
import platform
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import torch

from grpo_lab.rundir import BASE_EVAL, RunDir, Summary
from grpo_lab.models import load_card, load_model, weights_digest
from grpo_lab.models.precision import set_head_precision
from grpo_lab.rollout import make_engine
from grpo_lab.spec.config import RunConfig
from grpo_lab.tasks import make_task, task_options
from grpo_lab.trainer import checkpoint
from grpo_lab.trainer.backend import Backend, make_backend, same_on_all_ranks
from grpo_lab.trainer.curriculum import Curriculum
from grpo_lab.trainer.evaluate import evaluate
from grpo_lab.trainer.reference import Reference
from grpo_lab.trainer.schedules import ENTROPY_SCHEDULES, AdaptiveKL, GroupSize

EVAL_SEED = 10_007  # test problems are the same for every run, whatever its seed
SHOTS_SEED = 20_011  # prompt_shots' solved problems: the same for every run, whatever its seed


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


@dataclass
class RunState:
    cfg: RunConfig
    device: torch.device
    tasks: dict
    policy: torch.nn.Module
    codec: object
    engine: object
    reference: Reference | None
    backend: Backend
    curriculum: Curriculum
    group_size: GroupSize
    adaptive_kl: AdaptiveKL | None
    entropy: object  # the entropy bonus's controller (schedules.ENTROPY_SCHEDULES)
    eval_problems: dict
    start_step: int = 0
    devices: int = 1  # devices the run holds: the card's `gpus` on CUDA, one process otherwise
    base_eval: dict | None = None
    timing: dict = field(default_factory=dict)
    wall_seconds: float = 0.0  # wall time of the run up to the last checkpoint, over all attempts
    cpu_seconds: float | None = 0.0  # process CPU time up to the last checkpoint, over all attempts (None: unknown)
    tokens_generated: int = 0
    tokens_trained: int = 0
    effective_samples: int = 0
    last_eval: dict = field(default_factory=dict)
    base_weights: str | None = None  # models.weights_digest of the policy before training
    # sampled batches not yet trained on, oldest first (sampling.staleness > 0): (groups, temperature, step sampled)
    pending: deque = field(default_factory=deque)

    def seed_for(self, step: int, round_: int = 0) -> int:
        """Sampling seed of a step: a resumed run samples what the uninterrupted run would, and
        data-parallel ranks sample different completions (rank 0 samples what one process would)."""
        return (self.cfg.seed * 1_000_003 + step * 101 + round_ + self.backend.rank * 100_000_007) % 2**31

    def evaluate(self, step: int, out_dir: Path) -> tuple[dict, list]:
        """Evaluate and write the per-problem records to out_dir/eval/problems-<step>.json
        (`base` before training). The eval seed depends on the step only, so every arm and seed
        samples its test completions from the same stream (common random numbers)."""
        metrics, examples, per_problem = evaluate(self.engine, self.codec, self.tasks, self.eval_problems,
                                                  self.cfg.eval, self.cfg.sampling.max_new_tokens,
                                                  seed=EVAL_SEED + max(step, 0))
        if self.backend.rank == 0:
            name = BASE_EVAL if step < 0 else f"{step + 1:06d}"  # named by steps trained, as the summary counts
            RunDir(out_dir).write_problems(name, step, per_problem)
        return metrics, examples

    def summary(self, timing: dict, wall: float, stop_reason: str | None = None, alarms: dict | None = None,
                cpu: float | None = None) -> Summary:
        final = self.last_eval
        return Summary(
            run_id=self.cfg.run_id(),
            model=self.cfg.model, task=self.cfg.tasks, tricks=self.cfg.tricks, seed=self.cfg.seed,
            steps=self.cfg.steps,
            base=self.base_eval, final=final,
            delta_pass_at_1=final.get("eval/pass@1", 0.0) - (self.base_eval or {}).get("eval/pass@1", 0.0),
            stopped=stop_reason is not None, stop_reason=stop_reason,
            alarms=alarms or {},
            wall_seconds=wall, cpu_seconds=cpu,
            **device_hours(timing, wall, self.devices, self.device.type, self.effective_samples),
            tokens_generated=self.tokens_generated,
            tokens_trained=self.tokens_trained,
            effective_samples=self.effective_samples,
            device=str(self.device), host=platform.node(), base_weights=self.base_weights,
            cpu_kernels=torch.backends.cpu.get_cpu_capability(),  # AVX512 / AVX2 change the tiny warm start
        )


def device_hours(timing: dict, wall: float, devices: int, device_type: str, effective_samples: int) -> dict:
    """What the run cost, as the Summary's cost fields: hours(phase) = seconds(phase) * devices /
    3600 (docs/design.md section 5).

    `idle` = wall - the timed phases (logging, alarms, Python between phases), so the phases sum
    to wall * devices / 3600, the run's device-hours. Off CUDA a device is one process (one core
    for tiny models) and the unit says so. Money is left to the sweep layer, which knows the
    hardware's price: price_per_gpu_hour stays None here.
    """
    seconds = {**timing, "idle": max(wall - sum(timing.values()), 0.0)}
    total = wall * devices / 3600
    return {
        "devices": devices,
        "unit": "gpu-hours" if device_type == "cuda" else f"device-hours ({device_type})",
        "phase_seconds": seconds,
        "device_hours_by_phase": {k: v * devices / 3600 for k, v in seconds.items()},
        "device_hours": total,
        "sampling_share": (seconds.get("rollout", 0.0) + seconds.get("reward", 0.0)) / wall if wall > 0 else 0.0,
        "cost_per_effective_sample_hours": total / effective_samples if effective_samples else None,
        "price_per_gpu_hour": None,
    }


def keep_freed_memory() -> None:
    """On glibc, keep freed memory in the process instead of handing it back to the kernel.

    A step allocates and frees the same activations every step. By default glibc serves blocks
    above a small dynamic threshold with fresh mappings and trims the heap top on free, so each
    step page-faults its activations in again: 8-10 s of system time per SmolLM2-135M GRPO step
    here, a third of the step. With these settings blocks up to 32 MB (glibc's ceiling) come from
    the heap, which is never trimmed, and later steps reuse the first step's pages.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, musl): nothing to tune
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    libc.mallopt(m_mmap_threshold, 32 << 20)
    libc.mallopt(m_trim_threshold, 2**31 - 1)
    libc.mallopt(m_top_pad, 64 << 20)


def needs_reference(cfg: RunConfig) -> bool:
    return cfg.kl.beta > 0 or cfg.kl.schedule == "adaptive"


def build_policy(cfg: RunConfig):
    """Seeds, device, threads, the run's tasks and its policy in eval mode: what training and
    preflight sampling share. Returns (device, card, tasks, policy, codec)."""
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.device)
    card = load_card(cfg.model)
    if device.type == "cpu":
        keep_freed_memory()
        if card.cpu_threads:
            torch.set_num_threads(card.cpu_threads)
    tasks = {n: make_task(n, register=cfg.register, **task_options(cfg, n)) for n in cfg.tasks}
    policy, codec = load_model(card, list(tasks.values()), device, getattr(torch, cfg.dtype))
    if cfg.prompt_shots:
        codec = codec.with_shots(demonstrations(cfg, tasks))
    set_head_precision(policy, cfg.head_precision)
    policy.eval()
    return device, card, tasks, policy, codec


def demonstrations(cfg: RunConfig, tasks: dict) -> dict[str, list[tuple[str, str]]]:
    """Per task (keyed as its problems name it, Problem.task), cfg.prompt_shots (prompt, solution)
    pairs of its training problems with a solution, at the run's difficulty: the same shots for
    every run of a config, whatever its seed. ValueError for a task without solutions to show."""
    out = {}
    for name, task in tasks.items():
        drawn = task.problems("train", 8 * cfg.prompt_shots, seed=SHOTS_SEED, difficulty=cfg.difficulty)
        solved = [p for p in drawn if p.solution.strip()][:cfg.prompt_shots]
        if len(solved) < cfg.prompt_shots:
            raise ValueError(f"prompt_shots: task {name} has {len(solved)} training problems with a solution "
                             f"to show of {len(drawn)} drawn; set prompt_shots: {len(solved)} or give its records "
                             "their solutions")
        out[solved[0].task] = [(q.prompt, q.solution) for q in solved]
    return out


def eval_problems(cfg: RunConfig, tasks: dict) -> dict:
    """The run's test problems per task: the same for every run of a task, whatever its seed."""
    return {n: t.problems("test", cfg.eval.problems, seed=EVAL_SEED, difficulty=cfg.difficulty) for n, t in tasks.items()}


def pool_size(cfg: RunConfig) -> int:
    """Problems per curriculum pool: a step's prompts for every step, in [256, 4096]. Both trainers'
    curricula are sized here (trl_reward.drawn_problems), so they draw the same problems for a seed."""
    return min(max(cfg.steps * cfg.sampling.prompts_per_step, 256), 4096)


def setup(cfg: RunConfig, out_dir: Path) -> RunState:
    device, card, tasks, policy, codec = build_policy(cfg)
    base_weights = weights_digest(policy)  # before a backend wraps them or a checkpoint replaces them
    engine = make_engine(cfg.engine, policy, codec, cfg)
    backend = make_backend(cfg, policy)
    run = RunState(
        cfg=cfg, device=device, tasks=tasks, policy=policy, codec=codec, engine=engine,
        reference=Reference(policy, cfg.reference) if needs_reference(cfg) else None,
        backend=backend, devices=card.gpus if device.type == "cuda" else 1,
        # data-parallel ranks draw different prompts; rank 0 draws what one process would
        curriculum=Curriculum(list(tasks.values()), cfg.curriculum, cfg.steps, cfg.seed + 1_000_003 * backend.rank,
                              cfg.difficulty, pool_size(cfg)),
        group_size=GroupSize(cfg.sampling),
        adaptive_kl=AdaptiveKL(cfg.kl.beta, cfg.kl.target, cfg.kl.horizon) if cfg.kl.schedule == "adaptive" else None,
        entropy=ENTROPY_SCHEDULES[cfg.loss.entropy_schedule](cfg.loss),
        eval_problems=eval_problems(cfg, tasks),
        base_weights=base_weights,
    )
    checkpoint.load(run, out_dir)
    if not same_on_all_ranks(backend, run.start_step):  # a kill between two ranks' checkpoint writes
        raise RuntimeError(f"ranks resumed at different steps: keep only the older rank checkpoints under {out_dir}")
    return run
