"""Bring a registry made by an older grpo-lab up to the current tables when it is opened: the
columns added since (create_all adds tables only), the records kept in files before the registry
held them, and labels spelt differently then. Every step is idempotent: running it again changes
nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import inspect, text

from grpo_lab.spec.arm import DEFAULT_TRAINER, arm_model, split_arm_model

ADDED_COLUMNS = {"attempts": ("job_id VARCHAR(64)",), "decide_waves": ("options_json TEXT",),
                 "decide_verdicts": ("record_json TEXT",),
                 "sweeps": ("screen_json TEXT",)}  # columns newer than a registry's tables


def add_columns(conn, folder: Path | None = None) -> None:
    """ALTER the tables of a registry created before a column existed (create_all adds tables only).
    `folder`: a SQLite registry's workspace, whose screens/<sweep>.json files (where --screen kept
    its record before the registry did) are read into the new column."""
    inspector = inspect(conn)
    for table, columns in ADDED_COLUMNS.items():
        have = {c["name"] for c in inspector.get_columns(table)}
        for column in columns:
            if column.split()[0] not in have:
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column}"))
                if column.startswith("screen_json") and folder is not None:
                    import_screen_files(conn, folder)
    label_trainers(conn)


def import_screen_files(conn, folder: Path) -> None:
    for path in sorted((folder / "screens").glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):  # half-written by a killed writer: there was no record to keep
            continue
        conn.execute(text("UPDATE sweeps SET screen_json = :record WHERE name = :name"),
                     {"record": json.dumps(record), "name": path.stem})


def label_trainers(conn) -> None:
    """Spell the trainer into the model labels a registry from before the trainers axis stored plain
    (a `trainer: trl` sweep's cells as "tiny"): a cell whose run's config trains under another
    trainer than grpo-lab's reads "tiny (trl)", and so do its sweep's --decide verdicts (their
    model, name and record). Rows already labelled are left alone, so running it again changes nothing."""
    cells = conn.execute(text("SELECT c.id, c.sweep_id, c.model, r.config_json FROM sweep_runs c "
                              "JOIN runs r ON r.run_id = c.run_id")).all()
    labels: dict[tuple[int, str], set[str]] = {}  # (sweep, model) -> its cells' labels
    for cell_id, sweep_id, model, config in cells:
        trainer = json.loads(config or "{}").get("trainer", DEFAULT_TRAINER)
        name, said = split_arm_model(model)
        label = arm_model(model, trainer) if said == DEFAULT_TRAINER else model
        if label != model:
            conn.execute(text("UPDATE sweep_runs SET model = :m WHERE id = :id"), {"m": label, "id": cell_id})
        labels.setdefault((sweep_id, name), set()).add(label)
    verdicts = conn.execute(text("SELECT id, sweep_id, name, model, record_json FROM decide_verdicts")).all()
    for row_id, sweep_id, name, model, record in verdicts:
        have = labels.get((sweep_id, model), set())
        if split_arm_model(model)[1] != DEFAULT_TRAINER or model in have or len(have) != 1:
            continue
        label = next(iter(have))
        new_name = label + name[len(model):] if name.startswith(model + "/") else name
        if record:
            d = json.loads(record)
            d["model"] = label
            d["name"] = new_name if d.get("name") == name else d.get("name")
            record = json.dumps(d)
        conn.execute(text("UPDATE decide_verdicts SET model = :m, name = :n, record_json = :r WHERE id = :id"),
                     {"m": label, "n": new_name, "r": record, "id": row_id})
