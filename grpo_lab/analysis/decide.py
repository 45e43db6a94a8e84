"""Decide comparisons under optional stopping, and spend the next runs where verdicts can close.

Pure functions; the `--decide` loop (grpo_lab/execution/waves.py) only feeds them the per-seed
scores of finished runs (arm -> {seed index: score}) and records what they return.

Comparisons, within one (model, task), over arm means μ_a:

    effect of S        θ = μ_S − μ_B                      (every non-baseline arm)
    interaction of C   θ = μ_C − Σ_{t∈C} μ_t + (k−1)·μ_B  (observed − additive; every combination
                                                           whose k singles ran)

Method: anytime-valid confidence sequences, one of SEQUENCES, each holding at every wave at once:

    t         (default) the scale-invariant normal mixture (analysis/tmix.py): exact for Gaussian
              noise of any variance, estimated per comparison (no pooled noise, so one noisy arm
              widens only its own comparisons); measured valid under heavy tails, collapsed
              seeds, one arm 9x noisier and pass rates near 0 and 1, not under a skewed null
              (a trick that collapses a few seeds and lifts the rest: docs/results.md)
    betting   the betting sequence for bounded outcomes (Waudby-Smith & Ramdas 2023,
              analysis/betting.py): valid for any distribution of a run's score in [0, 1], at
              the price below

Each on one of two pairings, METHODS:

    paired    (default) D_i = Σ_a c_a·y_{a,i} over the seed indices i that every arm of the
              comparison ran, in seed order. Arms given the same seed index share prompt order and
              sampling streams (common random numbers), and seed indices are independent draws, so
              D_1, D_2, ... are i.i.d. with mean θ and lie in [Σ_{c<0} c, Σ_{c>0} c]. One
              sequence per comparison at α/K, K the comparisons of the sweep (Bonferroni).
    unpaired  one sequence per arm mean (range [0, 1]) at α/A, A the arms of the sweep;
              a comparison's interval is their interval sum [Σ c_a·(L_a or U_a), ...]. All arms'
              sequences hold at once with probability ≥ 1 − α, so every comparison does.

New seeds always take an arm's next unused indices and a wave finishes before it is analysed, so
each sequence only ever grows by appending; which arms grow is chosen from past data only. So,
within each sequence's assumptions, with probability ≥ 1 − α every verdict below is right at
every wave, whenever the sweep stops:

    significant  the interval excludes 0
    equivalent   the interval lies inside (−δ, δ)  (TOST by confidence sequence)
    open         neither yet

A comparison keeps the first verdict it reaches (contradicting it later needs a miss, which the
guarantee already counts).

The price of holding for every bounded distribution (betting): a seed's paired difference could
be anywhere in its range, so even without noise an interval narrows by about log(2/α_K)/(C·t) of
the range after t seeds; at α = 0.05 over 45 comparisons a ±0.02 equivalence on pass@1 needs ~420
seeds per arm whatever the noise (betting.min_samples). The t sequence needs what the noise needs:
at α_K = 0.05/45 about 1.5-1.75x the seeds of a fixed-n t-test (7, 12, 26, 56 for its 4, 8, 16,
32), the price of looking at every wave. `needs` says either before seeds are spent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from grpo_lab.analysis import betting, tmix

VERDICTS = ("significant", "equivalent", "open")
METHODS = ("paired", "unpaired")
# the confidence sequence behind every interval: same interface (bounds, radius), different assumptions
SEQUENCES = {"t": tmix, "betting": betting}
# How hopeful planning is about an open comparison (standard errors toward its easier verdict):
# on benchmarks/decide.py 1 decides as many comparisons as 2 (recall of real effects equal) with
# 5-28% fewer runs; 0.5 starts giving up comparisons that would have closed.
PLAN_SE = 1.0


@dataclass(frozen=True)
class Comparison:
    model: str
    task: str
    kind: str  # "effect" | "interaction"
    target: str  # the arm key it is about
    coefs: tuple[tuple[str, float], ...]  # (arm key, coefficient)

    @property
    def name(self) -> str:
        return f"{self.model}/{self.task}/{self.kind}:{self.target}"

    @property
    def span(self) -> tuple[float, float]:
        """Range of a paired difference Σ c_a y_a for scores y_a ∈ [0, 1]."""
        return (sum(c for _, c in self.coefs if c < 0), sum(c for _, c in self.coefs if c > 0))


def comparisons(cells: dict[tuple[str, str], list[str]], baseline: str = "baseline") -> list[Comparison]:
    """Every effect vs baseline and every interaction vs additive of the cells' arm keys
    ('+'-joined sorted trick names), in a stable order."""
    out = []
    for (model, task), keys in sorted(cells.items()):
        if baseline not in keys:
            continue
        for key in sorted(k for k in keys if k != baseline):
            out.append(Comparison(model, task, "effect", key, ((key, 1.0), (baseline, -1.0))))
        for key in sorted(k for k in keys if "+" in k):
            singles = key.split("+")
            if all(s in keys for s in singles):
                coefs = ((key, 1.0), *((s, -1.0) for s in singles), (baseline, len(singles) - 1.0))
                out.append(Comparison(model, task, "interaction", key, coefs))
    return out


def by_seed(values) -> dict:
    """{seed index: score}; a plain list is indexed by position."""
    return dict(values) if isinstance(values, Mapping) else dict(enumerate(values))


def paired_differences(coefs, arms: dict[str, dict]) -> np.ndarray:
    """D_i = Σ_a c_a·y_{a,i} over the seed indices every arm ran, in seed order: shape (t,)."""
    seeds = [set(arms.get(k, {})) for k, _ in coefs]
    shared = sorted(set.intersection(*seeds)) if seeds else []
    return np.array([sum(c * arms[k][s] for k, c in coefs) for s in shared], float)


def family_size(comps: list[Comparison], method: str) -> int:
    """K of the Bonferroni split: comparisons (paired) or distinct arms (unpaired)."""
    if method == "paired":
        return len(comps)
    return len({(c.model, c.task, k) for c in comps for k, _ in c.coefs})


def classify(lower: float, upper: float, delta: float) -> str:
    if not (np.isfinite(lower) and np.isfinite(upper)):
        return "open"
    if lower > 0 or upper < 0:
        return "significant"
    if -delta < lower and upper < delta:
        return "equivalent"
    return "open"


def _interval(c: Comparison, arms: dict[str, dict], a: float, method: str, target: float, sequence: str) -> dict:
    """est, lower, upper, t (seeds behind it), sd (of D, or the largest arm's) of one comparison."""
    if method == "paired":
        d = paired_differences(c.coefs, arms)
        if d.size == 0:
            return {"est": np.nan, "lower": -np.inf, "upper": np.inf, "t": 0.0, "sigma": np.nan}
        lo, hi = SEQUENCES[sequence].bounds(d, *c.span, a, target)
        return {"est": float(d.mean()), "lower": lo, "upper": hi, "t": float(d.size),
                "sigma": float(d.std(ddof=1)) if d.size > 1 else np.nan}
    ys = {k: np.array([v for _, v in sorted(arms.get(k, {}).items())], float) for k, _ in c.coefs}
    if min(y.size for y in ys.values()) == 0:
        return {"est": np.nan, "lower": -np.inf, "upper": np.inf, "t": 0.0, "sigma": np.nan}
    lower = upper = 0.0
    for k, w in c.coefs:
        lo, hi = SEQUENCES[sequence].bounds(ys[k], 0.0, 1.0, a, target)
        lower, upper = lower + w * (lo if w > 0 else hi), upper + w * (hi if w > 0 else lo)
    sds = [float(y.std(ddof=1)) for y in ys.values() if y.size > 1]
    return {"est": float(sum(w * ys[k].mean() for k, w in c.coefs)), "lower": lower, "upper": upper,
            "t": float(min(y.size for y in ys.values())), "sigma": max(sds) if sds else np.nan}


def decide(comps: list[Comparison], scores: dict[tuple[str, str], dict[str, object]], *,
           alpha: float, delta: float, previous: dict[str, dict] | None = None,
           family: int | None = None, method: str = "paired", target: float = 32,
           sequence: str = "t") -> tuple[list[dict], dict]:
    """One wave's verdicts. scores: (model, task) -> arm key -> {seed index: score} (or a list,
    indexed by position). previous: rows by comparison name from earlier waves (a decided one is
    kept as it was). family: K of the Bonferroni split (default family_size). target: the seeds
    per arm each sequence is tuned for (the seed cap). Returns (rows, metrics): a row per
    comparison (name, kind, model, task, target, est, lower, upper, radius, t, sigma, verdict)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if sequence not in SEQUENCES:
        raise ValueError(f"sequence must be one of {tuple(SEQUENCES)}, got {sequence!r}")
    previous = previous or {}
    a = alpha / (family or family_size(comps, method))
    cells = {cell: {k: by_seed(v) for k, v in arms.items()} for cell, arms in scores.items()}
    rows = []
    for c in comps:
        old = previous.get(c.name)
        if old and old["verdict"] != "open":
            rows.append(old)
            continue
        iv = _interval(c, cells.get((c.model, c.task), {}), a, method, target, sequence)
        rad = max(iv["est"] - iv["lower"], iv["upper"] - iv["est"]) if np.isfinite(iv["est"]) else np.inf
        rows.append({"name": c.name, "kind": c.kind, "model": c.model, "task": c.task, "target": c.target,
                     **iv, "radius": float(rad), "verdict": classify(iv["lower"], iv["upper"], delta)})
    metrics = {v: sum(row["verdict"] == v for row in rows) for v in VERDICTS}
    return rows, {**metrics, "alpha_each": a}


def half_width(c: Comparison, row: dict, n: int, a: float, method: str, target: float,
               centre: float, sequence: str = "t") -> float:
    """The half-width c's sequence reaches with n seeds in every arm, for a typical path at
    `centre` with the noise seen so far (0 before there is any: the noise-free floor)."""
    sd = row.get("sigma")
    sd = float(sd) if sd is not None and np.isfinite(sd) else 0.0
    if method == "paired":
        return SEQUENCES[sequence].radius(n, sd, centre, *c.span, a, target)
    # per arm, each taken at the middle of [0, 1], where the floor is lowest: optimistic, so no
    # comparison that could close is given up
    return sum(abs(w) * SEQUENCES[sequence].radius(n, sd, 0.5, 0.0, 1.0, a, target) for _, w in c.coefs)


def planning_gap(c: Comparison, row: dict, delta: float, method: str) -> tuple[float, float]:
    """(gap, θ): the half-width that would close c, and the truth it assumes: the estimate moved
    PLAN_SE standard errors toward the easier verdict, max(|θ̂| + k·se, δ − max(|θ̂| − k·se, 0)),
    so a real effect read low on a noisy early estimate is not given up. Without a noise
    estimate yet, the whole span (anything may still close)."""
    est, sd, t = row.get("est"), row.get("sigma"), row.get("t") or 0.0
    if est is None or sd is None or not (np.isfinite(est) and np.isfinite(sd)) or t < 2:
        return c.span[1] - c.span[0], 0.0
    se = sd * np.sqrt(sum(w**2 for _, w in c.coefs) / t if method == "unpaired" else 1 / t)
    big, small = abs(est) + PLAN_SE * se, max(abs(est) - PLAN_SE * se, 0.0)
    return (big, float(np.sign(est) * big)) if big >= delta - small else (delta - small, float(np.sign(est) * small))


def samples_to_close(half_width, gap: float, most: int = 100_000) -> float:
    """Smallest t with half_width(t) ≤ gap, for a half_width that falls in t (doubling, then
    bisection); inf when even `most` is not enough."""
    if not gap > 0:
        return np.inf
    ok = lambda t: half_width(t) <= gap  # noqa: E731
    hi_t = 2
    while not ok(hi_t):
        if hi_t >= most:
            return np.inf
        hi_t = min(2 * hi_t, most)
    lo_t = hi_t // 2
    while hi_t - lo_t > 1:
        mid = (lo_t + hi_t) // 2
        lo_t, hi_t = (lo_t, mid) if ok(mid) else (mid, hi_t)
    return float(hi_t)


def seeds_needed(c: Comparison, row: dict, delta: float, a: float, method: str, target: float,
                 most: int = 100_000, sequence: str = "t") -> float:
    """Seeds per arm at which c's sequence reaches planning_gap (inf beyond `most`)."""
    gap, theta = planning_gap(c, row, delta, method)
    return samples_to_close(lambda n: half_width(c, row, n, a, method, target, theta, sequence), gap, most)


def decidable_delta(c: Comparison, row: dict, n: int, a: float, method: str, target: float,
                    sequence: str = "t") -> float:
    """The smallest margin δ at which c could be shown equivalent with n seeds per arm, if its
    estimate is the truth: |θ̂| + half-width(n)."""
    est = row["est"] if row.get("est") is not None and np.isfinite(row["est"]) else 0.0
    return abs(est) + half_width(c, row, n, a, method, target, est, sequence)


def _arm(c: Comparison, k: str) -> tuple[str, str, str]:
    return (c.model, c.task, k)


def needs(comps: list[Comparison], rows: list[dict], n: dict[tuple[str, str, str], int],
          cost: dict[tuple[str, str, str], float], *, alpha: float, delta: float, family: int | None = None,
          most: int = 32, method: str = "paired", budget_left: float | None = None,
          sequence: str = "t") -> list[dict]:
    """Per open comparison, what closing it takes under the sequence in use: seeds per arm
    (seeds_needed), the device-hours to get every arm there, `blocked` ("seed cap", "budget" or
    ""), and the δ decidable at the cap (decidable_delta)."""
    a = alpha / (family or family_size(comps, method))
    by_name = {row["name"]: row for row in rows}
    out = []
    for c in comps:
        row = by_name[c.name]
        if row["verdict"] != "open":
            continue
        now = min(n.get(_arm(c, k), 0) for k, _ in c.coefs)
        need = max(seeds_needed(c, row, delta, a, method, most, sequence=sequence), now + 1.0)  # still open: at least one more
        hours = (sum(max(need - n.get(_arm(c, k), 0), 0) * cost.get(_arm(c, k), 1.0) for k, _ in c.coefs)
                 if np.isfinite(need) else np.inf)
        blocked = "seed cap" if need > most else "budget" if budget_left is not None and hours > budget_left else ""
        out.append({"name": c.name, "seeds": now, "seeds_needed": need, "hours_needed": hours, "blocked": blocked,
                    "delta_at_cap": decidable_delta(c, row, most, a, method, most, sequence)})
    return out


def allocate(comps: list[Comparison], rows: list[dict], n: dict[tuple[str, str, str], int],
             cost: dict[tuple[str, str, str], float], slots: int, *, alpha: float, delta: float,
             family: int | None = None, most: int = 32, method: str = "paired",
             budget_left: float | None = None, sequence: str = "t") -> tuple[dict[tuple[str, str, str], int], dict]:
    """The next wave: `slots` runs, one at a time to the arm (model, task, key) whose next seed
    does the most for the comparisons that can still close (`needs` with blocked == ""):

        score(a) = Σ_{closable c ∋ a, n_a = m_c} 1 / ((N_c − m_c) · h_c)

    m_c = min_{b∈c} n_b the seeds c rests on now (paired: complete seed indices), N_c its seeds
    needed, h_c the device-hours of one more seed in each arm of c at m_c (the bottlenecks: a
    seed elsewhere adds no pair). An arm gets nothing once its comparisons are decided or blocked,
    nor beyond `most` seeds. Returns ({arm: added seeds}, metrics)."""
    plan = {p["name"]: p for p in needs(comps, rows, n, cost, alpha=alpha, delta=delta, family=family,
                                        most=most, method=method, budget_left=budget_left, sequence=sequence)}
    live = [c for c in comps if c.name in plan and not plan[c.name]["blocked"]]
    planned, added = dict(n), {}
    for _ in range(slots):
        score: dict[tuple[str, str, str], float] = {}
        for c in live:
            have = {k: planned.get(_arm(c, k), 0) for k, _ in c.coefs}
            m = min(have.values())
            if m >= plan[c.name]["seeds_needed"]:
                continue
            low = [k for k, v in have.items() if v == m]
            h = sum(max(cost.get(_arm(c, k), 1.0), 1e-12) for k in low)
            for k in low:
                if have[k] < most:
                    arm = _arm(c, k)
                    score[arm] = score.get(arm, 0.0) + 1.0 / ((plan[c.name]["seeds_needed"] - m) * h)
        if not score:
            break
        best = max(sorted(score), key=score.get)
        planned[best] = planned.get(best, 0) + 1
        added[best] = added.get(best, 0) + 1
    return added, {"open": len(plan), "closable": len(live), "runs": sum(added.values()),
                   "hours": sum(cost.get(arm, 1.0) * k for arm, k in added.items())}


def prior_needs(comps: list[Comparison], *, alpha: float, delta: float, most: int = 32,
                method: str = "paired", sequence: str = "t", sd: float = 0.0) -> list[dict]:
    """Before any run, `needs` rows for a null comparison: the seeds per arm each sequence needs
    to show it equivalent within ±δ when one run's score has standard deviation `sd` (paired
    contrasts taken as if unpaired, sd·√Σc², which pairing can only shrink; sd = 0 gives the
    noise-free floor, which noise only raises), and the δ it could show at the cap."""
    a = alpha / family_size(comps, method)
    out = []
    for c in comps:
        quiet = {"sigma": sd * np.sqrt(sum(w**2 for _, w in c.coefs)) if method == "paired" else sd}
        need = samples_to_close(lambda n: half_width(c, quiet, n, a, method, most, 0.0, sequence), delta)
        out.append({"name": c.name, "seeds": 0, "seeds_needed": need, "hours_needed": np.inf,
                    "blocked": "seed cap" if need > most else "",
                    "delta_at_cap": half_width(c, quiet, most, a, method, most, 0.0, sequence)})
    return out
