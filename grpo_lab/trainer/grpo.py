"""The GRPO training loop. One step: generate -> score -> reference -> advantages -> loss -> update.

`train(cfg, out_dir)` sets up the run (or resumes it from out_dir/checkpoint.pt), runs the
steps, evaluates on held-out problems every `eval.every` steps, and writes metrics.jsonl and
summary.json. The math lives in advantages.py, loss.py and schedules.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from grpo_lab.rundir import RunDir, Summary
from grpo_lab.spec.config import RunConfig
from grpo_lab.trainer import checkpoint
from grpo_lab.trainer.final_eval import final_eval_or_warn
from grpo_lab.trainer.advantages import compute_advantages
from grpo_lab.trainer.alarms import AlarmMonitor, repetition_rate
from grpo_lab.trainer.batch import build_batch, forwarded_tokens, token_logprobs
from grpo_lab.trainer.importance import tis_weights
from grpo_lab.trainer.loss import kl_penalised_reward, masked_mean, policy_loss
from grpo_lab.trainer.schedules import beta_at, lr_factor, temperature_at
from grpo_lab.trainer.scoring import (
    component_means,
    loss_mask,
    merge_rounds,
    score_rollout,
    unique_answer_ratio,
)
from grpo_lab.trainer.setup import RunState, setup


class Timer:
    """Wall and process-CPU seconds per named phase, accumulated over the run (`timing/<phase>`,
    `cpu/<phase>`): on a shared CPU box the two disagree, and the report says so. `on_phase(name)`
    hears each phase as it starts: a slow step (SmolLM2 on CPU) shows where it is."""

    def __init__(self, on_phase: Callable[[str], None] | None = None):
        self.on_phase = on_phase
        self.total: dict[str, float] = {}
        self.step: dict[str, float] = {}
        self.cpu_step: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str):
        if self.on_phase:
            self.on_phase(phase)
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            dt, dc = time.perf_counter() - t0, time.process_time() - c0
            self.step[phase] = self.step.get(phase, 0.0) + dt
            self.total[phase] = self.total.get(phase, 0.0) + dt
            self.cpu_step[phase] = self.cpu_step.get(phase, 0.0) + dc

    def pop_step(self) -> dict[str, float]:
        out = {**{f"timing/{k}": v for k, v in self.step.items()}, **{f"cpu/{k}": v for k, v in self.cpu_step.items()}}
        self.step, self.cpu_step = {}, {}
        return out


def sample_groups(run: RunState, step: int, G: int, T: float, progress: float, timer: Timer):
    """Sample prompts_per_step groups; with dynamic sampling, replace zero-variance groups by
    fresh ones (up to max_refill_rounds rounds). Returns (problems, rollout, scored, dropped)."""
    cfg = run.cfg.sampling
    want, problems, rounds, dropped = cfg.prompts_per_step, [], [], 0
    for round_ in range(1 + (cfg.max_refill_rounds if cfg.dynamic_sampling else 0)):
        new = run.curriculum.sample(step, want - len(problems))
        prompts = [run.codec.encode(run.codec.format_prompt(p.prompt, p.task)) for p in new]
        with timer("rollout"):
            ro = run.engine.generate(prompts, G, T, cfg.top_p, cfg.max_new_tokens, seed=run.seed_for(step, round_))
        with timer("reward"):
            sc = score_rollout(run.tasks, new, ro, run.codec, run.cfg, progress)
        run.curriculum.retire(new, sc.raw.mean(dim=1).tolist())
        keep = list(range(len(new)))
        if cfg.dynamic_sampling:
            varied = [g for g in keep if float(sc.main[g].std()) > 0]
            if varied or round_ < cfg.max_refill_rounds:  # a last round of only ties keeps them all
                keep = varied
            dropped += len(new) - len(keep)
        problems += [new[g] for g in keep]
        rounds.append((ro, sc, keep, G))
        if len(problems) >= want:
            break
    rollout, scored = merge_rounds(rounds)
    return problems, rollout, scored, dropped


def micro_batches(batch, size: int | None) -> list[slice]:
    B = batch.input_ids.size(0)
    size = size or B
    return [slice(i, min(i + size, B)) for i in range(0, B, size)]


@torch.no_grad()
def logprobs_by_part(model, parts, T: float) -> list[torch.Tensor]:
    return [token_logprobs(model, part, T)[0] for part in parts]


def train_step(run: RunState, step: int, timer: Timer) -> dict[str, float]:
    cfg = run.cfg
    G = run.group_size.G
    beta = run.adaptive_kl.beta if run.adaptive_kl else beta_at(step, cfg.steps, cfg.kl)

    (problems, rollout, scored, dropped), T, staleness = next_batch(run, step, G, timer)
    batch = build_batch(rollout, run.codec.pad_id, run.device)
    slices = micro_batches(batch, cfg.optim.micro_batch)
    parts = [batch.rows(sl) for sl in slices]
    with timer("reference"):
        ref_logp = logprobs_by_part(run.reference.model, parts, T) if run.reference is not None else None
    kl_in_reward = cfg.kl.in_reward and ref_logp is not None
    with timer("train"):  # pre-update log-probs, computed once for whoever needs them
        # (with staleness the ratio's denominator is the sampler's log-probs: see update)
        need_old = kl_in_reward or (cfg.loss.inner_updates > 1 and not cfg.sampling.staleness)
        old_logp = logprobs_by_part(run.policy, parts, T) if need_old else None
    mask = loss_mask(batch, scored, rollout, run.codec, cfg)
    with timer("advantage"):
        main = scored.main
        if kl_in_reward:
            main = kl_penalised_reward(main, old_logp, ref_logp, [p.completion_mask for p in parts], beta,
                                       cfg.kl.estimator)
        adv, adv_metrics = compute_advantages(main, scored.shape, **cfg.advantage.model_dump())
    adv = adv.flatten().to(run.device)
    with timer("train"):
        masks = [mask[sl, : p.completion.size(1)] for sl, p in zip(slices, parts)]
        train_metrics = update(run, parts, [adv[sl] for sl in slices], masks, old_logp,
                               None if cfg.kl.in_reward else ref_logp, beta, T, step)
    after_update(run, step, problems, scored, train_metrics)

    effective = int(((mask.sum(1) > 0) & (adv.abs() > 0)).sum())
    run.tokens_generated += rollout.tokens_generated
    run.tokens_trained += batch.tokens * cfg.loss.inner_updates
    run.effective_samples += effective
    return {
        **sample_metrics(scored, rollout, batch, mask),
        "samples/effective": effective,
        "samples/dropped_groups": dropped,
        "sampling/group_size": scored.raw.size(1),  # the trained batch's: a stale one was sampled at an earlier G
        "sampling/temperature": T,
        "sampling/staleness": staleness,
        "kl/beta": beta,
        **adv_metrics,
        **train_metrics,
        **run.curriculum.metrics(step),
        **({"ref/drift": run.reference.drift(run.policy)} if run.reference is not None else {}),
    }


def next_batch(run: RunState, step: int, G: int, timer: Timer):
    """(the sampled groups step `step` trains on, their temperature, the updates since they were
    sampled). sampling.staleness k > 0 is asynchronous off-policy training (PipelineRL-k): each step
    samples, with the current policy, the batch of step + k and trains on the one sampled for it k
    updates earlier (the first step samples those of steps 0..k with the initial policy), so
    step t trains on a batch min(t, k) updates stale. Each batch keeps its step's seeds,
    temperature and progress, and none is sampled past the last step."""
    cfg = run.cfg
    # pending holds the batches of steps step .. step + len - 1, sampled and not yet trained on
    for s in range(step + len(run.pending), min(step + cfg.sampling.staleness, cfg.steps - 1) + 1):
        T = temperature_at(s, cfg.steps, cfg.sampling)
        run.pending.append((sample_groups(run, s, G, T, s / max(cfg.steps - 1, 1), timer), T, step))
    groups, T, sampled_at = run.pending.popleft()
    return groups, T, step - sampled_at


def after_update(run: RunState, step: int, problems, scored, train_metrics: dict) -> None:
    """Reference update, weight sync to the engine, and the controllers that watch the step."""
    if run.reference is not None:
        run.reference.update(run.policy, step)
    run.engine.sync_weights(run.policy)
    run.group_size.update(step, scored.raw.std(dim=1).mean().item())
    if run.adaptive_kl:
        run.adaptive_kl.update(train_metrics.get("kl/mean", 0.0))
    run.entropy.update(train_metrics["entropy/mean"])
    run.curriculum.observe(problems, scored.raw.mean(dim=1).tolist())


def sample_metrics(scored, rollout, batch, mask) -> dict[str, float]:
    """What the sampled groups looked like: rewards, format, diversity, lengths, masking."""
    group_std = scored.raw.std(dim=1)
    return {
        "reward/mean": scored.raw.mean().item(),
        "reward/std": scored.raw.std().item(),
        "reward/group_std": group_std.mean().item(),
        "reward/zero_std_frac": (group_std == 0).float().mean().item(),
        "reward/shaped_mean": (scored.main + scored.shape).mean().item(),
        **component_means(scored.components),  # reward/<label> of each configured reward function
        "format/ok_frac": scored.format_ok.float().mean().item(),
        "diversity/unique_answer_ratio": unique_answer_ratio(scored.answers),
        "diversity/repetition": repetition_rate(scored.texts),
        "length/mean": batch.completion_mask.sum(1).mean().item(),
        "length/truncated_frac": sum(s == "length" for s in rollout.stop) / len(rollout.stop),
        "mask/trained_token_frac": float(mask.sum() / batch.completion_mask.sum().clamp(min=1)),
        "samples/total": len(rollout.stop),
        "tokens/generated": rollout.tokens_generated,
        "tokens/trained": batch.tokens,
        "tokens/forwarded": forwarded_tokens(batch),
    }


def part_weights(parts, masks, mode: str) -> list[float]:
    """Weights that make the sum over micro-batches of aggregate(part) equal aggregate(batch)."""
    if mode == "token_mean":
        sizes = [float(m.sum()) for m in masks]
    else:  # seq_mean and token_sum_norm average over rows
        sizes = [float(p.input_ids.size(0)) for p in parts]
    total = sum(sizes) or 1.0
    return [s / total for s in sizes]


def update(run: RunState, parts, advs, masks, old_logp, ref_logp, beta: float, T: float, step: int) -> dict[str, float]:
    """`inner_updates` optimizer steps on one batch, gradients accumulated over micro-batches.
    Without precomputed old log-probs, the current ones detached stand in (ratio 1, policy
    gradient). Returns the first pass's metrics (about the sampled policy) and the last loss."""
    cfg = run.cfg
    lr = cfg.optim.lr * lr_factor(step, cfg.steps, cfg.optim)
    weights = part_weights(parts, masks, cfg.loss.aggregation)
    entropy_coef = run.entropy.applied()
    ent_mode = "grad" if entropy_coef else "monitor"
    run.policy.train()
    first: dict[str, float] = {}
    for inner in range(cfg.loss.inner_updates):
        run.backend.zero_grad()
        metrics: dict[str, float] = {}
        for i, (part, adv, mask, w) in enumerate(zip(parts, advs, masks, weights)):
            logp, entropy = token_logprobs(run.policy, part, T, entropy=ent_mode)
            # stale samples (sampling.staleness): the ratio is to the policy that sampled them
            old = part.engine_logp if cfg.sampling.staleness else old_logp[i] if old_logp is not None else logp.detach()
            is_w, tis = (tis_weights(old, part.engine_logp, mask, cfg.vllm.tis_cap, cfg.vllm.tis_mode)
                         if cfg.vllm.tis_cap else (None, {}))
            loss, m = policy_loss(logp, old, ref_logp[i] if ref_logp else None, adv, mask, beta=beta,
                                  cfg=cfg.loss, kl_estimator=cfg.kl.estimator, entropy=entropy,
                                  norm=cfg.sampling.max_new_tokens, is_weights=is_w, sampling_logp=part.engine_logp,
                                  entropy_coef=entropy_coef)
            m.update(tis)
            run.backend.backward(loss * w)
            if inner == 0:  # monitoring is about the sampled policy, before any update
                m["entropy/mean"] = masked_mean(entropy.detach(), part.completion_mask)
                m["rollout/logprob_diff"] = masked_mean((logp.detach() - part.engine_logp).abs(), part.completion_mask)
            for k, v in m.items():
                metrics[k] = metrics.get(k, 0.0) + w * v
        if inner == 0:
            first = metrics
        grad_norm = run.backend.step(lr)
    run.policy.eval()
    return {**first, **{k: v for k, v in metrics.items() if k.startswith("loss/")},
            "train/grad_norm": grad_norm, "train/grad_clip": cfg.optim.grad_clip or 0.0,
            "train/lr": lr, "loss/entropy_coef": entropy_coef}


