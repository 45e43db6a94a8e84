"""The run folder: the one contract between the trainer that writes a run and everyone who reads
it (the worker and the sweep driver, tune, the MLflow mirror, analysis, the report, `status`).
Its file names and its readers live here; nobody else opens these files by name.

    config.json        the resolved run config (its hash is the run id)
    metrics.jsonl      one line per step, namespaced keys (appended; cut back on resume)
    completions.jsonl  at each eval, prompts with sampled completions and rewards
    events.jsonl       alarm events
    eval/problems-<step>.json   per-problem records of an eval (step zero-padded; "base" before training)
    summary.json       written once, when the run ends: base and final eval, hours per phase, ...
    heartbeat.json     the worker's progress after every step (attempt, started, updated, step, steps)
    result-<n>.json    what attempt n's worker reported (status, error, summary, wall seconds, host)
    attempt-<n>.log    attempt n's output (local runner)
    checkpoint.pt      the latest checkpoint (trainer/checkpoint.py)
    .lock              held by the attempt running in the folder

JSON files are replaced atomically (a reader never sees half a file); a JSONL reader skips a torn
last line (a run killed mid-write).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo_lab.util.files import read_json, write_json

CONFIG, METRICS, COMPLETIONS, EVENTS = "config.json", "metrics.jsonl", "completions.jsonl", "events.jsonl"
SUMMARY, HEARTBEAT, CHECKPOINT, EVAL = "summary.json", "heartbeat.json", "checkpoint.pt", "eval"
LOCK = ".lock"
BASE_EVAL = "base"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Rows of a JSONL file ([] when missing); a torn last line is skipped."""
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


class RunDir:
    """One run's folder."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # -- readers: None (or []) when the file is missing or half-written --------------------------
    def config(self) -> dict | None:
        return read_json(self.path / CONFIG)

    def summary(self) -> dict | None:
        return read_json(self.path / SUMMARY)

    def heartbeat(self) -> dict | None:
        return read_json(self.path / HEARTBEAT)

    def metrics(self) -> list[dict]:
        return read_jsonl(self.path / METRICS)

    def events(self) -> list[dict]:
        return read_jsonl(self.path / EVENTS)

    def completions(self) -> list[dict]:
        return read_jsonl(self.path / COMPLETIONS)

    def eval_files(self) -> list[Path]:
        """The per-problem files of the evals after training, in step order."""
        return sorted(p for p in (self.path / EVAL).glob("problems-*.json") if p.stem != f"problems-{BASE_EVAL}")

    def problems(self) -> dict | None:
        """The final eval's {"step", "rows"} (None before the first eval after training)."""
        files = self.eval_files()
        return read_json(files[-1]) if files else None

    def attempt_log(self, attempt: int) -> Path:
        return self.path / f"attempt-{attempt}.log"

    def result(self, attempt: int) -> dict | None:
        return read_json(self.path / f"result-{attempt}.json")

    def finished(self) -> bool:
        return (self.path / SUMMARY).exists()

    def has_checkpoint(self) -> bool:
        return (self.path / CHECKPOINT).exists()

    # -- writers ---------------------------------------------------------------------------------
    def write_config(self, config: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.path / CONFIG, config)

    def write_summary(self, summary: dict) -> None:
        write_json(self.path / SUMMARY, summary)

    def write_result(self, attempt: int, result: dict) -> None:
        write_json(self.path / f"result-{attempt}.json", result)

    def write_heartbeat(self, beat: dict) -> None:
        write_json(self.path / HEARTBEAT, beat)

    def write_problems(self, name: str, step: int, rows: list[dict]) -> None:
        """An eval's per-problem records; `name` is the zero-padded step or BASE_EVAL."""
        (self.path / EVAL).mkdir(exist_ok=True)
        write_json(self.path / EVAL / f"problems-{name}.json", {"step": step, "rows": rows})
