"""The budget-tier presets are data (experiments/presets.yaml): picks by name, catalog and task."""

import pytest

from grpo_lab.spec.budget import preset, preset_yaml
from grpo_lab.spec.matrix import TIERS
from grpo_lab.spec.presets import ByTask, CatalogPick, FromCatalog, load_presets, pick_tricks
from grpo_lab.spec.tricks import load_catalog
from grpo_lab.util.paths import ROOT
from grpo_lab.util.yamlio import ConfigError


def test_the_shipped_presets_cover_every_tier_and_name_catalog_tricks():
    presets = load_presets()
    assert set(presets.tiers) == set(TIERS)
    catalog = load_catalog()
    for tier in TIERS:
        for task in ("math", "code"):
            axis = preset(tier, "qwen2.5-7b", task)["tricks"]
            names = [n for e in axis if isinstance(e, dict) for v in e.values()
                     for n in (v if isinstance(v[0], str) else [x for c in v for x in c])]
            assert names and set(names) <= set(catalog), (tier, task)


def test_picks_by_name_catalog_and_task():
    catalog = load_catalog()
    kl = [t.name for t in catalog.values() if t.dimension == "kl"]
    assert pick_tricks([FromCatalog(catalog=CatalogPick(dimensions=["kl"], leave_out=["kl_anneal"]))], "math") == \
        [n for n in kl if n != "kl_anneal"]
    sets_g = pick_tricks([FromCatalog(catalog=CatalogPick(sets=["sampling.group_size"]))], "math")
    assert sets_g == [t.name for t in catalog.values() if "group_size" in t.settings.get("sampling", {})]
    by_task = ByTask(by_task={"code": ["code_token_mask"], "other": ["format_mask"]})
    assert pick_tricks(["lr_warmup", by_task], "code") == ["lr_warmup", "code_token_mask"]
    assert pick_tricks(["lr_warmup", by_task], "logic") == ["lr_warmup", "format_mask"]


def test_a_project_presets_file_replaces_the_shipped_one(tmp_path, monkeypatch):
    text = (ROOT / "experiments" / "presets.yaml").read_text()
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "presets.yaml").write_text(
        text.replace("seeds: 1\n", "seeds: 4\n").replace("only tune G and beta", "our own tier"))
    monkeypatch.chdir(tmp_path)
    assert preset("100", "qwen2.5-7b", "math")["seeds"] == [0, 1, 2, 3]
    assert "our own tier" in preset_yaml("100", "qwen2.5-7b", "math")


def test_a_malformed_presets_file_names_its_line(tmp_path, monkeypatch):
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "presets.yaml").write_text(
        "min_steps: 100\nscale: {steps: 600}\ntiers:\n  '100':\n    text: t\n    seeds: 1\n    base: {}\n"
        "    tricks: [baseline, {singls: [a]}]\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"presets.yaml:8"):
        load_presets()
    (tmp_path / "experiments" / "presets.yaml").write_text("min_steps: 100\nscale: {steps: 600}\ntiers: {}\n")
    with pytest.raises(ConfigError, match="no preset for tier '1k'"):
        preset("1k", "qwen2.5-7b", "math")
