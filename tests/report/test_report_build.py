"""The report files: every section present, images that decode, no external reference, escaping,
atomic writes, and inputs with nothing but runs."""

from __future__ import annotations

import base64
import io
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from PIL import Image as PILImage

import grpo_lab.report as report_module
from grpo_lab.report import ReportData, write_report
from tests.conftest import SECTION_IDS


def _decode(png: bytes) -> tuple[int, int]:
    image = PILImage.open(io.BytesIO(png))
    assert image.format == "PNG"
    image.load()
    return image.size


def test_html_has_every_section_and_no_external_reference(written: tuple[Path, Path]) -> None:
    html_path, _ = written
    page = html_path.read_text(encoding="utf-8")
    for section in SECTION_IDS:
        assert f'<section id="{section}">' in page
    assert "http://" not in page and "https://" not in page
    assert "<script" not in page.lower()
    # The hostile warning text arrives escaped, not as markup.
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page and "<b>not bold" not in page
    assert "harmful in combination" in page and "negative_interaction" in page


def test_html_images_are_inline_pngs(written: tuple[Path, Path]) -> None:
    page = written[0].read_text(encoding="utf-8")
    sources = re.findall(r'<img src="([^"]+)"', page)
    assert len(sources) == 7  # the forest, 2 curve + 2 length figures, the timeline, the heatmap
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        width, height = _decode(base64.b64decode(src.split(",", 1)[1]))
        assert width > 100 and height > 100


def test_markdown_references_png_files_beside_it(written: tuple[Path, Path]) -> None:
    _, md_path = written
    text = md_path.read_text(encoding="utf-8")
    for section in SECTION_IDS:
        assert f'<a id="{section}"></a>' in text
    paths = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(paths) == 7
    for rel in paths:
        assert not Path(rel).is_absolute()
        _decode((md_path.parent / rel).read_bytes())
    assert r"kl\_decay+ema\_ref" in text and r"\<b\>not bold\</b\>" in text
    assert "http://" not in text and "https://" not in text


def test_verdicts_follow_effects_ci_cost_and_interactions(report_data: ReportData) -> None:
    from grpo_lab.report.verdicts import VerdictPolicy, run_stats, verdict_table

    d = report_data
    verdicts = verdict_table(run_stats(d.runs), d.effects, d.interactions, VerdictPolicy())
    got = {(r["task"], r["tricks"]): r["verdict"] for r in verdicts.iter_rows(named=True)}
    assert got[("logic", "kl_decay")] == "worth it"
    assert got[("math", "kl_decay")] == "harmful in combination"  # part of the flagged pair
    assert got[("math", "ema_ref")] == "harmful in combination"
    assert got[("math", "ema_ref+adv_clip")] == "worth it"  # superset rule is one way only
    assert got[("logic", "adv_clip")] == "undecided"  # CI includes 0
    assert got[("logic", "group16")] == "not worth its cost"  # +1 pt for 2x the hours
    assert got[("logic", "lr_high")] == "harmful"
    assert ("math", "baseline") not in got


def test_chosen_sets_put_baseline_then_flagged_first(report_data: ReportData) -> None:
    from grpo_lab.report.figure_data import pick_trick_sets

    chosen = pick_trick_sets(report_data.runs, report_data.effects, report_data.interactions,
                             max_sets=3).filter(pl.col("task") == "math").sort("rank")
    assert chosen["tricks"].to_list() == ["baseline", "kl_decay+ema_ref", "kl_decay"]


def test_only_runs_still_renders_every_section(tmp_path: Path) -> None:
    runs = pl.DataFrame({"model": ["m"], "task": ["t"], "tricks": ["baseline"], "seed": [0],
                         "run_id": ["r0"], "status": ["finished"]})
    html_path, md_path = write_report(
        ReportData(runs, pl.DataFrame(), pl.DataFrame(), pl.DataFrame()), tmp_path)
    page = html_path.read_text(encoding="utf-8")
    for section in SECTION_IDS:
        assert f'<section id="{section}">' in page
    assert "No effects yet" in page and "No combinations" in page
    assert md_path.exists()


def test_a_failed_render_leaves_the_previous_report(
        report_data: ReportData, written: tuple[Path, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(written[0].parent, tmp_path, dirs_exist_ok=True)
    html_path, md_path = tmp_path / "index.html", tmp_path / "report.md"
    before = html_path.read_bytes(), md_path.read_bytes()

    def crash(_doc: object, _href: object) -> str:
        raise RuntimeError("renderer died")

    monkeypatch.setattr(report_module, "render_html", crash)
    with pytest.raises(RuntimeError):
        write_report(report_data, tmp_path)
    assert html_path.read_bytes() == before[0]
    assert md_path.read_bytes() == before[1]  # rewritten before the crash: same inputs, same bytes
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob("**/.*.tmp"))


def test_atomic_write_cleans_up_when_the_write_fails(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "index.html"
    target.write_text("old")

    def boom(src: str, dst: object) -> None:
        raise OSError("disk full")

    from grpo_lab.util import files

    monkeypatch.setattr(files.os, "replace", boom)
    with pytest.raises(OSError):
        files.atomic_write(target, b"new", durable=True)
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_the_cost_basis_is_named_and_contention_is_warned() -> None:
    from grpo_lab.report.costs import cost_blocks
    from tests.report.conftest import make_data

    data = make_data()
    data.costs.update(cpu_hours=1.0, cpu_runs_wall_hours=2.4, cpu_runs=3)
    text = " ".join(b.text for b in cost_blocks(data, "core-h") if hasattr(b, "text"))
    assert "Cost basis: wall-clock time × devices held" in text and "(2.40x)" in text
    assert "Warning: wall time is 2.4x the CPU time" in text
    data.costs.update(cpu_runs_wall_hours=1.2)
    assert "Warning" not in " ".join(b.text for b in cost_blocks(data, "core-h") if hasattr(b, "text"))
