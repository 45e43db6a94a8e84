"""One row of a preflight verdict: what was checked, what was seen, against what, and the verdict."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Verdict = Literal["green", "yellow", "red"]


@dataclass(frozen=True)
class Check:
    name: str  # e.g. "reward/main: variance"
    value: str  # what was measured, formatted for a table
    threshold: str  # the rule the value is held against
    verdict: Verdict  # red blocks a run (exit 1); yellow is worth a look; green is fine
    note: str = ""  # why a non-green verdict matters

    def to_dict(self) -> dict[str, str]:
        return asdict(self)
