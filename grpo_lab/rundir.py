"""The run folder: the one contract between the trainer that writes a run and everyone who reads
it (the worker and the sweep driver, tune, the MLflow mirror, analysis, the report, `status`).
Its file names and its readers live here; nobody else opens these files by name.

    config.json        the resolved run config (its hash is the run id)
    metrics.jsonl      one line per step, namespaced keys (appended; cut back on resume)
    completions.jsonl  at each eval, prompts with sampled completions and rewards
    events.jsonl       alarm events
    eval/problems-<step>.json   per-problem records of an eval (step zero-padded; "base" before training)
    eval/final-<K>.json         the final checkpoint evaluated again with K completions per problem
                                (--decide's eval design): metrics, per-problem rows, device-hours
    summary.json       written once, when the run ends (Summary): base and final eval, hours per phase, ...
    stop_at.json       {"step": S}: the sweep's screening asks the run to pause at step S (a rung);
                       absent: train to the end
    heartbeat.json     the worker's progress after every step (attempt, started, updated, step, steps, start_step, first_step_at)
    result-<n>.json    what attempt n's worker reported (status, error, summary, wall seconds, host);
                       an eval-only attempt's n is eval<K>
    attempt-<n>.log    attempt n's output (local runner; eval<K> for an eval-only attempt)
    checkpoint.pt      the latest checkpoint (trainer/checkpoint.py)
    trl/checkpoint-<n>/  trainer: trl: TRL's latest checkpoint at its global step n, with grpo-lab's
                       books (evals, clocks, counters) in grpo_lab_books.json (trainer/trl_callback.py)
    .lock              held by the attempt running in the folder

JSON files are replaced atomically (a reader never sees half a file); a JSONL reader skips a torn
last line (a run killed mid-write).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from grpo_lab.util.files import read_json, write_json

CONFIG, METRICS, COMPLETIONS, EVENTS = "config.json", "metrics.jsonl", "completions.jsonl", "events.jsonl"
SUMMARY, HEARTBEAT, CHECKPOINT, EVAL = "summary.json", "heartbeat.json", "checkpoint.pt", "eval"
LOCK = ".lock"
STOP_AT = "stop_at.json"
TRL_DIR, TRL_BOOKS = "trl", "grpo_lab_books.json"  # TRL's output_dir, grpo-lab's books in each checkpoint of it
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


class Summary(BaseModel):
    """summary.json: what a run that ended (finished, or stopped by an alarm) reports. The trainer
    writes it once; the worker, tune, the MLflow mirror, analysis, the report and `status` read it.

    The field names (aliases where a key is not an identifier) and their order are the file's keys,
    which committed reports and MLflow metric names depend on. Every field has a default so a folder
    written before a field existed still reads: its readers see None or empty, not a missing file.
    Unknown keys are ignored rather than kept or refused: a folder a newer version wrote still
    reads as what this version understands, and the trainer here writes no key the model lacks.
    """

    model_config = ConfigDict(extra="ignore", validate_by_name=True, validate_by_alias=True,
                              serialize_by_alias=True)

    run_id: str | None = Field(None, description="the run's id: the hash of its resolved config (RunConfig.run_id)")
    model: str | None = Field(None, description="model card name, Hugging Face id or local folder")
    task: list[str] = Field([], description="the run's tasks")
    tricks: list[str] = Field([], description="catalog tricks applied over the config, in order")
    seed: int | None = Field(None, description="the run's seed")
    steps: int | None = Field(None, description="training steps configured")
    base: dict[str, float] | None = Field(
        None, description="eval metrics before training (eval/<metric>, eval/<task>/<metric>)")
    final: dict[str, float] = Field(
        {}, description="eval metrics of the last eval: at the last step, or where an alarm stopped the run")
    delta_pass_at_1: float | None = Field(
        None, alias="delta_pass@1", description="final minus base eval/pass@1 (a missing one counts as 0)")
    stopped: bool = Field(False, description="an alarm listed in alarms.stop_on ended the run early")
    stop_reason: str | None = Field(None, description="which alarm stopped the run, at which step")
    alarms: dict[str, int] = Field({}, description="alarm kind -> times it fired")
    wall_seconds: float | None = Field(
        None, description="wall time of the run over all its attempts (each up to its last checkpoint)")
    cpu_seconds: float | None = Field(
        None, description="CPU time of the run's training process over its attempts (all its threads, up to each "
                          "attempt's last checkpoint); beside wall_seconds it shows a run that waited for cores")
    devices: int | None = Field(None, description="devices the run held (the card's gpus on CUDA, else 1)")
    unit: str | None = Field(None, description="what a device-hour is: gpu-hours, or device-hours (<type>) off CUDA")
    phase_seconds: dict[str, float] = Field(
        {}, description="wall seconds per phase (setup, rollout, reward, ..., idle); they sum to wall_seconds")
    device_hours_by_phase: dict[str, float] = Field(
        {}, description="phase_seconds * devices / 3600 per phase")
    device_hours: float | None = Field(None, description="wall_seconds * devices / 3600: what the run cost")
    sampling_share: float | None = Field(None, description="share of wall time spent in rollout and reward")
    cost_per_effective_sample_hours: float | None = Field(
        None, description="device_hours per effective sample (None when no sample was effective)")
    price_per_gpu_hour: float | None = Field(
        None, description="always None here: money is the sweep layer's, which knows the hardware's price")
    tokens_generated: int | None = Field(None, description="completion tokens sampled for training")
    tokens_trained: int | None = Field(None, description="tokens the policy was trained on")
    effective_samples: int | None = Field(
        None, description="samples that moved the policy (not masked, in a group whose rewards varied)")
    device: str | None = Field(None, description="the torch device trained on")
    host: str | None = Field(None, description="the machine that wrote the summary")
    base_weights: str | None = Field(None, description="digest of the policy's weights before training")
    cpu_kernels: str | None = Field(
        None, description="torch's CPU capability (AVX512, AVX2): it changes the tiny model's warm start")

    @classmethod
    def parse(cls, data: Any) -> Summary | None:
        """A summary from its JSON form (summary.json, or a result file's copy); None when it is
        missing or not a summary (a torn or foreign file)."""
        if data is None:
            return None
        try:
            return cls.model_validate(data)
        except ValidationError:
            return None


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

    def summary(self) -> Summary | None:
        return Summary.parse(read_json(self.path / SUMMARY))

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

    def final_eval(self, samples: int) -> dict | None:
        """The record of the final checkpoint's eval with `samples` completions per problem."""
        return read_json(self.path / EVAL / f"final-{samples}.json")

    def attempt_log(self, attempt: int | str) -> Path:
        return self.path / f"attempt-{attempt}.log"

    def result(self, attempt: int | str) -> dict | None:
        return read_json(self.path / f"result-{attempt}.json")

    def finished(self) -> bool:
        return (self.path / SUMMARY).exists()

    def stop_at(self) -> int | None:
        """The step the sweep's screening asks the run to pause at (None: train to the end)."""
        got = read_json(self.path / STOP_AT)
        return int(got["step"]) if got else None

    def base_pass1(self) -> float | None:
        """pass@1 of the eval before training, from its per-problem records (None before it)."""
        got = read_json(self.path / EVAL / f"problems-{BASE_EVAL}.json")
        rows = (got or {}).get("rows") or []
        n = sum(r["samples"] for r in rows)
        return sum(r["passes"] for r in rows) / n if n else None

    def has_checkpoint(self) -> bool:
        return (self.path / CHECKPOINT).exists() or any((self.path / TRL_DIR).glob("checkpoint-*"))

    # -- writers ---------------------------------------------------------------------------------
    def write_config(self, config: dict) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json(self.path / CONFIG, config)

    def write_summary(self, summary: Summary) -> None:
        write_json(self.path / SUMMARY, summary.model_dump(mode="json"))

    def write_final_eval(self, samples: int, record: dict) -> None:
        (self.path / EVAL).mkdir(exist_ok=True)
        write_json(self.path / EVAL / f"final-{samples}.json", record)

    def write_result(self, attempt: int | str, result: dict) -> None:
        write_json(self.path / f"result-{attempt}.json", result)

    def write_stop_at(self, step: int | None) -> None:
        """Ask the run's next attempts to pause at `step` (None: to train to the end)."""
        if step is None:
            (self.path / STOP_AT).unlink(missing_ok=True)
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            write_json(self.path / STOP_AT, {"step": int(step)})

    def write_heartbeat(self, beat: dict) -> None:
        write_json(self.path / HEARTBEAT, beat)

    def write_problems(self, name: str, step: int, rows: list[dict]) -> None:
        """An eval's per-problem records; `name` is the zero-padded step or BASE_EVAL."""
        (self.path / EVAL).mkdir(exist_ok=True)
        write_json(self.path / EVAL / f"problems-{name}.json", {"step": step, "rows": rows})
