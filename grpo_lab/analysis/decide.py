"""Decide comparisons under optional stopping, and spend the next runs where verdicts are open.

Pure functions; the `--decide` loop (grpo_lab/execution/waves.py) only feeds them the per-seed scores
of finished runs and records what they return.

Comparisons, within one (model, task), over arm means ȳ_a with n_a seeds each:

    effect of S        = S − B                      (every non-baseline arm)
    interaction of C   = C − Σ_{t∈C} t + (k−1)·B    (observed − additive; every combination whose
                                                     k singles ran)

Method: anytime-valid confidence sequences from Robbins' normal mixture (Robbins 1970; Howard,
Ramdas, McAuliffe, Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence
sequences", eq. 14), in information time. A contrast θ̂ = Σ c_a ȳ_a with per-seed noise σ has
variance σ²/t, t = 1 / Σ_a c_a²/n_a ("effective seeds"), and S(t) = t(θ̂ − θ)/σ is a Brownian
motion in t. Mixing exp(λS − λ²t/2) over λ ~ N(0, 1/r) gives a nonnegative martingale; Ville's
inequality makes the event "it ever exceeds 1/α" have probability ≤ α, i.e. with probability
≥ 1 − α, at every wave at once,

    |θ̂ − θ| ≤ radius(t) = σ · √((t + r)(log(1 + t/r) + 2 log(1/α))) / t.

Why this and not alpha spending: the number of waves, their sizes and which arms grow are all
chosen from the data, and a spending function needs the information fractions of the looks;
a confidence sequence is valid at any stopping time whatever the looks were, so a killed sweep
can resume, take a larger budget, or stop early without touching the error guarantee. Seeds are
added to arms chosen from past data only, so t grows predictably and S stays a martingale.

σ is not known: it is the seed-to-seed noise pooled over the cell's arms (every arm's runs give
within-arm degrees of freedom, tens per cell), plugged in. That makes the guarantee asymptotic
in σ's degrees of freedom (Waudby-Smith et al. 2021, "Time-uniform central limit theory and
asymptotic confidence sequences"). With few degrees of freedom the plug-in is anti-conservative
(a 5.2% false-flag rate at 6 df in tests/analysis), so σ̂ is scaled by t_{df,1−α/2} / z_{1−α/2},
the Student correction of one look, which fades as seeds accrue; benchmarks/decide.py measures
the false-flag rate that gives.

Multiple comparisons: Bonferroni over all K comparisons of the sweep (α/K per sequence). Since
each sequence holds at all waves, all K hold at once with probability ≥ 1 − α, so the
family-wise error of every verdict below, at every wave, is ≤ α:

    significant  the sequence excludes 0          (a wrong sign or a null flagged needs a miss)
    equivalent   the sequence lies inside (−δ, δ) (TOST by confidence sequence: |θ| ≥ δ needs a miss)
    open         neither yet

A comparison keeps the first verdict it reaches (a later wave cannot contradict it without a
miss, which the guarantee already counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

VERDICTS = ("significant", "equivalent", "open")
TARGET_SEEDS = 4.0  # the mixing width r is tuned for decisions near t = 4 effective seeds (8 per arm)


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


def effective_seeds(coefs, n: dict[str, float]) -> float:
    """t = 1 / Σ_a c_a² / n_a: the contrast's variance is σ²/t."""
    return 1.0 / sum(c**2 / n[a] for a, c in coefs)


def mixing_width(alpha: float, target: float = TARGET_SEEDS) -> float:
    """r that makes the boundary tightest near t = target (Howard et al. 2021, eq. 15 in our
    units): r = target / (2 log(1/α) + log(1 + 2 log(1/α)))."""
    L = 2 * np.log(1 / alpha)
    return target / (L + np.log(1 + L))


def radius(t, sigma: float, alpha: float, r: float) -> np.ndarray:
    """Half-width of the normal-mixture confidence sequence at effective seeds t (module docstring)."""
    t = np.asarray(t, float)
    return sigma * np.sqrt((t + r) * (np.log1p(t / r) + 2 * np.log(1 / alpha))) / t


def seeds_to_close(gap: float, sigma: float, alpha: float, r: float, most: float = 1e6) -> float:
    """Smallest t with radius(t) ≤ gap (radius falls in t), by bisection in log t; `most` if none below it."""
    lo, hi = 1e-3, most
    if radius(hi, sigma, alpha, r) > gap:
        return most
    for _ in range(60):
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if radius(mid, sigma, alpha, r) > gap else (lo, mid)
    return float(hi)


def corrected_sigma(sigma: float, df: float, alpha: float) -> float:
    """σ̂ · t_{df,1−α/2} / z_{1−α/2}: the plug-in noise with its own uncertainty priced in."""
    if not df > 0:
        return np.nan
    return float(sigma * stats.t.ppf(1 - alpha / 2, df) / stats.norm.ppf(1 - alpha / 2))