class Preempted(Exception):
    """The run was asked to give up its devices (`preempt()` turned true): it checkpointed at the
    step boundary `next_step` and ended without a summary; the next attempt resumes there."""

    def __init__(self, next_step: int):
        super().__init__(f"preempted: checkpointed before step {next_step}")
        self.next_step = next_step


def train(cfg: RunConfig, out_dir: Path, on_step=None, preempt=None, final_samples: int | None = None,
          on_phase: Callable[[str], None] | None = None) -> Summary:
    """Run (or resume) one GRPO run; returns the summary also written to out_dir/summary.json.

    A step on which an alarm kind listed in `alarms.stop_on` fires is logged and checkpointed,
    then the run ends. When `preempt()` is true after a step (a signal the worker caught), the run
    checkpoints there and raises Preempted: steps are the unit that resumes bit-identically. Wall
    and phase seconds are carried over from the checkpoint of an earlier attempt, so the summary's
    device-hours cover the whole run (minus work lost after the last checkpoint of a killed
    attempt, which neither counts). `final_samples`: the sweep's eval design asks for the final
    policy's eval with that many completions per problem too (trainer/final_eval.py). `on_phase`
    hears each phase (setup, eval, rollout, reward, train, ...) as it starts."""
    out_dir = Path(out_dir)
    folder, started = begin(cfg, out_dir, on_phase)
    run = setup(cfg, out_dir)
    clock = Clock(run.wall_seconds, run.cpu_seconds, *started)
    timer = Timer(on_phase)
    timer.total.update(run.timing)
    timer.total["setup"] = timer.total.get("setup", 0.0) + time.perf_counter() - started[0]
    if run.base_eval is None:
        with timer("eval"):
            run.base_eval, _ = run.evaluate(-1, out_dir)
    log = checkpoint.MetricsLog(folder, keep_below=run.start_step)
    monitor = AlarmMonitor(cfg.alarms, out_dir, run.start_step)
    stop, trained = None, run.start_step
    for step in range(run.start_step, cfg.steps):
        trained = step + 1
        metrics = train_step(run, step, timer)
        if (step + 1) % cfg.eval.every == 0 or step + 1 == cfg.steps:
            metrics.update(_evaluate(run, step, out_dir, timer, log))
        metrics.update(timer.pop_step())
        fired = monitor.observe(step, metrics)
        metrics["alarm/count"] = len(fired)
        log.write(step, metrics)
        if on_step:
            on_step(step, metrics)
        stop = monitor.stop_reason(step, fired)
        leave = preempt is not None and preempt() and not stop and step + 1 < cfg.steps
        if leave or stop or (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
            run.timing, run.wall_seconds, run.cpu_seconds = dict(timer.total), clock.wall(), clock.cpu()
            with timer("checkpoint"):
                checkpoint.save(run, step + 1, out_dir)
        if leave:
            raise Preempted(step + 1)
        if stop:
            if "eval/pass@1" not in metrics:  # a stopped run is judged where it stopped, not earlier
                _evaluate(run, step, out_dir, timer, log)
            break
    summary = run.summary(timer.total, clock.wall(), stop, monitor.counts, clock.cpu())
    folder.write_summary(summary)
    if final_samples and run.backend.rank == 0:
        final_eval_or_warn(run, out_dir, final_samples, trained)
    return summary


def begin(cfg: RunConfig, out_dir: Path, on_phase: Callable[[str], None] | None) -> tuple[RunDir, tuple[float, float]]:
    """What every executor does first: the run folder with its config.json, the (wall, CPU) clock
    readings the attempt's seconds count from, and the first phase said."""
    folder = RunDir(out_dir)
    folder.write_config(cfg.model_dump(mode="json"))
    started = time.perf_counter(), time.process_time()
    if on_phase:
        on_phase("setup")
    return folder, started


@dataclass(frozen=True)
class Clock:
    """A run's wall and process-CPU seconds over its attempts: the totals its checkpoint carried
    (cpu None: a checkpoint from before CPU time was kept, so unknown) plus this attempt's since
    it started (perf_counter, process_time at the start)."""

    prior_wall: float
    prior_cpu: float | None
    wall_start: float
    cpu_start: float

    def wall(self) -> float:
        return self.prior_wall + time.perf_counter() - self.wall_start

    def cpu(self) -> float | None:
        return None if self.prior_cpu is None else self.prior_cpu + time.process_time() - self.cpu_start


def _evaluate(run: RunState, step: int, out_dir: Path, timer: Timer, log) -> dict[str, float]:
    """The eval after `step`: its metrics become the run's last eval, its examples are logged."""
    with timer("eval"):
        metrics, examples = run.evaluate(step, out_dir)
    run.last_eval = metrics
    log.examples(step, examples)
    return metrics
