"""MLflow tracking for sweeps: a parent run per sweep, a child run per finished cell.

Runs write only to their run folder; the single sweep driver reads a finished (failed, stopped)
run's folder and logs it here, so exactly one process writes to the MLflow store per sweep (SQLite
locks under concurrent writers). The same calls backfill a sweep after the fact. Everything goes
through `mlflow.MlflowClient`, never the fluent global run state, so trackers can coexist.
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import re
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from grpo_lab.util.environment import env_snapshot
from grpo_lab.execution.registry import WORKSPACE
from grpo_lab.rundir import CONFIG, EVENTS, SUMMARY, RunDir, Summary
from grpo_lab.util.dicts import flatten

if TYPE_CHECKING:
    from mlflow.entities import Metric

# MLflow phones home (telemetry config fetch + usage events) from the moment it is imported,
# unless told not to; this must run before the first `import mlflow` in the process.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

MAX_PARAMS_PER_BATCH = 100     # MLflow's log_batch limit for params (and tags)
MAX_METRICS_PER_BATCH = 1000   # ... and for metrics
MAX_PARAM_CHARS = 6000
MAX_TAG_CHARS = 8000
SWEEP_TAG = "grpo_lab.sweep"
IDENTITY = ("model", "task", "tricks", "dimensions", "seed", "run_id", "matrix")  # tags every child has
COMPLETE_TAG = "grpo_lab.logged"  # set last: a child without it was cut off mid-logging

# Registry/runner statuses -> MLflow run statuses; the raw status is kept in the `status` tag.
MLFLOW_STATUS = {
    "done": "FINISHED", "finished": "FINISHED", "succeeded": "FINISHED", "completed": "FINISHED",
    "failed": "FAILED", "error": "FAILED", "crashed": "FAILED",
    "stopped": "FINISHED",  # an alarm's stop_on ended it on purpose (the registry counts it done)
    "killed": "KILLED", "cancelled": "KILLED", "canceled": "KILLED",
    "preempted": "KILLED", "paused": "KILLED", "timeout": "KILLED", "interrupted": "KILLED", "running": "RUNNING",
}
EVAL_TABLE = "eval/completions.json"  # every eval's sampled completions, one MLflow table
# Per-sample list columns of completions.jsonl and their one-row-per-sample names.
SAMPLE_COLUMNS = {"completions": "completion", "rewards": "reward", "advantages": "advantage"}


class TrackingWarning(UserWarning):
    """A tracking call failed. Tracking copies what the registry and run folders hold: work goes on."""


def guarded(action: Callable[[], Any], what: str) -> None:
    """Run a tracking call; a failure becomes a TrackingWarning, never an exception that ends a sweep."""
    try:
        action()
    except Exception as exc:  # noqa: BLE001 - reported, and the sweep or tune goes on
        warnings.warn(f"{what} failed: {type(exc).__name__}: {exc}", TrackingWarning, stacklevel=2)


def default_tracking_uri(workspace: Path = WORKSPACE) -> str:
    """MLFLOW_TRACKING_URI if set, else `sqlite:///<workspace>/mlflow.db` (absolute path)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(workspace / 'mlflow.db').resolve()}"


def child_run_name(tricks: str, seed: object, run_id: str) -> str:
    """The MLflow name of a cell's run: what the report's runs table shows and `grpo-lab ui` finds."""
    return f"{tricks}-s{seed}-{run_id}"


def mlflow_status(status: str) -> str:
    """Map a registry status ('finished', 'failed', 'stopped', ...) to an MLflow run status;
    an unknown one ended without a known success: KILLED."""
    return MLFLOW_STATUS.get(status.lower(), "KILLED")


def metric_key(name: str) -> str:
    """An MLflow-legal key: '@' is not allowed, so 'eval/pass@1' -> 'eval/pass_at_1'."""
    return re.sub(r"[^/\w.\- :]", "_", name.replace("@", "_at_"))


def _param_value(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v)
    return text[:MAX_PARAM_CHARS]


def _number(v: Any) -> float | None:
    """A metric value, or None for non-numbers (bools count as 0/1)."""
    return float(v) if isinstance(v, (int, float)) else None


def _joined(v: Any, empty: str = "") -> str:
    if isinstance(v, (list, tuple)):
        return "+".join(map(str, v)) or empty
    return empty if v is None else str(v)


def step_metrics(rows: Iterable[dict[str, Any]], timestamp_ms: int) -> tuple[list[Metric], list[str]]:
    """metrics.jsonl rows -> (finite MLflow metrics, sorted names of keys that had non-finite values)."""
    from mlflow.entities import Metric

    metrics, bad = [], set()
    for row in rows:
        step = int(row.get("step", 0))
        for k, v in row.items():
            if k == "step" or (x := _number(v)) is None:
                continue
            if math.isfinite(x):
                metrics.append(Metric(metric_key(k), x, timestamp_ms, step))
            else:
                bad.add(k)
    return metrics, sorted(bad)


