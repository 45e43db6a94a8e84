"""One contract over every catalog trick: a short run with the trick differs from the baseline
run (same seed) in the trick's signature metrics by more than float rounding, and where the
catalog implies which way (a larger group samples more, a length penalty lowers the shaped
reward), it moves that way. Adding a trick to the catalog adds it here."""

import fnmatch
import json

import pytest

from grpo_lab.spec.tricks import DIMENSIONS, load_catalog
from grpo_lab.trainer.grpo import train
from grpo_lab.util.dicts import deep_merge
from tests.conftest import ROOT

CATALOG = load_catalog()
STEPS = 5
# A trick that cannot act still moves a metric by float rounding (a sequence ratio of exactly 1
# differs from token ratios by ~1e-7 in the gradient norm), so "differs" means by more than this.
REL_TOL = 1e-6


def series(out, patterns):
    rows = [json.loads(l) for l in (out / "metrics.jsonl").read_text().splitlines()]
    keys = sorted({k for r in rows for k in r if any(fnmatch.fnmatch(k, p) for p in patterns)})
    return {k: [r.get(k) for r in rows] for k in keys}


# The trick's controllers keep their settings but act often enough to show in a short run.
CADENCE = {"sampling": {"group_check_every": 2}, "reference": {"sync_every": 2}}
# Enough steps and prompts for controllers (dynamic G, curricula, syncs) to act.
CONTRACT = {"steps": STEPS, "seed": 3, "eval": {"every": 100},
            "sampling": {"prompts_per_step": 6, "group_size": 8, "group_check_every": 2},
            "reference": {"sync_every": 2}}


# The code task's tricks act on tokens (the loss mask), not on solved problems: a one-probe warm
# start serves them (tiny-fast's to its target took 250 s of CI on a cold cache).
TASK_MODELS = {"code": str(ROOT / "tests" / "data" / "tiny-fast-code.yaml")}


def with_model(needs: dict) -> dict:
    model = TASK_MODELS.get(needs.get("task"))
    return deep_merge({"model": model}, needs) if model else needs


def baseline_cfg(needs: dict):
    from tests.conftest import tiny_cfg

    return tiny_cfg(**deep_merge(CONTRACT, with_model(needs)))


def trick_cfg(name: str):
    from tests.conftest import tiny_cfg

    settings = deep_merge(deep_merge(CONTRACT, with_model(CATALOG[name].needs)), {"tricks": [name]})
    return tiny_cfg(after=CADENCE, **settings)


# Which way a signature metric moves against the baseline, and where that is checked: each
# trick's `directions` in experiments/tricks.yaml (every_step or first_step, explained there).
UP, DOWN = 1, -1
EVERY, FIRST = "every_step", "first_step"
SIGNS = {"up": UP, "down": DOWN}

# Metrics that report a config value (or follow one): their direction comes from the trick's
# resolved config against the baseline's, so a new catalog entry (group_size_32, a lower
# temperature) is checked without a `directions` entry.
CONFIG_VALUES = {
    "sampling/group_size": lambda c: c.sampling.group_size,
    "samples/total": lambda c: c.sampling.prompts_per_step * c.sampling.group_size,
    "sampling/temperature": lambda c: c.sampling.temperature,
    "train/grad_clip": lambda c: c.optim.grad_clip or 0.0,
    "train/lr": lambda c: c.optim.lr,
    "kl/beta": lambda c: c.kl.beta,
}


def catalog_directions(name: str) -> dict[str, tuple[int, str]]:
    return {m: (SIGNS[d.move], d.check) for m, d in CATALOG[name].directions.items()}


def expected_directions(name: str, ours_cfg, base_cfg) -> dict[str, tuple[int, str]]:
    """metric -> (UP or DOWN, EVERY or FIRST) for the trick's run against the baseline's."""
    derived = {}
    for metric, value in CONFIG_VALUES.items():
        change = value(ours_cfg) - value(base_cfg)
        if change:
            derived[metric] = (UP if change > 0 else DOWN, EVERY)
    return {**derived, **catalog_directions(name)}


