"""One contract over every catalog trick: a short run with the trick differs from the baseline
run (same seed) in the trick's signature metrics. Adding a trick to the catalog adds it here."""

import fnmatch
import json

import pytest

from grpo_lab.spec.tricks import DIMENSIONS, load_catalog
from grpo_lab.trainer.grpo import train
from grpo_lab.util.dicts import deep_merge

CATALOG = load_catalog()
STEPS = 5


def series(out, patterns):
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    keys = sorted({k for r in rows for k in r if any(fnmatch.fnmatch(k, p) for p in patterns)})
    return {k: [r.get(k) for r in rows] for k in keys}


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    cache = {}

    def get(needs: dict):
        key = json.dumps(needs, sort_keys=True)
        if key not in cache:
            from tests.conftest import tiny_cfg

            out = tmp_path_factory.mktemp("baseline")
            train(tiny_cfg(**deep_merge(CONTRACT, needs)), out)
            cache[key] = out
        return cache[key]

    return get


# The trick's controllers keep their settings but act often enough to show in a short run.
CADENCE = {"sampling": {"group_check_every": 2}, "reference": {"sync_every": 2}}
# Enough steps and prompts for controllers (dynamic G, curricula, syncs) to act.
CONTRACT = {"steps": STEPS, "seed": 3, "eval": {"every": 100},
            "sampling": {"prompts_per_step": 6, "group_size": 8, "group_check_every": 2},
            "reference": {"sync_every": 2}}


def test_catalog_entries_are_well_formed():
    assert len(CATALOG) >= 19
    for t in CATALOG.values():
        assert t.dimension in DIMENSIONS and t.description and t.signature, t.name


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_trick_signature_shows_in_metrics(name, baselines, tmp_path):
    from tests.conftest import tiny_cfg

    trick = CATALOG[name]
    base_out = baselines(trick.needs)
    settings = deep_merge(deep_merge(CONTRACT, trick.needs), {"tricks": [name]})
    train(tiny_cfg(after=CADENCE, **settings), tmp_path)
    ours, theirs = series(tmp_path, trick.signature), series(base_out, trick.signature)
    assert ours, f"{name}: no metric matches its signature {trick.signature}"
    differs = [k for k in ours if ours[k] != theirs.get(k)]
    assert differs, f"{name}: signature {trick.signature} identical to the baseline run"