def summary_metrics(summary: Summary) -> dict[str, float]:
    """summary.json -> metrics: base/..., final/... (and final/delta_...), cost/<top-level number>,
    cost/<dict>/<key> for nested dicts such as phase_seconds and device_hours_by_phase.
    Metric names are the file's keys, so this walks the summary's JSON form, and only the keys the
    file held: a summary that predates a field logs no metric for it rather than a default."""
    out: dict[str, float] = {}
    for k, v in summary.model_dump(mode="json", exclude_unset=True).items():
        if k in ("seed", "steps"):
            continue  # run identity, already a tag / param
        if isinstance(v, dict):
            group = k if k in ("base", "final") else f"cost/{k}"
            out |= {f"{group}/{kk}": x for kk, vv in v.items() if (x := _number(vv)) is not None}
        elif (x := _number(v)) is not None:
            out[f"final/{k}" if k.startswith("delta") else f"cost/{k}"] = x
    return {metric_key(k): x for k, x in out.items() if math.isfinite(x)}


def completion_table(rows: Iterable[dict[str, Any]]) -> dict[str, list[Any]]:
    """completions.jsonl -> one column dict, one table row per sampled completion of every eval.

    Per-sample lists (completions, rewards, advantages) become singular columns; the other fields
    of a record (step, prompt, task, ...) repeat on each of its rows. One table for the whole run,
    not one per eval: MLflow lists every logged table in one run tag, which a run with a hundred
    evals would push past the tag's length limit.
    """
    table: list[dict[str, Any]] = []
    for row in rows:
        samples = {SAMPLE_COLUMNS[k]: v for k, v in row.items() if k in SAMPLE_COLUMNS and isinstance(v, list)}
        shared = {"step": int(row.get("step", 0))} | {k: v for k, v in row.items() if k != "step" and k not in SAMPLE_COLUMNS}
        n = max((len(v) for v in samples.values()), default=1)
        table.extend(shared | {"sample": i} | {c: v[i] if i < len(v) else None for c, v in samples.items()}
                     for i in range(n))
    return _columns(table)


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Row dicts -> column dict over the union of their keys (missing cells are None)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return {k: [r.get(k) for r in rows] for k in keys}


def _tag_values(tags: dict[str, Any]) -> dict[str, str]:
    """Legal tag keys, string values within MLflow's length limit."""
    return {metric_key(k): str(v)[:MAX_TAG_CHARS] for k, v in tags.items()}


def _quote(value: str) -> str:
    """A filter-string literal (MLflow's grammar has no escapes: pick the quote it lacks)."""
    return f'"{value}"' if "'" in value else f"'{value}'"


def experiment_id(uri: str, name: str = "grpo-lab") -> str | None:
    """The id of the store's experiment `name` (where sweeps are logged), None before one was.
    A SQLite store that does not exist yet is left for Tracker to create (_create_store)."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        return None
    from mlflow import MlflowClient

    with store_lock(uri):
        found = MlflowClient(tracking_uri=uri).get_experiment_by_name(name)
    return found.experiment_id if found else None


def artifact_root(uri: str, experiment: str) -> str | None:
    """For a SQLite store, artifacts go next to the DB file, in mlartifacts/<experiment> (MLflow's
    default is ./mlruns in whatever the current directory is); other stores keep their server's
    default (None)."""
    if not uri.startswith("sqlite:///"):
        return None
    db = Path(uri.removeprefix("sqlite:///")).resolve()
    db.parent.mkdir(parents=True, exist_ok=True)
    return (db.parent / "mlartifacts" / re.sub(r"[^\w.-]", "_", experiment)).as_uri()


def _ms(when: Any) -> int | None:
    """A datetime (naive = UTC, as the registry stores it) or epoch seconds -> MLflow epoch
    milliseconds; None stays None (MLflow then uses now)."""
    if isinstance(when, datetime):
        return int((when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp() * 1000)
    return None if _number(when) is None else int(float(when) * 1000)


@contextmanager
def store_lock(uri: str):
    """Serialise the creation of a SQLite MLflow store, as registry.create_schema does the registry's:
    two processes creating one at once fail in its migrations ('duplicate column name: step')."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    path = Path(uri.removeprefix("sqlite:///"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.schema-lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _create_store(uri: str) -> None:
    """Create a SQLite store with its Default experiment's artifacts beside the DB: created by
    MlflowClient, Default would point at ./mlruns of the current directory."""
    root = artifact_root(uri, "")
    if root is None:
        return
    db = Path(uri.removeprefix("sqlite:///"))
    if db.is_dir():  # MLflow would retry opening it for about 100 s before failing
        raise OSError(f"MLflow store {uri}: {db} is a folder, not a SQLite file")
    if db.exists():
        return
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    SqlAlchemyStore(uri, root.rstrip("/"))


