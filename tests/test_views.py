"""Live progress from heartbeats: per cell, the sweep's ETA, plain lines off a terminal."""

import io
import json
import time
from types import SimpleNamespace

from rich.console import Console

from grpo_lab.execution.runners.base import Outcome
from grpo_lab.views import SweepProgress, cell_progress, fmt_seconds


def beat(folder, **fields):
    (folder / "heartbeat.json").write_text(json.dumps(fields))


def test_cell_progress_reads_step_reward_and_eta_from_the_heartbeat(tmp_path):
    now = 1000.0
    assert cell_progress(tmp_path, now) is None  # no heartbeat before the first step
    # 60 s of setup before the first step ended at 960, then 2 s a step: setup is not in the pace
    beat(tmp_path, attempt=1, started=900.0, first_step_at=962.0, updated=1000.0, step=20, steps=200,
         start_step=0, reward=0.41)
    got = cell_progress(tmp_path, now)
    assert (got.step, got.steps, got.reward, got.elapsed) == (20, 200, 0.41, 100.0)
    assert got.eta == 360.0 and got.fraction == 0.1  # 2 s a step, 180 steps to go
    beat(tmp_path, attempt=1, started=900.0, first_step_at=962.0, updated=962.0, step=1, steps=200, start_step=0)
    assert cell_progress(tmp_path, now).eta is None  # one step says nothing about the pace
    # a resumed attempt's pace and share count only its own steps
    beat(tmp_path, attempt=2, started=900.0, first_step_at=980.0, updated=1000.0, step=111, steps=200,
         start_step=100)
    got = cell_progress(tmp_path, now)
    assert got.eta == 178.0 and got.fraction == 0.11
    # the time since the last heartbeat is already spent
    assert cell_progress(tmp_path, now + 40).eta == 138.0
    # a resumed run's new attempt before its first step: the last attempt's heartbeat is not its progress
    assert cell_progress(tmp_path, now + 600, attempt=3) is None
    assert cell_progress(tmp_path, now, attempt=2).step == 111


def cell(folder, run_id="r1"):
    return SimpleNamespace(run_id=run_id, model="tiny", task="math", tricks="", seed=0,
                           run=SimpleNamespace(out_dir=str(folder), attempts=[SimpleNamespace(number=1)]))


def test_off_a_terminal_progress_is_printed_as_plain_lines(tmp_path):
    out = io.StringIO()
    console = Console(file=out, width=200)  # not a terminal
    progress = SweepProgress(console, total=4, done_before=1, every=0.05)
    assert progress.live is None
    with progress:
        progress("start", cell(tmp_path), None)
        beat(tmp_path, attempt=1, started=time.time() - 10, updated=time.time(), step=5, steps=10, start_step=0,
             reward=0.5)
        time.sleep(0.3)
        progress("end", cell(tmp_path), Outcome(job=None, status="finished", error=None, summary=None, wall_seconds=1.0))
    text = out.getvalue()
    assert "1/4 done, 1 running" in text and "running r1  tiny / math / baseline / seed 0  step 5/10" in text
    assert "reward 0.500" in text and "finished r1" in text and "2/4 done" not in text.split("finished r1")[0]


def test_the_sweeps_eta_counts_running_cells_by_their_step():
    progress = SweepProgress(Console(file=io.StringIO()), total=5, done_before=1)
    progress.t0 = time.time() - 100  # 100 s into this session, 1 of 4 cells done, one half way
    progress.done = 2
    half = SimpleNamespace(fraction=0.5)
    assert abs(progress.eta([half]) - 100 * (1 - 1.5 / 4) / (1.5 / 4)) < 1
    assert fmt_seconds(90) == "90s" and fmt_seconds(600) == "10m" and fmt_seconds(None) == "-"


