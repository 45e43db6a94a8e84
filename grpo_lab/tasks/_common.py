"""Machinery shared by the built-in tasks: stable splits, seeded sampling, JSONL data.

Splits are a property of a problem's content, not of the sampling call: a stable hash of a
canonical key puts ~20% of all possible problems in "test", and generators reject problems
of the other split. So train and test never share a problem, in any process, whatever the
seeds, and however small a level's problem space is.

Data files (``data_path``): a path containing ``{split}`` names one file per split, and all
its records belong to that split (use this for official splits such as GSM8K's
train/test files). Otherwise a record's own ``"split"`` field decides (records of other
splits, such as "validation", are never used), and failing that the same content hash as
for generated problems. Records may carry an integer
``"difficulty"`` (default 0); with a data file, the task's ``levels`` is one more than the
largest difficulty present, whatever ``levels`` the constructor got.

``data`` (a ``spec.sources.DataConfig``) reads any of the formats of ``tasks/data.py`` with the
user's field names; each task maps the canonical fields onto its own record (``record_fields``),
and a row it cannot use is an error naming the file, the row and the field.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from grpo_lab.tasks.base import REGISTERS, SPLITS, Problem

TEST_FRACTION = 0.2
BUILTIN_LEVELS = 3
# In-split repeats tolerated while looking for a problem not yet in the batch; small levels
# (tens of problems) run out of fresh problems when a batch is larger than their split.
_FRESH_TRIES = 64
# Draws spent looking for any problem of the wanted split before giving up loudly.
_SPLIT_TRIES = 10_000


@dataclass(frozen=True)
class Draft:
    """A problem before it is assigned a split and uid. ``key`` is its canonical content."""

    key: str
    prompt: str
    target: Any
    solution: str
    difficulty: int
    columns: dict = field(default_factory=dict, compare=False)  # a data row's own fields


@lru_cache(maxsize=1 << 16)
def split_of(task: str, key: str) -> str:
    """The split that owns a problem, from a hash of its task and canonical key."""
    digest = hashlib.sha256(f"{task}\0{key}".encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") < TEST_FRACTION * 2**64 else "train"


def content_id(text: str) -> str:
    """Short stable id for long contents (data records), used inside uids."""
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def read_jsonl(path: str | Path) -> list[dict]:
    """Records of a JSON-lines file; blank lines are skipped, bad lines name their number."""
    records = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not valid JSON ({e.msg})") from None
    return records


class BaseTask:
    """Validation, seeded sampling and data loading; subclasses supply the content.

    Subclasses implement ``_draft(rng, level) -> Draft`` for generated problems,
    ``_record_draft(record) -> Draft`` for data files, and ``score``.
    """

    name = "base"
    # canonical data field -> the key of this task's records; `needs` must be present in every row
    record_fields = {"prompt": "question", "answer": "answer", "difficulty": "difficulty"}
    needs: tuple[str, ...] = ("prompt", "answer")
    generator_version = 1  # bumped when generated problems change: cached warm starts depend on them
    grading_version = 1  # bumped when scoring changes: a run graded the old way is another run

    def __init__(
        self,
        register: str = "compact",
        levels: int = BUILTIN_LEVELS,
        data_path: str | None = None,
        difficulty: int | None = None,
        data=None,
    ):
        if register not in REGISTERS:
            raise ValueError(f"unknown register {register!r}; known: {', '.join(REGISTERS)}")
        if not 1 <= levels <= BUILTIN_LEVELS:
            raise ValueError(f"levels must be in 1..{BUILTIN_LEVELS}, got {levels}")
        self.register = register
        self.levels = levels
        self.data_path = data.path if data is not None else data_path
        self.data = data
        # Data is read once, up front, so a bad file fails at construction, not mid-run.
        self._data: dict[str, list[Draft]] = {}
        if self.data_path is not None:
            self._data = {split: _load_drafts(self, split) for split in SPLITS}
            # A data file defines its own levels: its records' difficulties 0..max.
            self.levels = 1 + max((d.difficulty for ds in self._data.values() for d in ds), default=0)
        self.difficulty = self._check_level(difficulty)

    def _check_level(self, level: int | None) -> int | None:
        if level is not None and not 0 <= level < self.levels:
            raise ValueError(f"difficulty must be in 0..{self.levels - 1}, got {level}")
        return level

    def problems(self, split: str, n: int, seed: int, difficulty: int | None = None) -> list[Problem]:
        """``n`` problems of ``split``, a pure function of the arguments (and the data file).

        ``difficulty`` None falls back to the task's default; if that is None too, each
        problem draws its level uniformly. Problems are distinct while the split has fresh
        ones; larger requests repeat problems rather than borrow from the other split.
        """
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
        level = self._check_level(difficulty if difficulty is not None else self.difficulty)
        rng = random.Random(f"{self.name}/{self.register}/{split}/{seed}/{level}")
        if self.data_path is not None:
            drafts = self._sample_records(split, n, level, rng)
        else:
            drafts = []
            seen: set[str] = set()
            patience = _FRESH_TRIES
            for _ in range(n):
                draft = self._split_draft(split, level, rng, seen, patience)
                if draft.key in seen:
                    patience = 0  # the split is exhausted; stop paying for fresh searches
                drafts.append(draft)
                seen.add(draft.key)
        return [self._problem(split, d) for d in drafts]

    def _problem(self, split: str, d: Draft) -> Problem:
        return Problem(
            uid=f"{self.name}/{self.register}/{split}/{d.key}",
            task=self.name,
            prompt=d.prompt,
            target=d.target,
            solution=d.solution,
            difficulty=d.difficulty,
            columns=d.columns,
        )

    def _split_draft(
        self, split: str, level: int | None, rng: random.Random, seen: set[str], patience: int
    ) -> Draft:
        """A generated draft of ``split``; after ``patience`` in-split repeats of keys in
        ``seen``, a repeat is accepted."""
        repeats = 0
        for _ in range(_SPLIT_TRIES):
            draft = self._draft(rng, level if level is not None else rng.randrange(self.levels))
            if split_of(self.name, draft.key) == split:
                if draft.key not in seen or repeats >= patience:
                    return draft
                repeats += 1
        raise RuntimeError(f"{self.name}: no {split} problem found at level {level}")

    def _sample_records(self, split: str, n: int, level: int | None, rng: random.Random) -> list[Draft]:
        """``n`` drafts from the data file: a seeded shuffle, cycled when ``n`` exceeds it."""
        pool = [d for d in self._data[split] if level is None or d.difficulty == level]
        if not pool and n:
            raise ValueError(f"{self.data_path}: no {split} records at difficulty {level}")
        out: list[Draft] = []
        while len(out) < n:
            order = pool[:]
            rng.shuffle(order)
            out.extend(order[: n - len(out)])
        return out

    def _draft(self, rng: random.Random, level: int) -> Draft:
        raise NotImplementedError

    def _record_draft(self, record: dict) -> Draft:
        raise NotImplementedError


def _load_drafts(task: BaseTask, split: str) -> list[Draft]:
    """Drafts of one split of the task's data file, following the rules in the module doc."""
    path = str(task.data_path)
    per_split_file = "{split}" in path
    records = _records(task, path.replace("{split}", split))
    drafts = []
    for record in records:
        draft = _draft_of(task, record)
        if draft.difficulty < 0:
            raise ValueError(f"{path}: negative difficulty in record {draft.key}")
        owner = split if per_split_file else record.get("split") or split_of(task.name, draft.key)
        if owner == split:
            drafts.append(draft)
    return drafts


def _records(task: BaseTask, path: str) -> list[dict]:
    """Records in the task's own keys: a JSONL file as it is, or `data` rows mapped by record_fields."""
    if task.data is None:
        return read_jsonl(path)
    from grpo_lab.tasks.data import read_rows

    rows = read_rows(task.data, path, task.needs)
    fields = {**task.record_fields, "split": "split", "_where": "_where", "_row": "_row"}
    return [{fields[k]: v for k, v in row.items() if k in fields} for row in rows]


def _draft_of(task: BaseTask, record: dict) -> Draft:
    """task._record_draft, with a `data` row's failure naming its file, row and field."""
    if "_where" not in record:
        return task._record_draft(record)
    try:
        return replace(task._record_draft(record), columns=record["_row"])
    except (ValueError, KeyError, TypeError) as e:
        from grpo_lab.tasks.data import DataError, field_of

        key = "tests" if "tests" in task.needs else "answer"
        detail = f"no {e.args[0]!r}" if isinstance(e, KeyError) else str(e)
        raise DataError(f"{record['_where']}: field {field_of(task.data, key)!r} (data.{key}): {detail}") from None
