"""The recommendation box: every row goes where its label's advice puts it, with its qualifier,
undecided rows are priced in seeds and hours (fixed design) with the command that decides them,
built from the sweep's own command, and rows that cannot be priced say why."""

from __future__ import annotations

import polars as pl
import pytest

from grpo_lab.report.recommend import MAX_SEEDS, decide_command, recommendation, undecided_price
from grpo_lab.report.render import Code, Paragraph
from grpo_lab.report.verdicts import VerdictPolicy, advice


def row(tricks, verdict, lo=-0.01, hi=0.03, n=3, task="math", hours=0.1, p_holm=0.5):
    return {"model": "tiny", "task": task, "tricks": tricks, "verdict": verdict, "ci_low": lo, "ci_high": hi,
            "n": n, "family": 4, "hours_per_run": hours, "base_hours": 0.1, "p_holm": p_holm}


def texts(blocks):
    return [b.text for b in blocks if isinstance(b, Paragraph)]


@pytest.mark.parametrize("label,kind", [
    ("harmful in combination on seeds that did not collapse", "drop"), ("harmful", "drop"),
    ("collapses more often in combination", "drop"), ("collapses more often", "drop"),
    ("worth it on seeds that did not collapse; collapses less often", "adopt"),
    ("collapses less often", "undecided"), ("not worth its cost", "drop"),
    ("no change (assuming no unseen collapse mode)", "no change"), ("undecided", "undecided")])
def test_each_label_gets_the_advice_of_its_base_label(label, kind):
    assert advice(label) == kind


def test_rows_keep_their_labels_and_none_is_lost():
    frame = pl.DataFrame([row("a", "worth it"), row("b", "harmful in combination on seeds that did not collapse"),
                          row("c", "not worth its cost"), row("d", "no change on seeds that did not collapse"),
                          row("e", "collapses less often", p_holm=None)])
    got = texts(recommendation(frame, {}, {}, "core-h", VerdictPolicy()))
    assert got[0] == "Adopt: a."
    assert got[1] == "Drop: b (harmful in combination on seeds that did not collapse), c (not worth its cost)."
    assert got[2] == "No change: d (no change on seeds that did not collapse)."
    assert got[3].startswith("Undecided (1): e (collapses less often).")


def test_undecided_rows_are_priced_with_the_sweeps_own_command():
    policy = VerdictPolicy()
    rows = [row("a", "undecided"), row("b", "undecided", lo=-0.5, hi=0.5), row("c", "undecided", task="logic"),
            row("d", "undecided", hours=None)]
    extra, priced, other = undecided_price(rows, policy)
    # a's half-width 0.02 at 3 seeds, widened for the first Holm step of 4 effects: 3·(0.02·1.2746/0.02)² → 5
    assert priced[0] == "a (math): 2 more seeds"
    assert other[0].startswith("b (math): not decidable") and f"within {MAX_SEEDS} seeds" in other[0]
    assert other[1] == "d (math): 5 seeds per arm, at a cost not measured yet"
    assert extra == pytest.approx(4 * 2 * 0.1)  # 2 more seeds of a and of c, and of each cell's baseline
    meta = {"commands": ["grpo-lab plan m.yaml", "grpo-lab sweep m.yaml --name mine --runner ray", "grpo-lab report mine"]}
    blocks = recommendation(pl.DataFrame(rows), meta, {"total": 1.0}, "core-h", policy)
    (code,) = [b for b in blocks if isinstance(b, Code)]
    assert code.lines == ["grpo-lab sweep m.yaml --name mine --runner ray --decide --budget 1.8"]


def test_a_decide_sweep_keeps_its_options_and_is_not_priced_by_the_fixed_design():
    cmd = "grpo-lab sweep m.yaml --decide --budget 4 --delta 0.03 --most-seeds 16 --estimand mean"
    assert decide_command([cmd], "B") == "grpo-lab sweep m.yaml --decide --delta 0.03 --most-seeds 16 --estimand mean --budget B"
    blocks = recommendation(pl.DataFrame([row("a", "undecided", p_holm=None)]), {"commands": [cmd]},
                            {"total": 4.0}, "core-h", VerdictPolicy())
    assert "more seeds" not in texts(blocks)[3] and "B: the core-h it may spend in all, more than the 4 spent" in texts(blocks)[4]


def test_a_cell_where_no_run_learnt_opens_the_box_with_why():
    why = "taught nothing: 100% of groups scored the same on every sample; start easier"
    runs = pl.DataFrame({"model": ["tiny"] * 4, "task": ["mine", "mine", "math", "math"],
                         "diagnosis": [why, why, why, None]})
    got = texts(recommendation(pl.DataFrame([row("a", "undecided", task="mine")]), {}, {}, "core-h",
                               VerdictPolicy(), runs))
    assert got[0] == f"No run of tiny / mine learnt (2 runs); the first says it {why}"
    assert not any("tiny / math" in t for t in got)  # one of its runs learnt
    assert got[1].startswith("Adopt: none")
