"""Checkpoints and the metrics log, both safe against a kill -9 at any instant.

A checkpoint is written to a temp file and renamed over the old one, so there is always one
complete checkpoint. On resume the metrics log is cut back to the checkpointed step, so the
resumed run appends exactly the lines the uninterrupted run would have written.
"""

from __future__ import annotations

import json
import random
from collections import deque
from pathlib import Path

import torch

from grpo_lab.rundir import CHECKPOINT, COMPLETIONS, METRICS, RunDir
from grpo_lab.util.files import atomic_write

NAME = CHECKPOINT


def save(run, next_step: int, out_dir: Path) -> None:
    state = {
        "next_step": next_step,
        "run_id": run.cfg.run_id(),
        "policy": run.policy.state_dict(),
        "optimizer": run.backend.state_dict(),
        "reference": run.reference.model.state_dict() if run.reference is not None else None,
        "curriculum": run.curriculum.state_dict(),
        "group_size": run.group_size.state_dict(),
        "adaptive_kl": run.adaptive_kl.state_dict() if run.adaptive_kl else None,
        "entropy": run.entropy.state_dict(),
        "pending": list(run.pending),
        "base_eval": run.base_eval,
        "last_eval": run.last_eval,
        "timing": run.timing,
        "wall_seconds": run.wall_seconds,
        "cpu_seconds": run.cpu_seconds,
        "counters": [run.tokens_generated, run.tokens_trained, run.effective_samples],
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate()},
    }
    atomic_write(Path(out_dir) / NAME, lambda handle: torch.save(state, handle), durable=True)


class CorruptCheckpointError(RuntimeError):
    """A checkpoint that cannot be read. Retrying reads the same bytes, so the sweep does not retry
    it (runners/base.NON_RETRYABLE); the message says how to fix it."""


def read(path: Path, device) -> dict:
    try:
        state = torch.load(path, map_location=device, weights_only=False)
    except Exception as exc:  # truncated, overwritten or not a torch file: all unreadable the same way
        raise CorruptCheckpointError(
            f"checkpoint {path} cannot be read ({type(exc).__name__}: {str(exc)[:200]}). It is damaged "
            f"(a full disk, a cut copy?): delete it to restart this run from step 0 (rm {path}), or put "
            f"back an intact copy, then run again; retrying as it is cannot succeed") from None
    if not isinstance(state, dict) or not {"next_step", "run_id", "policy"} <= set(state):
        raise CorruptCheckpointError(f"checkpoint {path} is not a grpo-lab checkpoint (no next_step, run_id, "
                                     f"policy): delete it (rm {path}) to restart this run from step 0")
    return state


def load(run, out_dir: Path) -> bool:
    """Restore `run` from out_dir's checkpoint if there is one for the same config."""
    path = out_dir / NAME
    if not path.exists():
        return False
    state = read(path, run.device)
    if state["run_id"] != run.cfg.run_id():
        raise RuntimeError(f"{path} belongs to run {state['run_id']}, not {run.cfg.run_id()}: use another --out")
    run.policy.load_state_dict(state["policy"])
    run.backend.load_state_dict(state["optimizer"])
    if run.reference is not None and state["reference"] is not None:
        run.reference.model.load_state_dict(state["reference"])
    run.curriculum.load_state_dict(state["curriculum"])
    run.group_size.load_state_dict(state["group_size"])
    if run.adaptive_kl and state["adaptive_kl"]:
        run.adaptive_kl.load_state_dict(state["adaptive_kl"])
    if state.get("entropy"):  # checkpoints from before the entropy controller have none
        run.entropy.load_state_dict(state["entropy"])
    run.pending = deque(state.get("pending", []))
    run.base_eval, run.last_eval, run.timing = state["base_eval"], state["last_eval"], state["timing"]
    run.wall_seconds = state.get("wall_seconds", sum(run.timing.values()))  # a checkpoint without it: a lower bound
    run.cpu_seconds = state.get("cpu_seconds")  # None: a checkpoint from before it was kept, so unknown
    run.tokens_generated, run.tokens_trained, run.effective_samples = state["counters"]
    torch.set_rng_state(state["rng"]["torch"].cpu())
    random.setstate(state["rng"]["python"])
    run.start_step = state["next_step"]
    run.engine.sync_weights(run.policy)
    return True


class MetricsLog:
    """metrics.jsonl (one line per step) and completions.jsonl (eval samples) of a run folder."""

    def __init__(self, folder: RunDir, keep_below: int):
        self.path = folder / METRICS
        self.examples_path = folder / COMPLETIONS
        for p in (self.path, self.examples_path):
            if p.exists():
                kept = [ln for ln in p.read_text().splitlines() if ln.strip() and self._step(ln) < keep_below]
                p.write_text("".join(ln + "\n" for ln in kept))

    @staticmethod
    def _step(line: str) -> int:
        try:
            return json.loads(line)["step"]
        except (ValueError, KeyError):
            return 1 << 62  # a torn last line from a kill: drop it

    def write(self, step: int, metrics: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, **metrics}) + "\n")

    def examples(self, step: int, rows: list[dict]) -> None:
        with self.examples_path.open("a") as f:
            for row in rows:
                f.write(json.dumps({"step": step, **row}) + "\n")