def pooled_sigma(scores: dict[str, list[float]]) -> tuple[float, float]:
    """(σ, df) of per-seed scores pooled within the arms: σ² = Σ_a Σ_s (y_as − ȳ_a)² / (N − A)."""
    ss = sum(float(((np.asarray(y) - np.mean(y)) ** 2).sum()) for y in scores.values() if len(y) > 1)
    df = sum(len(y) - 1 for y in scores.values() if len(y) > 1)
    return (float(np.sqrt(ss / df)), float(df)) if df > 0 else (np.nan, 0.0)


def classify(est: float, rad: float, delta: float) -> str:
    if not np.isfinite(rad):
        return "open"
    if abs(est) > rad:
        return "significant"
    if abs(est) + rad < delta:
        return "equivalent"
    return "open"


def decide(comps: list[Comparison], scores: dict[tuple[str, str], dict[str, list[float]]], *,
           alpha: float, delta: float, previous: dict[str, dict] | None = None,
           family: int | None = None) -> tuple[list[dict], dict]:
    """One wave's verdicts. scores: (model, task) -> arm key -> per-seed metric. previous: rows
    by comparison name from earlier waves (a decided one is kept as it was). family: K of the
    Bonferroni split (default len(comps)). Returns (rows, metrics): a row per comparison
    (name, kind, model, task, target, est, radius, t, sigma, verdict), metrics the counts."""
    previous = previous or {}
    a = alpha / (family or len(comps))
    r = mixing_width(a)
    sigmas = {cell: corrected_sigma(*pooled_sigma(arms), a) for cell, arms in scores.items()}
    rows = []
    for c in comps:
        old = previous.get(c.name)
        if old and old["verdict"] != "open":
            rows.append(old)
            continue
        arms, sigma = scores[(c.model, c.task)], sigmas[(c.model, c.task)]
        n = {k: float(len(arms.get(k, []))) for k, _ in c.coefs}
        if min(n.values()) == 0:
            est, t, rad = np.nan, 0.0, np.inf
        else:
            est = float(sum(w * np.mean(arms[k]) for k, w in c.coefs))
            t = effective_seeds(c.coefs, n)
            rad = float(radius(t, sigma, a, r)) if np.isfinite(sigma) and sigma > 0 else np.inf
        rows.append({"name": c.name, "kind": c.kind, "model": c.model, "task": c.task, "target": c.target,
                     "est": est, "radius": rad, "t": t, "sigma": sigma, "verdict": classify(est, rad, delta)})
    metrics = {v: sum(row["verdict"] == v for row in rows) for v in VERDICTS}
    return rows, {**metrics, "alpha_each": a, "mixing_width": r}


def _t_or_zero(coefs, n: dict[str, float]) -> float:
    return effective_seeds(coefs, n) if min(n[a] for a, _ in coefs) > 0 else 0.0


def allocate(comps: list[Comparison], rows: list[dict], n: dict[tuple[str, str, str], int],
             cost: dict[tuple[str, str, str], float], slots: int, *, alpha: float, delta: float,
             family: int | None = None, most: int = 64) -> tuple[dict[tuple[str, str, str], int], dict]:
    """The next wave: `slots` runs, one at a time to the arm (model, task, key) whose next seed
    closes the most open comparisons per device-hour:

        score(a) = Σ_{open c ∋ a} min(1, (t_c(n + e_a) − t_c(n)) / (t*_c − t_c(n))) / cost(a)

    t*_c the effective seeds at which c's sequence would close if its current estimate were the
    truth (the radius reaches max(|θ̂|, δ − |θ̂|), the nearer verdict). Arms at `most` seeds get
    none. Returns ({arm: added seeds}, metrics)."""
    a = alpha / (family or len(comps))
    r = mixing_width(a)
    by_name = {row["name"]: row for row in rows}
    open_ = [c for c in comps if by_name[c.name]["verdict"] == "open"]
    need = {}
    for c in open_:
        row = by_name[c.name]
        est = row["est"] if np.isfinite(row["est"]) else 0.0
        ok = row["sigma"] is not None and np.isfinite(row["sigma"])
        need[c.name] = seeds_to_close(max(abs(est), delta - abs(est)), row["sigma"], a, r) if ok else np.inf
    planned, added = dict(n), {}
    for _ in range(slots):
        score: dict[tuple[str, str, str], float] = {}
        for c in open_:
            cur = {k: float(planned.get((c.model, c.task, k), 0)) for k, _ in c.coefs}
            t = _t_or_zero(c.coefs, cur)
            for k, _ in c.coefs:
                arm = (c.model, c.task, k)
                if planned.get(arm, 0) >= most:
                    continue
                # without a noise estimate yet (one seed per arm) every seed of the comparison counts fully
                gain = ((_t_or_zero(c.coefs, {**cur, k: cur[k] + 1}) - t) / max(need[c.name] - t, 1e-9)
                        if np.isfinite(need[c.name]) else 1.0)
                score[arm] = score.get(arm, 0.0) + min(gain, 1.0) / max(cost.get(arm, 1.0), 1e-12)
        if not score:
            break
        best = max(sorted(score), key=score.get)
        planned[best] = planned.get(best, 0) + 1
        added[best] = added.get(best, 0) + 1
    return added, {"open": len(open_), "runs": sum(added.values()),
                   "hours": sum(cost.get(arm, 1.0) * k for arm, k in added.items())}
