"""What a tune leaves behind: the tuned baseline file and the table of its trials."""

from __future__ import annotations

from pathlib import Path

import optuna
import yaml
from optuna.trial import TrialState
from rich.table import Table

from grpo_lab.tune.base import Base
from grpo_lab.util.dicts import deep_merge, nest


def write_override(path: Path, base: Base, study: optuna.Study, metric: str, space_source: str) -> Path:
    """The base config with the best trial's params: a run config, and a matrix `base:` file.
    With the same model, task, seed and no extra tricks, a matrix cell over it has the best
    trial's run id, so a sweep reuses that run instead of training it again."""
    best = study.best_trial
    ended = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    header = [
        f"# Tuned baseline written by `grpo-lab tune` (Optuna study {study.study_name}).",
        f"# objective: {study.direction.name.lower()} {metric} = {best.value:.4g} at trial {best.number} "
        f"(run {best.user_attrs.get('run_id', '?')}), best of {ended} completed or pruned trials",
        f"# search space: {space_source}; base: {base.source}",
        f"# tuned: {', '.join(f'{k} = {_fmt(v)}' for k, v in best.params.items())}",
        "# Use it in a matrix as  base: <this file, relative to the matrix>",
    ]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header) + "\n" + yaml.safe_dump(deep_merge(base.data, nest(best.params)),
                                                                sort_keys=False))
    return path


STATE_STYLE = {"COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red", "RUNNING": "cyan", "WAITING": "dim"}


def trials_table(study: optuna.Study, unit: str) -> Table:
    """One row per trial: number, state, value, params, hours of its attempt, run id, note."""
    trials = study.get_trials(deepcopy=False)
    keys = list(dict.fromkeys(k for t in trials for k in t.params))
    best = study.best_trial.number if any(t.state == TrialState.COMPLETE for t in trials) else None
    table = Table(title=f"{study.study_name}: {study.direction.name.lower()} {study.user_attrs.get('metric', '')}")
    for col in ("trial", "state", "value", *keys, unit, "run id", "note"):
        table.add_column(col, justify="right" if col not in ("state", "run id", "note") else "left")
    for t in trials:
        attrs = t.user_attrs
        note = "; ".join(x for x in (
            "best" if t.number == best else "",
            f"resumes #{attrs['resumes']}" if "resumes" in attrs else "",
            "reused a finished run" if attrs.get("status") == "reused" else "",
            (attrs.get("error") or "").strip().splitlines()[0] if attrs.get("error") else "",
        ) if x)
        hours = attrs.get("gpu_hours")
        table.add_row(str(t.number), f"[{STATE_STYLE.get(t.state.name, 'white')}]{t.state.name}[/]",
                      "-" if t.value is None else f"{t.value:.4g}",
                      *(_fmt(t.params.get(k)) for k in keys),
                      "-" if hours is None else f"{hours:.3g}", attrs.get("run_id", "-"), note)
    return table


def _fmt(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)
