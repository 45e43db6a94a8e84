"""The paired (seeds x problems) contrast: its 95% CI covers a known effect 90-97% of the time."""

import json

import numpy as np
import pytest
from scipy import stats

from grpo_lab.analysis import paired

SD = {"problem": 0.2, "arm_problem": 0.05, "seed": 0.03, "resid": 0.1}


def simulate(rng, mu, n, P, sd=SD, shared_seeds=False):
    """Arms' seeds x problems matrices from the module's model with known arm means mu."""
    u = rng.normal(0, sd["problem"], P)
    w_shared = rng.normal(0, sd["seed"], n) if shared_seeds else None
    out = []
    for m in mu:
        w = 0.6 * w_shared + 0.8 * rng.normal(0, sd["seed"], n) if shared_seeds else rng.normal(0, sd["seed"], n)
        v = rng.normal(0, sd["arm_problem"], P)
        out.append(m + u + v + w[:, None] + rng.normal(0, sd["resid"], (n, P)))
    return out


def coverage(coefs, mu, n, P, reps=1000, shared_seeds=False, population=True, seed=0, sd=SD):
    rng = np.random.default_rng(seed)
    truth = float(np.dot(coefs, mu))
    hits = 0
    for _ in range(reps):
        arms = simulate(rng, mu, n, P, sd, shared_seeds)
        seeds = [tuple(range(n))] * len(arms) if shared_seeds else [tuple(range(i * n, (i + 1) * n)) for i in range(len(arms))]
        e = paired.contrast(arms, coefs, seeds, population=population)
        half = stats.t.ppf(0.975, e.df) * e.se
        hits += abs(e.est - truth) <= half
    return hits / reps


@pytest.mark.parametrize("coefs,mu,n,shared", [
    ([1, -1], [0.35, 0.30], 5, False),  # effect vs baseline, independent seeds
    ([1, -1], [0.35, 0.30], 4, True),  # same seed indices: paired over seeds too
    ([1, -1, -1, 1], [0.5, 0.4, 0.35, 0.3], 4, False),  # interaction vs additive (2 tricks)
])
def test_paired_ci_covers_the_known_effect(coefs, mu, n, shared):
    cov = coverage(coefs, mu, n, P=60, shared_seeds=shared)
    assert 0.90 <= cov <= 0.97, cov


def test_test_set_only_ci_undercovers_when_arms_differ_by_problem():
    """The problem part is real: with a large arm-by-problem effect, a CI that treats the test
    set as fixed misses the population effect far more often than 5%."""
    sd = {**SD, "arm_problem": 0.2, "seed": 0.01}
    assert coverage([1, -1], [0.3, 0.3], 6, 40, reps=400, population=False, sd=sd) < 0.8
    assert 0.90 <= coverage([1, -1], [0.3, 0.3], 6, 40, reps=400, sd=sd) <= 0.97


def test_problem_frame_reads_final_records_and_aligns_problems(tmp_path):
    def run(name, tricks, seed, ys):
        folder = tmp_path / name / "eval"
        folder.mkdir(parents=True)
        rows = [{"task": "math", "uid": f"p{i}", "samples": 4, "passes": y, "reward_mean": y / 4} for i, y in ys]
        (folder / "problems-000010.json").write_text(json.dumps({"step": 9, "rows": rows}))
        (folder / "problems-base.json").write_text(json.dumps({"step": -1, "rows": []}))
        return {"model": "tiny", "task": "math", "tricks": tricks, "seed": seed}, tmp_path / name

    runs = [run("a", "", 0, [(0, 4), (1, 0), (2, 2)]), run("b", "", 1, [(0, 4), (1, 2), (2, 2)]),
            run("c", "kl_anneal", 0, [(0, 2), (2, 2)])]  # this run lacks p1: it is dropped for all
    arms = paired.cell_matrices(paired.problem_frame(runs))[("tiny", "math")]
    seeds, Y = arms["baseline"]
    assert seeds == (0, 1) and Y.tolist() == [[1.0, 0.5], [1.0, 0.5]]
    assert arms["kl_anneal"][1].tolist() == [[0.5, 0.5]]
