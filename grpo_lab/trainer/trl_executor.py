"""The TRL cell executor (`trainer: trl`): TRL's GRPOTrainer trains the run, and the run folder is
written as grpo-lab's trainer writes one (grpo_lab/rundir.py), so the sweep, analysis and report
read it the same way.

    GRPOConfig      spec/trl_map.grpo_config_keys: the run's settings and its tricks' declared switches
    prompts         the problems grpo-lab's curriculum draws for the seed, in order (trl_reward.py)
    reward_funcs    the task's own score and the configured reward functions (trl_reward.py), called
                    as grpo-lab calls them: the same rewards for the same text
    evals           grpo-lab's evaluator on the same test problems and sampling seeds, before
                    training and after every eval.every steps (trl_callback.py)
    checkpoints     TRL's checkpoint-<n> folders under <run>/trl, each with grpo-lab's books;
                    a new attempt resumes from the newest complete one (kill -9 included)

Phases timed: setup, rollout (generation), reward, train (the rest of TRL's optimizer steps:
reference and old log-probs, loss, backward, update), eval, checkpoint, idle. grpo-lab's alarms
watch each step's line (events.jsonl; an alarm in stop_on ends the run). Not yet: torchrun or
DeepSpeed, vLLM (trl_map refuses them).
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

import torch

from grpo_lab.models import load_card, weights_digest
from grpo_lab.rundir import BASE_EVAL, RunDir, Summary, TRL_DIR
from grpo_lab.spec.trl_map import grpo_config_keys, updates_per_step
from grpo_lab.trainer.alarms import AlarmMonitor
from grpo_lab.trainer.checkpoint import MetricsLog
from grpo_lab.trainer.evaluate import evaluate
from grpo_lab.trainer.final_eval import final_eval_or_warn
from grpo_lab.trainer.grpo import Clock, Preempted, Timer, begin
from grpo_lab.trainer.setup import EVAL_SEED, build_policy, device_hours, eval_problems
from grpo_lab.trainer.trl_callback import RunFolderCallback, TimedGRPOTrainer, last_checkpoint
from grpo_lab.trainer.trl_reward import BatchStats, drawn_problems, reward_funcs


class TRLBooks:
    """What grpo-lab keeps about a TRL run beside TRL's own state: evals, clocks, counters.
    Saved into every TRL checkpoint (trl_callback.BOOKS) and read back on resume."""

    def __init__(self, cfg, reward: BatchStats, clock: Clock, timer: Timer, saved: dict | None):
        saved = saved or {}
        if saved and saved.get("run_id") != cfg.run_id():
            raise RuntimeError(f"the TRL checkpoint belongs to run {saved.get('run_id')}, not {cfg.run_id()}: "
                               "use another --out")
        self.cfg, self.reward, self.clock, self.timer = cfg, reward, clock, timer
        self.steps = cfg.steps
        self.base_eval: dict | None = saved.get("base_eval")
        self.last_eval: dict = saved.get("last_eval") or {}
        self.start_step: int = saved.get("next_step", 0)
        reward.counters.update(saved.get("counters") or {})

    def eval_due(self, step: int) -> bool:
        return (step + 1) % self.cfg.eval.every == 0 or step + 1 == self.cfg.steps

    def step_metrics(self) -> dict[str, float]:
        """grpo-lab metrics of the step that TRL does not log: the batch's group stats, the schedule."""
        return {**self.reward.last, "sampling/group_size": self.cfg.sampling.group_size,
                "sampling/temperature": self.cfg.sampling.temperature, "kl/beta": self.cfg.kl.beta}

    def state(self, next_step: int) -> dict:
        return {"run_id": self.cfg.run_id(), "next_step": next_step, "base_eval": self.base_eval,
                "last_eval": self.last_eval, "timing": dict(self.timer.total), "wall_seconds": self.clock.wall(),
                "cpu_seconds": self.clock.cpu(), "counters": dict(self.reward.counters)}


class Evaluator:
    """grpo-lab's held-out eval of the model TRL trains (trainer/setup.RunState.evaluate's twin):
    the run's test problems, seed EVAL_SEED + step, per-problem records in eval/problems-<step>.json."""

    def __init__(self, cfg, tasks: dict, codec, model, out_dir: Path, books: TRLBooks, log: MetricsLog):
        from grpo_lab.rollout import make_engine

        self.cfg, self.tasks, self.codec, self.folder = cfg, tasks, codec, RunDir(out_dir)
        self.problems = eval_problems(cfg, tasks)
        device = next(model.parameters()).device
        self.devices = load_card(cfg.model).gpus if device.type == "cuda" else 1  # what final_eval records
        self.engine = make_engine("torch", model, codec, cfg)
        self.books, self.log = books, log

    def __call__(self, step: int, model=None) -> dict[str, float]:
        if model is not None:
            self.engine.sync_weights(model)
        metrics, examples, rows = evaluate(self.engine, self.codec, self.tasks, self.problems, self.cfg.eval,
                                           self.cfg.sampling.max_new_tokens, seed=EVAL_SEED + max(step, 0))
        self.folder.write_problems(BASE_EVAL if step < 0 else f"{step + 1:06d}", step, rows)
        if step >= 0:
            self.books.last_eval = metrics
            self.log.examples(step, examples)
        return metrics


def processing_class(card, codec):
    """The tokenizer TRL generates with: the model's own, or the tiny model's characters as one."""
    if card.kind == "tiny":
        from grpo_lab.models.char_tokenizer import char_tokenizer

        return char_tokenizer(codec)
    return plain_prompts(codec.tok)


