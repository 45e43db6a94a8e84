"""Sample completions side by side: the last logged eval of each arm's lowest seed, the same
prompts in one row, the baseline first, and a note when nothing was logged."""

from __future__ import annotations

import json

from grpo_lab.report.render import Paragraph, Table
from grpo_lab.report.samples import sample_blocks, sample_frame


def folder(tmp_path, name, rows):
    path = tmp_path / name
    path.mkdir()
    (path / "completions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def logged(step, answer, reward):
    return [{"step": step, "task": "math", "prompt": p, "completions": [answer, "x"], "rewards": [reward, 0.0]}
            for p in ("1+1=", "2+2=")]


def test_each_arm_answers_the_same_prompts_at_its_last_eval(tmp_path):
    labels = lambda tricks, seed: {"model": "tiny", "task": "math", "tricks": tricks, "seed": seed}  # noqa: E731
    runs = [(labels("baseline", 1), folder(tmp_path, "b1", logged(9, "wrong seed", 1.0))),
            (labels("baseline", 0), folder(tmp_path, "b0", logged(9, "early", 0.0) + logged(19, "2", 1.0))),
            (labels("ema_reference", 0), folder(tmp_path, "e0", logged(19, "22", 0.0)))]
    frame = sample_frame(runs)
    assert set(frame["completion"]) == {"2", "22"} and set(frame["step"]) == {19}
    blocks = sample_blocks(frame, ["ema_reference"])
    table = next(b for b in blocks if isinstance(b, Table))
    assert table.headers == ["prompt", "baseline", "ema_reference"]
    assert table.rows[0] == ["1+1=", "2 (0.50)", "22 (0.00)"]


def test_nothing_logged_is_said():
    import polars as pl

    (note,) = sample_blocks(pl.DataFrame())
    assert isinstance(note, Paragraph) and "completions.jsonl" in note.text
