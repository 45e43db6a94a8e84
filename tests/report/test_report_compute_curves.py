"""The "Compute curves" section: fitted curves drawn per cell, the A/B/C_mid table with the two
verdicts and the prediction at 10x, the undecided rows' reasons, and a note when nothing fits."""

from __future__ import annotations

import io
import math

import numpy as np
import polars as pl
from PIL import Image as PILImage

from grpo_lab.analysis import curve_verdicts as cvd
from grpo_lab.analysis import curves as cv
from grpo_lab.report import ReportData, write_report
from grpo_lab.report.compute_curves import curve_blocks
from grpo_lab.report.render import Image, Paragraph, Table

C = np.linspace(0.05, 1.0, 12)


def arm(rng, tricks: str, A: float, seeds: int = 6, collapse_at: int | None = None) -> cv.ArmFits:
    fits = []
    for s in range(seeds):
        a = 0.01 if s == collapse_at else A + rng.normal(0, 0.003)
        y = cv.saturating(C, 0.2, a, 1.5, 0.15 * math.exp(rng.normal(0, 0.05))) + rng.normal(0, 0.002, C.size)
        fits.append(cv.fit_run(C, y, 0.2))
    return cv.ArmFits("tiny", "math", tricks, cv.arm_curve(fits), (), "device-hours")


def test_the_section_draws_each_cell_and_tables_both_verdicts():
    rng = np.random.default_rng(3)
    arms = [arm(rng, "baseline", 0.5), arm(rng, "up", 0.6, collapse_at=0), arm(rng, "same", 0.5)]
    blocks = curve_blocks(arms, cvd.verdicts(arms))
    images = [b for b in blocks if isinstance(b, Image)]
    assert len(images) == 1 and PILImage.open(io.BytesIO(images[0].png)).size[0] > 300
    table = next(b for b in blocks if isinstance(b, Table))
    rows = {r[2]: dict(zip([h.split(" ")[0] for h in table.headers], r)) for r in table.rows}
    assert "ceiling (seeds that did not collapse)" in table.headers  # the estimand in the header
    assert rows["up"]["ceiling"] == "raises the ceiling" and rows["up"]["collapsed"].startswith("collapsed 1 of 6")
    assert rows["same"]["ceiling"] == "same ceiling (±0.02)"
    assert rows["baseline"]["ceiling"] == "(baseline)"
    assert "[" not in rows["up"]["pass@1"] and " at 10" in rows["up"]["pass@1"]  # a point at 10x, no interval
    decide = curve_blocks(arms, cvd.verdicts(arms), decided=True)
    assert "no ceiling or speed labels: this is a --decide sweep" in decide[0].text
    assert all(r[-2:] == ["-", "-"] for r in next(b for b in decide if isinstance(b, Table)).rows)


def test_no_fittable_run_is_said_with_what_to_change():
    empty = cv.ArmFits("tiny", "math", "baseline", cv.arm_curve([]), ("r1: a curve needs at least 2 eval points",),
                       "-")
    (note,) = curve_blocks([empty], [])
    assert isinstance(note, Paragraph) and "eval.every" in note.text and "r1" in note.text


def test_the_written_report_carries_the_section(tmp_path):
    rng = np.random.default_rng(4)
    arms = [arm(rng, "baseline", 0.5), arm(rng, "down", 0.4)]
    runs = pl.DataFrame({"model": ["tiny"], "task": ["math"], "tricks": ["baseline"], "seed": [0], "run_id": ["r"],
                         "pass@1": [0.5]})
    _, md = write_report(ReportData(runs, pl.DataFrame({"run_id": ["r"], "step": [0]}), pl.DataFrame(),
                                    pl.DataFrame(), curves=arms), tmp_path)
    text = md.read_text()
    assert '<a id="compute"></a>' in text and "lowers the ceiling" in text
    assert "report_files/compute-curve-00.png" in text