class Tracker:
    """Logs sweeps into one MLflow experiment: a parent run per sweep, a child per run attempt."""

    def __init__(self, uri: str, experiment: str = "grpo-lab") -> None:
        from mlflow import MlflowClient

        # MLflow sets its loggers up on import; its INFO lines on creating a store are noise here
        logging.getLogger("mlflow").setLevel(logging.WARNING)
        self.uri = uri
        with store_lock(uri):  # the first use of a store creates (migrates) it: one process at a time
            _create_store(uri)
            self.client: MlflowClient = MlflowClient(tracking_uri=uri)
            self.experiment_id = self._experiment(experiment)
        self._env_tags: dict[str, str] | None = None

    def _experiment(self, name: str) -> str:
        exp = self.client.get_experiment_by_name(name)
        if exp is None:
            return self.client.create_experiment(name, artifact_location=artifact_root(self.uri, name))
        if exp.lifecycle_stage == "deleted":
            self.client.restore_experiment(exp.experiment_id)
        return exp.experiment_id

    @property
    def env_tags(self) -> dict[str, str]:
        """env_snapshot() as `env.*` tags, taken once per tracker (it runs git and nvidia-smi)."""
        if self._env_tags is None:
            self._env_tags = {f"env.{k}": v for k, v in env_snapshot().items()}
        return self._env_tags

    def start_sweep(self, name: str, matrix_path: Path | None = None, tags: dict[str, Any] | None = None) -> str:
        """The parent run of sweep `name`, set RUNNING: reused if one is tagged with the name."""
        sweep_tags = self.env_tags | (tags or {}) | {SWEEP_TAG: name, "kind": "sweep"}
        if matrix_path is not None:
            sweep_tags |= {"matrix": Path(matrix_path).stem, "matrix_path": str(matrix_path)}
        found = self._find({SWEEP_TAG: name})
        if found is None:
            run_id = self.client.create_run(self.experiment_id, run_name=name, tags=_tag_values(sweep_tags)).info.run_id
        else:
            run_id = found.info.run_id
            self.client.update_run(run_id, status="RUNNING")
            self._set_tags(run_id, sweep_tags)
        if matrix_path is not None and Path(matrix_path).is_file():
            self.client.log_artifact(run_id, str(matrix_path))  # same name: overwritten, not duplicated
        return run_id

    def end_sweep(self, parent_run_id: str, status: str, totals: dict[str, Any]) -> None:
        """Close the parent run: numeric totals (nested ones too) -> metrics `sweep/...`, others -> tags."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        flat = flatten(totals, sep="/")
        metrics = [Metric(metric_key(f"sweep/{k}"), x, now, 0) for k, v in flat.items()
                   if (x := _number(v)) is not None and math.isfinite(x)]
        self._log_metrics(parent_run_id, metrics)
        self._set_tags(parent_run_id, {f"sweep.{metric_key(k)}": v for k, v in flat.items() if _number(v) is None}
                       | {"status": status})
        self.client.set_terminated(parent_run_id, mlflow_status(status))

    def log_run(self, parent_run_id: str, labels: dict[str, Any], run_dir: Path, status: str,
                attempt_info: dict[str, Any] | None = None) -> str:
        """Log one ended run attempt from its folder as a child of the sweep's parent run; its id.

        Idempotent per (parent, run id, attempt): a complete child is only re-tagged and re-closed
        with the new status; one cut off mid-logging is deleted and logged afresh.
        attempt_info: {"attempt": n, "started_at"/"ended_at": datetime or epoch s, numbers -> metrics
        `attempt/...`, strings (error, node, ...) -> tags `attempt.*`}.
        """
        run_dir, attempt_info = Path(run_dir), attempt_info or {}
        tags = self._run_tags(parent_run_id, labels, run_dir, status, attempt_info)
        end_ms = _ms(attempt_info.get("ended_at"))
        found = self._find({k: tags[k] for k in ("mlflow.parentRunId", "run_id", "attempt")})
        if found is not None and found.data.tags.get(COMPLETE_TAG) == "true":
            self._set_tags(found.info.run_id, tags)
            self.client.set_terminated(found.info.run_id, mlflow_status(status), end_time=end_ms)
            return found.info.run_id
        if found is not None:
            self.client.delete_run(found.info.run_id)
        run_name = child_run_name(tags["tricks"], tags["seed"], tags["run_id"])
        run_id = self.client.create_run(self.experiment_id, start_time=_ms(attempt_info.get("started_at")),
                                        tags=_tag_values(tags), run_name=run_name).info.run_id
        bad = self._log_data(run_id, run_dir, attempt_info)
        self._log_files(run_id, run_dir)
        self._set_tags(run_id, {"nonfinite_count": len(bad), "nonfinite_keys": ",".join(bad), COMPLETE_TAG: "true"})
        self.client.set_terminated(run_id, mlflow_status(status), end_time=end_ms)
        return run_id

    def _run_tags(self, parent_run_id: str, labels: dict[str, Any], run_dir: Path, status: str,
                  attempt_info: dict[str, Any]) -> dict[str, str]:
        """Identity tags (labels win over summary.json, which wins over config.json), status,
        attempt, summary/attempt strings, the parent link and the env snapshot."""
        parent = self.client.get_run(parent_run_id).data.tags
        folder = RunDir(run_dir)
        config = folder.config() or {}
        # the keys the file held: a field an older summary lacks must not tag the run with None
        summary = (folder.summary() or Summary()).model_dump(mode="json", exclude_unset=True)
        ident: dict[str, Any] = {"run_id": run_dir.name, "matrix": parent.get("matrix", "")}
        for source in (config, summary, labels):
            ident |= {k: v for k, v in source.items() if k in IDENTITY}
        tags = {k: _joined(v) for k, v in (labels | ident).items()}
        tags |= {"tricks": _joined(ident.get("tricks"), "baseline"), "status": status,
                 "attempt": str(attempt_info.get("attempt", 1)), "sweep": parent.get(SWEEP_TAG, ""),
                 "mlflow.parentRunId": parent_run_id, "run_dir": str(run_dir.resolve()), "kind": "run"}
        tags |= {f"summary.{k}": v for k, v in summary.items() if isinstance(v, str) and k not in IDENTITY}
        tags |= {f"attempt.{k}": v for k, v in attempt_info.items() if isinstance(v, str)}
        return {k: v for k, v in tags.items() if k in IDENTITY or v != ""} | self.env_tags

    def _log_data(self, run_id: str, run_dir: Path, attempt_info: dict[str, Any]) -> list[str]:
        """Params (flattened config), step, summary, attempt and alarm metrics; returns the names
        of step metrics that had non-finite values (not loggable, so recorded as tags)."""
        from mlflow.entities import Metric

        folder = RunDir(run_dir)
        self._log_params(run_id, flatten(folder.config() or {}))
        now = int(time.time() * 1000)
        metrics, bad = step_metrics(folder.metrics(), now)
        metrics += [Metric(k, x, now, 0) for k, x in summary_metrics(folder.summary() or Summary()).items()]
        metrics += [Metric(metric_key(f"attempt/{k}"), x, now, 0) for k, v in attempt_info.items()
                    if k not in ("attempt", "started_at", "ended_at")
                    and (x := _number(v)) is not None and math.isfinite(x)]
        for e in folder.events():
            value = _number(e.get("value"))
            value = value if value is not None and math.isfinite(value) else 1.0  # the alarm fired
            metrics.append(Metric(metric_key(f"alarm/{e.get('kind', 'unknown')}"), value, now, int(e.get("step", 0))))
        self._log_metrics(run_id, metrics)
        return bad

    def _log_files(self, run_id: str, run_dir: Path) -> None:
        """Artifacts: config/summary/events files, eval completions and alarms as MLflow tables."""
        folder = RunDir(run_dir)
        for name in (CONFIG, SUMMARY, EVENTS):
            if (folder / name).is_file():
                self.client.log_artifact(run_id, str(folder / name))
        if completions := folder.completions():
            self.client.log_table(run_id, data=completion_table(completions), artifact_file=EVAL_TABLE)
        if events := folder.events():
            self.client.log_table(run_id, data=_columns(events), artifact_file="alarms/events.json")

    def _find(self, tags: dict[str, str]) -> Any:
        """The oldest active run of the experiment carrying all these tags, or None."""
        where = " and ".join(f"tags.`{k}` = {_quote(v)}" for k, v in tags.items())
        runs = self.client.search_runs([self.experiment_id], filter_string=where,
                                       order_by=["attributes.start_time ASC"], max_results=1)
        return runs[0] if runs else None

    def _set_tags(self, run_id: str, tags: dict[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, v) for k, v in _tag_values(tags).items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id, tags=items[i:i + MAX_PARAMS_PER_BATCH])

    def _log_params(self, run_id: str, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(metric_key(k), _param_value(v)) for k, v in params.items()]
        for i in range(0, len(items), MAX_PARAMS_PER_BATCH):
            self.client.log_batch(run_id, params=items[i:i + MAX_PARAMS_PER_BATCH])

    def _log_metrics(self, run_id: str, metrics: list[Metric]) -> None:
        for i in range(0, len(metrics), MAX_METRICS_PER_BATCH):
            self.client.log_batch(run_id, metrics=metrics[i:i + MAX_METRICS_PER_BATCH])