def test_the_sweeps_eta_waits_for_its_first_done_cell():
    """Before a cell is done, the elapsed time is mostly setup: extrapolating it gave '111m'."""
    progress = SweepProgress(Console(file=io.StringIO()), total=10, done_before=0)
    progress.t0 = time.time() - 60
    assert progress.eta([SimpleNamespace(fraction=0.02), SimpleNamespace(fraction=0.02)]) is None
    assert SweepProgress(Console(file=io.StringIO()), total=3, done_before=3).eta([]) == 0.0


def test_the_closing_line_gives_an_undecided_rows_holm_p_beside_its_uncorrected_interval():
    import polars as pl

    from grpo_lab.views import decision_summary

    rows = pl.DataFrame([
        {"model": "tiny", "task": "math", "tricks": "a", "verdict": "harmful", "effect": -0.07, "ci_low": -0.09,
         "ci_high": -0.05, "p_holm": 0.001, "n": 2, "family": 2},
        {"model": "tiny", "task": "math", "tricks": "b", "verdict": "undecided", "effect": -0.026, "ci_low": -0.047,
         "ci_high": -0.004, "p_holm": 0.09, "n": 2, "family": 2}])
    first, last = decision_summary(rows, "quickstart")
    assert "decided: a -0.070 [-0.090, -0.050] harmful." in first
    assert "Undecided (1): b -0.026 [-0.047, -0.004] (Holm p 0.09)." in first
    # half-width 0.0215 at 2 seeds, widened for the first Holm step of 2: 2·(0.0215·(2.241/1.960)/0.02)² = 3.02 → 4
    assert "About 4 seeds per arm would resolve ±0.02" in first
    assert "labels and Holm p corrected over the table" in last


def test_runs_of_an_arm_screen_dropped_read_dropped_at_their_rung_not_pending(tmp_path):
    from grpo_lab.execution.screen import dropped_at
    from grpo_lab.views import runs_table

    def run_cell(run_id, tricks, position, status):
        run = SimpleNamespace(status=status, error=None, out_dir=str(tmp_path / run_id), gpu_hours=0.01, devices=1,
                              attempts=[SimpleNamespace(number=1, status="paused", job_id=None)])
        return SimpleNamespace(run_id=run_id, model="tiny", task="math", tricks=tricks, seed=0, position=position,
                               run=run)

    record = {"rule": {}, "rungs": [
        {"rung": 0, "step": 2, "drops": [], "unread": {}},
        {"rung": 1, "step": 4, "drops": [{"arm": ["tiny", "math", "ema_reference"], "run_ids": ["e0"],
                                          "hours": 0.01, "hours_saved": 0.01}], "unread": {}}]}
    sweep = SimpleNamespace(name="scr", unit="device-hours", screen_json=json.dumps(record),
                            cells=[run_cell("b0", "", 0, "pending"), run_cell("e0", "ema_reference", 1, "pending")])
    assert dropped_at(sweep) == {"e0": (2, 4)}
    assert dropped_at(SimpleNamespace(screen_json=None)) == {}
    console = Console(record=True, width=250)
    console.print(runs_table(sweep, driving=True, dropped=dropped_at(sweep)))
    rows = {rid: line for line in console.export_text().splitlines() for rid in ("b0", "e0") if f" {rid} " in line}
    assert "dropped (rung 2, step 4)" in rows["e0"] and "pending" not in rows["e0"]
    assert "pending" in rows["b0"] and "dropped" not in rows["b0"]


def test_every_status_an_attempt_can_end_with_prints_in_the_live_view():
    """A screened sweep's attempts end `paused`: the view's line must print it (an unstyled status
    once made an empty markup tag, and the CLI sweep died at the first rung)."""
    from grpo_lab.execution.registry import STATUSES
    from grpo_lab.views import styled

    statuses = (*STATUSES, "paused", "preempted", "interrupted", "dropped (rung 1, step 2)", "new-status")
    console = Console(record=True, width=80)
    for status in statuses:
        console.print(styled(f"{status:>8}"))
    assert console.export_text().split() == [word for status in statuses for word in status.split()]
