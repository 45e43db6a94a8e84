"""A finished run's final checkpoint evaluated again with more completions per problem: the
eval-only attempt that `--decide`'s eval design (analysis/eval_design.py) asks for.

The completions are fresh (their own sampling stream, not the run's last eval extended), the
problems are the run's own test problems, and the stream is the same for every run of a sweep, so
arms sharing a seed index still share prompts and sampling seeds (common random numbers). The
record (RunDir.final_eval) holds the metrics, per-problem rows and the device-hours it cost. A run
that trains after the design was chosen is evaluated so at the end of its own attempt
(final_eval_in_run: no second model load); a finished one by an eval-only attempt (final_eval).
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

from grpo_lab.rollout import make_engine
from grpo_lab.rundir import CHECKPOINT, RunDir
from grpo_lab.spec.config import RunConfig
from grpo_lab.trainer import checkpoint
from grpo_lab.trainer.evaluate import evaluate, pass_at_k
from grpo_lab.trainer.setup import EVAL_SEED, build_policy, eval_problems

FINAL_EVAL_SEED = EVAL_SEED + 7_919_000  # apart from every in-training eval's stream (EVAL_SEED + step)


def measure(cfg: RunConfig, engine, codec, tasks: dict, samples: int) -> tuple[dict, list]:
    """(metrics, per-problem rows) of the policy behind `engine` on the run's test problems with
    `samples` fresh completions each, from the sweep-wide stream FINAL_EVAL_SEED. Drawn in blocks
    of the run's own eval size (each block its own seed), so memory stays what the run's evals
    needed, whatever the multiplier."""
    block = max(1, min(cfg.eval.samples, samples))
    problems = eval_problems(cfg, tasks)
    acc: dict[tuple[str, str], dict] = {}
    for j, start in enumerate(range(0, samples, block)):
        eval_cfg = cfg.eval.model_copy(update={"samples": min(block, samples - start), "k": [1], "log_completions": 0})
        _, _, rows = evaluate(engine, codec, tasks, problems, eval_cfg, cfg.sampling.max_new_tokens,
                              seed=FINAL_EVAL_SEED + 1009 * j)
        for r in rows:
            a = acc.setdefault((r["task"], r["uid"]), {"task": r["task"], "uid": r["uid"], "samples": 0, "passes": 0,
                                                      "reward_sum": 0.0})
            a["samples"] += r["samples"]
            a["passes"] += r["passes"]
            a["reward_sum"] += r["reward_mean"] * r["samples"]
    rows = [{"task": a["task"], "uid": a["uid"], "samples": a["samples"], "passes": a["passes"],
             "reward_mean": a["reward_sum"] / a["samples"]} for a in acc.values()]
    return summarise(rows, [k for k in cfg.eval.k if k <= samples]), rows


def summarise(rows: list[dict], ks: list[int]) -> dict:
    """eval/<task>/pass@k and reward_mean per task, and their means over tasks as eval/<metric>,
    from per-problem rows (the unbiased pass@k of evaluate.pass_at_k)."""
    per_task: dict[str, dict[str, float]] = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == task]
        per_task[task] = {**{f"pass@{k}": sum(pass_at_k(r["samples"], r["passes"], k) for r in mine) / len(mine)
                             for k in ks},
                          "reward_mean": sum(r["reward_mean"] for r in mine) / len(mine)}
    metrics = {f"eval/{task}/{key}": v for task, m in per_task.items() for key, v in m.items()}
    for key in next(iter(per_task.values()), {}):
        metrics[f"eval/{key}"] = sum(m[key] for m in per_task.values()) / len(per_task)
    return metrics


def write_record(folder: RunDir, samples: int, step: int, metrics: dict, rows: list, wall: float, devices: int,
                 in_attempt: bool) -> dict:
    """The record; `in_attempt`: made by the training attempt itself, whose hours already hold it
    (device_hours is then 0: the sweep's books count each hour once)."""
    record = {"samples": samples, "step": step, "metrics": metrics, "rows": rows, "wall_seconds": wall,
              "devices": devices, "device_hours": 0.0 if in_attempt else wall * devices / 3600,
              "in_attempt": in_attempt}
    folder.write_final_eval(samples, record)
    return record


def final_eval_in_run(run, out_dir: Path, samples: int, step: int) -> dict:
    """At the end of training, in the training process: the policy is in memory, so no setup."""
    t0 = time.perf_counter()
    metrics, rows = measure(run.cfg, run.engine, run.codec, run.tasks, samples)
    return write_record(RunDir(out_dir), samples, step, metrics, rows, time.perf_counter() - t0, run.devices, True)


def final_eval_or_warn(run, out_dir: Path, samples: int, step: int, model=None) -> None:
    """final_eval_in_run at the end of a training attempt (either trainer's), after its summary is
    written: a failure only warns (the trained run stands; the driver's eval-only attempt tries
    again). `model`: weights trained outside run.engine (TRL's trainer), synced into it first."""
    try:
        if model is not None:
            run.engine.sync_weights(model)
        final_eval_in_run(run, out_dir, samples, step)
    except Exception as exc:
        warnings.warn(f"{out_dir}: the final eval at {samples} completions per problem failed "
                      f"({type(exc).__name__}: {exc}); the sweep will ask for it again", stacklevel=3)


def final_eval(run_dir: str | Path, samples: int, in_attempt: bool = False) -> dict:
    """Evaluate run_dir's final checkpoint with `samples` completions per problem and write the
    record; a record already there is returned as it is (the eval is done once). `in_attempt`:
    inside the attempt that trained the run (a multi-process run, which cannot make it in its
    ranks), whose hours already hold it."""
    folder = RunDir(run_dir)
    done = folder.final_eval(samples)
    if done is not None:
        return done
    summary = folder.summary()
    if summary is None:
        raise RuntimeError(f"{folder.path}: no finished run to evaluate again (no summary.json)")
    if not folder.has_checkpoint():
        raise RuntimeError(f"{folder.path}: the run's final checkpoint is gone (was {CHECKPOINT} deleted to save "
                           "disk?): its final eval cannot be redone; train it again in a fresh folder")
    t0 = time.perf_counter()
    cfg = RunConfig.model_validate(folder.config())
    device, card, tasks, policy, codec = build_policy(cfg)
    if cfg.trainer == "trl":
        policy, step = _trl_final_policy(folder, cfg, policy, device)
    else:
        state = checkpoint.read(folder / CHECKPOINT, device)
        if state["run_id"] != cfg.run_id():
            raise RuntimeError(f"{folder / CHECKPOINT} belongs to run {state['run_id']}, not {cfg.run_id()}")
        policy.load_state_dict(state["policy"])
        step = state["next_step"]
    policy.eval()
    engine = make_engine(cfg.engine, policy, codec, cfg)
    engine.sync_weights(policy)
    metrics, rows = measure(cfg, engine, codec, tasks, samples)
    devices = card.gpus if device.type == "cuda" else 1
    return write_record(folder, samples, step, metrics, rows, time.perf_counter() - t0, devices, in_attempt)


def _trl_final_policy(folder: RunDir, cfg: RunConfig, policy, device):
    """(the policy of a finished trainer: trl run's newest TRL checkpoint, the steps it trained):
    the checkpoint folder is a saved model of the policy's class (trainer/trl_executor.py)."""
    from grpo_lab.models.loading import from_pretrained
    from grpo_lab.rundir import TRL_DIR
    from grpo_lab.trainer.trl_callback import last_checkpoint

    path, books = last_checkpoint(folder / TRL_DIR)
    if path is None or books.get("run_id") != cfg.run_id():
        raise RuntimeError(f"{folder.path}: no complete TRL checkpoint of run {cfg.run_id()} under {TRL_DIR}/")
    return from_pretrained(type(policy), path, dtype=policy.dtype).to(device), books["next_step"]