def plain_prompts(tok):
    """`tok`, or a copy that adds no special token on encode. TRL encodes the prompt text with the
    tokenizer's defaults, and the prompt grpo-lab formats already holds the chat template's own
    BOS; a tokenizer that adds one more (Llama's, Mistral's) would train TRL on prompts grpo-lab's
    sampler and evaluator never see."""
    import copy

    from tokenizers import processors

    probe = "1 + 1"
    if tok(probe)["input_ids"] == tok(probe, add_special_tokens=False)["input_ids"]:
        return tok
    plain = copy.deepcopy(tok)
    plain.backend_tokenizer.post_processor = processors.Sequence([])  # where fast tokenizers add them
    if plain(probe)["input_ids"] != plain(probe, add_special_tokens=False)["input_ids"]:
        raise RuntimeError(f"{type(tok).__name__} adds special tokens to every prompt and they cannot be turned "
                           "off for TRL: run this model with trainer: grpo-lab")
    return plain


def grpo_args(cfg, keys: dict, out_dir: Path, device: torch.device):
    """GRPOConfig: the mapped keys, and what the executor fixes (checkpoints every
    checkpoint_every steps, a log line per optimizer step, no hub, no reporting)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(RunDir(out_dir) / TRL_DIR), use_cpu=device.type == "cpu", report_to="none",
        logging_steps=1, save_strategy="steps", save_steps=cfg.checkpoint_every * updates_per_step(keys),
        save_total_limit=None,  # the callback removes older checkpoints once a newer one is complete
        disable_tqdm=True, dataloader_num_workers=0, **keys)  # TRL loads the reference in the policy's dtype


def train(cfg, out_dir: Path, on_step=None, preempt=None, final_samples: int | None = None,
          on_phase=None) -> Summary:
    """Run (or resume) one run on TRL's GRPOTrainer; returns the summary written to summary.json.
    The executor interface of trainer/executors.py (docs/executors.md)."""
    from datasets import Dataset
    from transformers import PrinterCallback

    out_dir = Path(out_dir)
    folder, started = begin(cfg, out_dir, on_phase)
    keys = grpo_config_keys(cfg)
    device, card, tasks, policy, codec = build_policy(cfg)
    base_weights = weights_digest(policy)
    problems = drawn_problems(cfg, tasks)
    funcs, reward = reward_funcs(cfg, tasks, problems, keys.get("mask_truncated_completions", False), codec)
    checkpoint, saved = last_checkpoint(folder / TRL_DIR)
    saved = saved or {}
    timer = Timer(on_phase)
    timer.total.update(saved.get("timing") or {})
    clock = Clock(saved.get("wall_seconds", 0.0), saved.get("cpu_seconds", 0.0), *started)
    books = TRLBooks(cfg, reward, clock, timer, saved)
    log = MetricsLog(folder, keep_below=books.start_step)
    evaluator = Evaluator(cfg, tasks, codec, policy, out_dir, books, log)
    data = Dataset.from_list([{"prompt": codec.format_prompt(p.prompt, p.task), "uid": p.uid} for p in problems])
    monitor = AlarmMonitor(cfg.alarms, out_dir, books.start_step)
    callback = RunFolderCallback(books, timer, log, evaluator, monitor, updates_per_step(keys), on_step, preempt)
    trainer = TimedGRPOTrainer(model=policy, reward_funcs=funcs, args=grpo_args(cfg, keys, out_dir, device),
                               train_dataset=data, processing_class=processing_class(card, codec),
                               callbacks=[callback], timer=timer, stats=reward)
    trainer.remove_callback(PrinterCallback)  # it prints every log dict; the run folder has them
    timer.total["setup"] = timer.total.get("setup", 0.0) + time.perf_counter() - started[0]
    if books.base_eval is None:
        with timer("eval"):
            books.base_eval = evaluator(-1)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if callback.preempted_at is not None:
        raise Preempted(callback.preempted_at)
    summary = run_summary(cfg, books, timer, clock, device, card, base_weights, keys).model_copy(
        update={"stopped": callback.stop_reason is not None, "stop_reason": callback.stop_reason,
                "alarms": monitor.counts})
    folder.write_summary(summary)
    if final_samples:  # at the steps trained (an alarm may have stopped the run early), as grpo.py records it
        trained = trainer.state.global_step // updates_per_step(keys)
        final_eval_or_warn(evaluator, out_dir, final_samples, trained, model=trainer.model)
    return summary


def run_summary(cfg, books: TRLBooks, timer: Timer, clock: Clock, device, card, base_weights: str,
                keys: dict) -> Summary:
    """summary.json as grpo-lab's trainer writes it (setup.RunState.summary's fields)."""
    wall, final, base = clock.wall(), books.last_eval, books.base_eval or {}
    counts = books.reward.counters
    return Summary(
        run_id=cfg.run_id(), model=cfg.model, task=cfg.tasks, tricks=cfg.tricks, seed=cfg.seed, steps=cfg.steps,
        base=books.base_eval, final=final,
        delta_pass_at_1=final.get("eval/pass@1", 0.0) - base.get("eval/pass@1", 0.0),
        wall_seconds=wall, cpu_seconds=clock.cpu(),
        **device_hours(timer.total, wall, card.gpus if device.type == "cuda" else 1, device.type,
                       counts["effective_samples"]),
        tokens_generated=counts["tokens_generated"],
        # prompt and completion tokens forwarded, once per optimizer pass over them (as grpo-lab counts)
        tokens_trained=counts.get("tokens_forwarded", 0) * keys.get("num_iterations", 1),
        effective_samples=counts["effective_samples"],
        device=str(device), host=platform.node(), base_weights=base_weights,
        cpu_kernels=torch.backends.cpu.get_cpu_capability(),
    )