def relative_gap(ours: list, theirs: list) -> float:
    """The largest |a - b| / max(|a|, |b|) over the steps both runs logged; 0 where both are 0."""
    gaps = [abs(a - b) / max(abs(a), abs(b)) for a, b in zip(ours, theirs)
            if a is not None and b is not None and (a or b)]
    return max(gaps, default=0.0)


def direction_error(ours: list, theirs: list, sign: int, scope: str) -> str | None:
    """Why the trick's series does not move `sign`-wards of the baseline's over `scope`; None if it does."""
    gaps = [sign * (a - b) for a, b in zip(ours, theirs) if a is not None and b is not None]
    if not gaps:
        return "no step where both runs logged it"
    if scope == FIRST:
        return None if gaps[0] > 0 else f"first step not strictly {'above' if sign > 0 else 'below'}"
    if any(g < 0 for g in gaps):
        return f"on the wrong side at step(s) {[i for i, g in enumerate(gaps) if g < 0]}"
    return None if any(g > 0 for g in gaps) else "never strictly on its side"


@pytest.fixture(scope="module")
def baselines(tmp_path_factory):
    cache = {}

    def get(needs: dict):
        key = json.dumps(needs, sort_keys=True)
        if key not in cache:
            out = tmp_path_factory.mktemp("baseline")
            train(baseline_cfg(needs), out)
            cache[key] = out
        return cache[key]

    return get


def test_catalog_entries_are_well_formed():
    assert len(CATALOG) >= 19
    for t in CATALOG.values():
        assert t.dimension in DIMENSIONS and t.description and t.signature, t.name
        assert t.equivalents and all(vars(t.equivalents).values()), f"{t.name}: no TRL / verl / OpenRLHF equivalent"


def test_directions_name_metrics_of_their_signature():
    with_directions = [t for t in CATALOG.values() if t.directions]
    assert len(with_directions) >= 19
    for t in with_directions:
        for metric in t.directions:
            assert any(fnmatch.fnmatch(metric, p) for p in t.signature), (t.name, metric)


def test_relative_gap_ignores_rounding_and_sees_a_real_change():
    assert relative_gap([1.0, 2.0], [1.0 + 2e-7, 2.0]) < REL_TOL
    assert relative_gap([0.0, 0.0], [0.0, 0.0]) == 0.0
    assert relative_gap([0.0, 0.5], [0.0, 0.0]) == 1.0
    assert relative_gap([1.0, None], [1.1, 3.0]) == pytest.approx(0.1 / 1.1)


def test_config_values_give_the_direction():
    base = baseline_cfg({})
    assert expected_directions("group_size_16", trick_cfg("group_size_16"), base) == {
        "sampling/group_size": (UP, EVERY), "samples/total": (UP, EVERY)}
    assert expected_directions("low_temperature", trick_cfg("low_temperature"), base) == {
        "sampling/temperature": (DOWN, EVERY)}
    assert expected_directions("dynamic_group_size", trick_cfg("dynamic_group_size"), base) == {}


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_trick_signature_shows_in_metrics(name, baselines, tmp_path):
    trick = CATALOG[name]
    base_out = baselines(trick.needs)
    ours_cfg = trick_cfg(name)
    train(ours_cfg, tmp_path)
    ours, theirs = series(tmp_path, trick.signature), series(base_out, trick.signature)
    assert ours, f"{name}: no metric matches its signature {trick.signature}"
    gaps = {k: relative_gap(ours[k], theirs.get(k) or []) for k in ours}
    assert max(gaps.values()) > REL_TOL, f"{name}: signature within float rounding of the baseline run: {gaps}"
    wrong = {}
    for k, (sign, scope) in expected_directions(name, ours_cfg, baseline_cfg(trick.needs)).items():
        if k in ours and (error := direction_error(ours[k], theirs.get(k) or [], sign, scope)):
            wrong[k] = f"{error}: {ours[k]} vs baseline {theirs.get(k)}"
    assert not wrong, f"{name}: not the direction the catalog implies: {wrong}"
