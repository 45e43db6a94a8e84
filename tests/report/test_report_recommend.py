"""The recommendation box: adopt and drop are exactly the verdict table's labels, undecided rows
are priced in seeds and hours with the command that decides them, and hopeless rows are named."""

from __future__ import annotations

import polars as pl
import pytest

from grpo_lab.report.recommend import MAX_SEEDS, recommendation, undecided_price
from grpo_lab.report.render import Code, Paragraph
from grpo_lab.report.verdicts import VerdictPolicy


def row(tricks, verdict, lo=-0.01, hi=0.03, n=3, task="math", hours=0.1):
    return {"model": "tiny", "task": task, "tricks": tricks, "verdict": verdict, "ci_low": lo, "ci_high": hi,
            "n": n, "family": 4, "hours_per_run": hours, "base_hours": 0.1}


def test_labels_sort_into_adopt_drop_and_no_change_without_relabelling():
    frame = pl.DataFrame([row("a", "worth it"), row("b", "harmful"), row("c", "not worth its cost"),
                          row("d", "no change on seeds that did not collapse"),
                          row("e", "worth it on seeds that did not collapse; collapses less often")])
    text = [b.text for b in recommendation(frame, {}, {}, "core-h", VerdictPolicy()) if isinstance(b, Paragraph)]
    assert text[:3] == ["Adopt: a, e.", "Drop: harmful: b; not worth its cost: c.", "No change: d."]
    assert text[3] == "Undecided: none."


def test_undecided_rows_are_priced_with_the_command_that_decides_them():
    policy = VerdictPolicy()
    rows = [row("a", "undecided"), row("b", "undecided", lo=-0.5, hi=0.5), row("c", "undecided", task="logic")]
    extra, priced, beyond = undecided_price(rows, policy)
    # a's half-width 0.02 at 3 seeds, widened for the first Holm step of 4 effects: 3·(0.02·2.498/1.96/0.02)² → 5
    assert priced[0] == "a (math): 2 more seeds" and beyond == ["b (math)"]
    assert extra == pytest.approx(4 * 2 * 0.1)  # 2 more seeds of a and of c, and of each cell's baseline
    blocks = recommendation(pl.DataFrame(rows), {"matrix": "matrices/m.yaml"}, {"total": 1.0}, "core-h", policy)
    assert f"within {MAX_SEEDS} seeds per arm" in blocks[3].text and "b (math)" in blocks[3].text
    (code,) = [b for b in blocks if isinstance(b, Code)]
    assert code.lines == ["grpo-lab sweep matrices/m.yaml --decide --budget 1.8"]
