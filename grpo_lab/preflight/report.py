"""Preflight results as a rich verdict table and as one JSON file."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from grpo_lab.preflight import PreflightResult

STYLE = {"green": "green", "yellow": "yellow", "red": "bold red"}


def verdict_table(result: PreflightResult) -> Table:
    setup = result.stats.get("setup", {})
    table = Table(title=f"preflight {escape(result.target)}: {setup.get('samples', '?')} samples, "
                        f"G {setup.get('G', '?')}, T {setup.get('temperature', '?')}")
    for col in ("check", "value", "threshold", "verdict", "why"):
        table.add_column(col)
    for c in result.checks:
        table.add_row(escape(c.name), escape(c.value), escape(c.threshold),
                      f"[{STYLE[c.verdict]}]{c.verdict}[/]", escape(c.note))
    return table


def write_json(results: Sequence[PreflightResult], path: Path) -> None:
    """{"red": any red, "results": [one per (model, task)]}."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"red": any(r.red for r in results), "results": [r.to_dict() for r in results]}
    path.write_text(json.dumps(doc, indent=1))
