"""TRL's GRPOTrainer writing grpo-lab's run folder: the timed trainer and the callback.

One grpo-lab step is one TRL generation batch and the `updates` optimizer steps TRL takes on it
(num_iterations x steps_per_generation; spec/trl_map.py). After each such block the callback
writes one metrics.jsonl line (grpo-lab's metric names, TRL's own under trl/), runs grpo-lab's
evaluator where grpo-lab's trainer would, runs grpo-lab's alarms on the line, calls `on_step`
(the worker's heartbeat) and, when an alarm in stop_on fired or the worker was asked to give the
devices back, has TRL checkpoint and stop there. Every TRL
checkpoint gets grpo-lab's books beside it (BOOKS: evals, clocks, counters), written after TRL's
own files, so a checkpoint folder holding BOOKS is complete.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from transformers import TrainerCallback
from trl import GRPOTrainer

from grpo_lab.rundir import TRL_BOOKS as BOOKS
from grpo_lab.util.files import write_json

# TRL's log keys under grpo-lab's metric names (analysis reads these); all TRL keys are kept as trl/<key>
RENAMES = {"reward": "reward/mean", "reward_std": "reward/std", "frac_reward_zero_std": "reward/zero_std_frac",
           "completions/mean_length": "length/mean", "completions/clipped_ratio": "length/truncated_frac",
           "entropy": "entropy/mean", "kl": "kl/mean", "loss": "loss/total", "grad_norm": "train/grad_norm",
           "learning_rate": "train/lr", "clip_ratio/region_mean": "loss/clip_frac"}
INNER = ("rollout", "reward")  # phases TimedGRPOTrainer times inside an optimizer step
LAST = {"loss", "grad_norm", "learning_rate"}  # of a block's updates, the last; other keys: the first's


class TimedGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with its generation and scoring timed into grpo-lab's Timer (rollout, reward);
    the rest of an optimizer step (reference and old log-probs, loss, backward, update) is train.
    `stats` (trl_reward.BatchStats) sees every generation batch's rewards as TRL combined them."""

    def __init__(self, *args, timer, stats, **kwargs):
        self.grpo_lab_timer, self.grpo_lab_stats = timer, stats
        super().__init__(*args, **kwargs)

    def _generate(self, *args, **kwargs):
        with self.grpo_lab_timer("rollout"):
            return super()._generate(*args, **kwargs)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        with self.grpo_lab_timer("reward"):
            per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            self.grpo_lab_stats(inputs, completions, completion_ids_list, per_func, self.reward_weights)
        return per_func


class RunFolderCallback(TrainerCallback):
    """Writes the run folder as TRL trains: see the module docstring. `books` is the executor's
    TRLBooks (evals, clocks, counters); `evaluate(step)` runs grpo-lab's eval after `step`;
    `monitor` is grpo-lab's AlarmMonitor (trainer/alarms.py) over each step's metrics line."""

    def __init__(self, books, timer, log, evaluate, monitor, updates: int, on_step=None, preempt=None):
        self.books, self.timer, self.log, self.evaluate, self.monitor = books, timer, log, evaluate, monitor
        self.stop_reason: str | None = None  # the alarm in alarms.stop_on that ended the run
        self.updates, self.on_step, self.preempt = updates, on_step, preempt
        self.block: dict[str, float] = {}
        self.eval_metrics: dict[str, float] = {}
        self.preempted_at: int | None = None
        self._begin = (0.0, 0.0, 0.0, 0.0)
        self._logged_at = time.perf_counter()

    def _inner(self) -> tuple[float, float]:
        """Wall and CPU seconds of the timed phases inside an optimizer step, so far."""
        return (sum(self.timer.total.get(p, 0.0) for p in INNER),
                sum(self.timer.cpu_step.get(p, 0.0) for p in INNER))

    def on_step_begin(self, args, state, control, **kw):
        self._begin = (time.perf_counter(), time.process_time(), *self._inner())

    def on_step_end(self, args, state, control, model=None, **kw):
        wall, cpu = time.perf_counter() - self._begin[0], time.process_time() - self._begin[1]
        inner_wall, inner_cpu = self._inner()
        self._add("train", wall - (inner_wall - self._begin[2]), cpu - (inner_cpu - self._begin[3]))
        if state.global_step % self.updates == 0:
            step = state.global_step // self.updates - 1
            if self.books.eval_due(step):
                with self.timer("eval"):
                    self.eval_metrics = self.evaluate(step, model)

    def on_log(self, args, state, control, logs=None, **kw):
        if not logs or "loss" not in logs:  # the closing train_runtime line is not a step
            return
        for key, value in logs.items():
            if key in LAST or key not in self.block:
                self.block[key] = value
        if state.global_step % self.updates:
            return
        self._step_done(state.global_step // self.updates - 1, control, kw.get("model"))
        self._logged_at = time.perf_counter()

    def _step_done(self, step: int, control, model) -> None:
        """The step's metrics line, its alarms (an alarm in stop_on ends the run here, evaluated
        where it stopped, as grpo-lab's trainer does), the heartbeat, and a preemption."""
        metrics = {**{RENAMES[k]: v for k, v in self.block.items() if k in RENAMES},
                   **{f"reward/{k.split('/')[1]}": v for k, v in self.block.items()  # each reward function's
                      if k.startswith("rewards/") and k.endswith("/mean")},
                   **{f"trl/{k}": v for k, v in self.block.items()}, **self.books.step_metrics(),
                   **self.eval_metrics, **self.timer.pop_step()}
        self.block, self.eval_metrics = {}, {}
        fired = self.monitor.observe(step, metrics)
        metrics["alarm/count"] = len(fired)
        self.stop_reason = self.monitor.stop_reason(step, fired)
        if self.stop_reason and "eval/pass@1" not in metrics:
            with self.timer("eval"):
                self.evaluate(step, model)
        self.log.write(step, metrics)
        if self.on_step:
            self.on_step(step, metrics)
        if self.stop_reason:
            control.should_save = control.should_training_stop = True
        elif self.preempt is not None and self.preempt() and step + 1 < self.books.steps:
            control.should_save = control.should_training_stop = True
            self.preempted_at = step + 1

    def on_save(self, args, state, control, **kw):
        """TRL wrote checkpoint-<global step>: add grpo-lab's books, then drop older checkpoints."""
        self._add("checkpoint", time.perf_counter() - self._logged_at, 0.0)
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        write_json(folder / BOOKS, self.books.state(state.global_step // self.updates))
        for old in Path(args.output_dir).glob("checkpoint-*"):
            if old != folder and _number(old) < state.global_step:
                shutil.rmtree(old, ignore_errors=True)

    def _add(self, phase: str, wall: float, cpu: float) -> None:
        """Seconds measured around TRL's own code into the Timer (what `with timer(phase)` adds)."""
        for book, value in ((self.timer.total, wall), (self.timer.step, wall), (self.timer.cpu_step, cpu)):
            book[phase] = book.get(phase, 0.0) + value


def _number(path: Path) -> int:
    try:
        return int(path.name.rsplit("-", 1)[1])
    except (IndexError, ValueError):
        return -1


def last_checkpoint(trl_dir: Path) -> tuple[Path | None, dict | None]:
    """The newest TRL checkpoint that holds grpo-lab's books (a kill -9 can leave a newer,
    incomplete one, which is ignored), and the books; (None, None) when there is none."""
    for folder in sorted(Path(trl_dir).glob("checkpoint-*"), key=_number, reverse=True):
        try:
            return folder, json.loads((folder / BOOKS).read_text())
        except (OSError, ValueError):
            continue
    return None, None
