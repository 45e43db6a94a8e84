"""Decide comparisons under optional stopping, and spend the next runs where verdicts can close.

Pure functions over one DecisionRule (analysis/rule.py). `step` is the `--decide` loop's one
step, and the only one: execution/waves.py, the validity suite and benchmarks/decide.py all call
it with the finished runs' outcomes (arm -> {seed index: Outcome(score, collapsed)}) and get the
verdicts (analysis/verdict.py) and where the next seeds go.

The comparisons are analysis/contrast.py's contrasts θ = Σ c_a·μ_a within one (model, task):
every effect vs baseline, every interaction vs additive (contrast.contrasts).

μ_a is the rule's estimand: healthy (default), the mean over the seed indices where no run of the
comparison collapsed (analysis/collapse.py), or mean, over all. Every comparison also gets a
collapse verdict on Σ c_a·p_a, p_a the arm's collapse rate (collapse.compare).

Method: anytime-valid confidence sequences, one of SEQUENCES, each holding at every wave at once:

    t         (default) the scale-invariant normal mixture (analysis/tmix.py): exact for Gaussian
              noise of any variance, estimated per comparison; measured valid under heavy tails,
              one arm 9x noisier, pass rates near 0 and 1, and, on the healthy estimand, under
              every collapse model of docs/results.md (the skewed null and harm by collapse)
    betting   the betting sequence for bounded outcomes (Waudby-Smith & Ramdas 2023,
              analysis/betting.py): valid for any distribution of a run's score in [0, 1], at
              about 10x the seeds

Each on one of two pairings, METHODS:

    paired    (default) D_i = Σ_a c_a·y_{a,i} over the seed indices i that every arm of the
              comparison ran (healthy: and where none collapsed), in seed order. Arms given the
              same seed index share prompt order and sampling streams (common random numbers),
              seed indices are independent draws, and whether index i is kept reads index i
              only, so the kept D_1, D_2, ... are i.i.d. with mean θ. One sequence per
              comparison at rule.alpha_each(K), K the comparisons of the sweep (Bonferroni).
    unpaired  one sequence per arm mean (range [0, 1]) at rule.alpha_each(A), A the arms; a
              comparison's interval is their interval sum.

New seeds always take an arm's next unused indices and a wave finishes before it is analysed, so
each sequence only ever grows by appending; which arms grow is chosen from past data only. So,
within each sequence's assumptions, with probability ≥ 1 − α every label is right at every wave,
whenever the sweep stops (analysis/verdict.py LABELS). A decided pass@1 label is kept; the
collapse verdict is re-read every wave until it closes.

What closing costs: the t sequence needs what the noise needs (at α_K = 0.04/45 about 1.5-1.75x
the seeds of a fixed-n t-test); betting's noise-free floor is ~420 seeds per arm for ±0.02 over
45 comparisons (betting.min_samples). `needs` says it before seeds are spent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from grpo_lab.analysis import betting, collapse, tmix
from grpo_lab.analysis.contrast import ArmId, Contrast
from grpo_lab.analysis.rule import METHODS, DecisionRule  # noqa: F401  (METHODS: the pairings, named once)
from grpo_lab.analysis.verdict import Verdict

# the confidence sequence behind every interval: same interface (bounds, radius), different assumptions
SEQUENCES = {"t": tmix, "betting": betting}
# How hopeful planning is about an open comparison (standard errors toward its easier verdict):
# 1 decides as many comparisons as 2 with 5-28% fewer runs; 0.5 starts giving up ones that close.
PLAN_SE = 1.0

class Outcome(NamedTuple):
    score: float  # the run's final pass@1 (at the eval design's K where it has one)
    collapsed: bool = False  # analysis/collapse.py's run-level rule


def by_seed(values) -> dict[int, Outcome]:
    """{seed index: Outcome}; a plain list is indexed by position, a plain score is a healthy run."""
    raw = dict(values) if isinstance(values, Mapping) else dict(enumerate(values))
    return {s: v if isinstance(v, Outcome) else Outcome(float(v)) for s, v in raw.items()}


def family_size(comps: list[Contrast], method: str) -> int:
    """K of the Bonferroni split: comparisons (paired) or distinct arms (unpaired)."""
    if method == "paired":
        return len(comps)
    return len({arm for c in comps for arm in c.arms()})


def classify(lower: float, upper: float, delta: float) -> str:
    if not (np.isfinite(lower) and np.isfinite(upper)):
        return "open"
    if lower > 0 or upper < 0:
        return "significant"
    if -delta < lower and upper < delta:
        return "equivalent"
    return "open"


def paired_differences(coefs, arms: dict[str, dict[int, Outcome]], healthy: bool) -> np.ndarray:
    """D_i = Σ_a c_a·y_{a,i} over the seed indices every arm ran (healthy: where none collapsed),
    in seed order: shape (t,)."""
    seeds = [set(arms.get(k, {})) for k, _ in coefs]
    shared = sorted(set.intersection(*seeds)) if seeds else []
    if healthy:
        shared = [s for s in shared if not any(arms[k][s].collapsed for k, _ in coefs)]
    return np.array([sum(c * arms[k][s].score for k, c in coefs) for s in shared], float)


def _interval(c: Contrast, arms: dict[str, dict[int, Outcome]], a: float, rule: DecisionRule) -> dict:
    """est, lower, upper, seeds (behind it), sigma (of D, or the noisiest arm's) of one comparison."""
    seq, healthy = SEQUENCES[rule.sequence], rule.estimand == "healthy"
    empty = {"est": np.nan, "lower": -np.inf, "upper": np.inf, "seeds": 0, "sigma": np.nan}
    if rule.method == "paired":
        d = paired_differences(c.coefs, arms, healthy)
        if d.size == 0:
            return empty
        lo, hi = seq.bounds(d, *c.span, a, rule.most_seeds)
        return {"est": float(d.mean()), "lower": lo, "upper": hi, "seeds": int(d.size),
                "sigma": float(d.std(ddof=1)) if d.size > 1 else np.nan}
    ys = {k: np.array([o.score for _, o in sorted(arms.get(k, {}).items()) if not (healthy and o.collapsed)], float)
          for k, _ in c.coefs}
    if min(y.size for y in ys.values()) == 0:
        return empty
    lower = upper = 0.0
    for k, w in c.coefs:
        lo, hi = seq.bounds(ys[k], 0.0, 1.0, a, rule.most_seeds)
        lower, upper = lower + w * (lo if w > 0 else hi), upper + w * (hi if w > 0 else lo)
    sds = [float(y.std(ddof=1)) for y in ys.values() if y.size > 1]
    return {"est": float(sum(w * ys[k].mean() for k, w in c.coefs)), "lower": lower, "upper": upper,
            "seeds": int(min(y.size for y in ys.values())), "sigma": max(sds) if sds else np.nan}


def decide(rule: DecisionRule, comps: list[Contrast], outcomes: dict[tuple[str, str], dict[str, object]],
           previous: dict[str, Verdict] | None = None) -> list[Verdict]:
    """One wave's verdicts. outcomes: (model, task) -> arm key -> {seed index: Outcome} (or
    plain scores, or a list indexed by position). previous: verdicts by name from earlier waves
    (a decided pass@1 label is kept as it was, with the seeds and runs it was decided on; its
    collapse counts are the current ones)."""
    previous = previous or {}
    a = rule.alpha_each(family_size(comps, rule.method))
    a_c = rule.collapse_alpha_each(len(comps))
    cells = {cell: {k: by_seed(v) for k, v in arms.items()} for cell, arms in outcomes.items()}
    out = []
    for c in comps:
        arms = cells.get((c.model, c.task), {})
        old = previous.get(c.name)
        flags = {k: {s: o.collapsed for s, o in arms.get(k, {}).items()} for k, _ in c.coefs}
        col = collapse.compare(c.coefs, flags, c.span, a_c, rule.most_seeds)
        if old is not None and old.collapse.label != "open":  # a decided collapse label is kept too
            col = replace(old.collapse, counts=col.counts)
        if old is not None and old.decided:
            out.append(old.with_(collapse=col))
            continue
        runs = min(len(arms.get(k, {})) for k, _ in c.coefs)
        iv = _interval(c, arms, a, rule)
        out.append(Verdict(name=c.name, kind=c.kind, model=c.model, task=c.task, target=c.target,
                           estimand=rule.estimand, label=classify(iv["lower"], iv["upper"], rule.delta),
                           est=iv["est"], lower=iv["lower"], upper=iv["upper"], sigma=iv["sigma"],
                           seeds=iv["seeds"], runs=runs, collapse=col))
    return out


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    """Verdicts per label."""
    return {label: sum(v.label == label for v in verdicts) for label in ("significant", "equivalent", "open")}


def half_width(c: Contrast, sigma: float, n: float, a: float, rule: DecisionRule, centre: float) -> float:
    """The half-width c's sequence reaches with n seeds behind it, for a typical path at `centre`
    with the noise `sigma` seen so far (NaN or unknown: 0, the noise-free floor)."""
    sd = float(sigma) if sigma is not None and np.isfinite(sigma) else 0.0
    seq = SEQUENCES[rule.sequence]
    if rule.method == "paired":
        return seq.radius(int(n), sd, centre, *c.span, a, rule.most_seeds)
    # per arm, each taken at the middle of [0, 1], where the floor is lowest: optimistic, so no
    # comparison that could close is given up
    return sum(abs(w) * seq.radius(int(n), sd, 0.5, 0.0, 1.0, a, rule.most_seeds) for _, w in c.coefs)


def planning_gap(c: Contrast, v: Verdict, rule: DecisionRule) -> tuple[float, float]:
    """(gap, θ): the half-width that would close c, and the truth it assumes: the estimate moved
    PLAN_SE standard errors toward the easier verdict, max(|θ̂| + k·se, δ − max(|θ̂| − k·se, 0)),
    so a real effect read low on a noisy early estimate is not given up. Without a noise
    estimate yet, the whole span (anything may still close)."""
    if not (np.isfinite(v.est) and np.isfinite(v.sigma)) or v.seeds < 2:
        return c.span[1] - c.span[0], 0.0
    se = v.sigma * np.sqrt(sum(w**2 for _, w in c.coefs) / v.seeds if rule.method == "unpaired" else 1 / v.seeds)
    big, small = abs(v.est) + PLAN_SE * se, max(abs(v.est) - PLAN_SE * se, 0.0)
    if big >= rule.delta - small:
        return big, float(np.sign(v.est) * big)
    return rule.delta - small, float(np.sign(v.est) * small)


def samples_to_close(width, gap: float, most: int = 100_000) -> float:
    """Smallest t with width(t) ≤ gap, for a width that falls in t (doubling, then bisection);
    inf when even `most` is not enough."""
    if not gap > 0:
        return np.inf
    ok = lambda t: width(t) <= gap  # noqa: E731
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


def healthy_share(v: Verdict) -> float:
    """Seeds behind the interval per run of the least-sampled arm: what a new seed adds (1 when
    nothing collapsed; floored so a cell that collapses everywhere is not planned without end)."""
    return min(max(v.seeds, 1) / max(v.runs, 1), 1.0) if v.runs else 1.0


@dataclass(frozen=True)
class Need:
    """What closing one open comparison takes under the rule."""

    name: str
    seeds: int  # runs of its least-sampled arm now
    seeds_needed: float  # seeds per arm at which it closes (inf: never)
    hours_needed: float  # device-hours to bring every arm there
    blocked: str  # "seed cap", "budget" or "" (closable)
    delta_at_cap: float  # the smallest margin it could be shown equivalent at within the cap


def needs(rule: DecisionRule, comps: list[Contrast], verdicts: list[Verdict], n: dict[ArmId, int],
          cost: dict[ArmId, float], budget_left: float | None = None) -> list[Need]:
    """Per open comparison, seeds per arm to close it (the seeds its interval needs, over the share
    of runs that do not collapse), their hours, what blocks it, and the δ decidable at the cap."""
    a = rule.alpha_each(family_size(comps, rule.method))
    by_name = {v.name: v for v in verdicts}
    out = []
    for c in comps:
        v = by_name[c.name]
        if v.decided:
            continue
        gap, theta = planning_gap(c, v, rule)
        pairs = samples_to_close(lambda t: half_width(c, v.sigma, t, a, rule, theta), gap)
        share, now = healthy_share(v), min(n.get(arm, 0) for arm in c.arms())
        need = max(now + np.ceil(max(pairs - v.seeds, 0.0) / share), now + 1.0) if np.isfinite(pairs) else np.inf
        hours = (sum(max(need - n.get(arm, 0), 0) * cost.get(arm, 1.0) for arm in c.arms())
                 if np.isfinite(need) else np.inf)
        blocked = "seed cap" if need > rule.most_seeds else \
            "budget" if budget_left is not None and hours > budget_left else ""
        est = v.est if np.isfinite(v.est) else 0.0
        at_cap = abs(est) + half_width(c, v.sigma, max(rule.most_seeds * share, 2), a, rule, est)
        out.append(Need(c.name, now, float(need), float(hours), blocked, float(at_cap)))
    return out


def allocate(comps: list[Contrast], plan: list[Need], n: dict[ArmId, int], cost: dict[ArmId, float],
             slots: int, most: int) -> dict[ArmId, int]:
    """The next wave: `slots` runs, one at a time to the arm whose next seed does the most for the
    comparisons that can still close (plan's needs with blocked == ""):

        score(a) = Σ_{closable c ∋ a, n_a = m_c} 1 / ((N_c − m_c) · h_c)

    m_c = min_{b∈c} n_b the seeds c rests on now, N_c its seeds needed, h_c the device-hours of one
    more seed in each arm of c at m_c (the bottlenecks: a seed elsewhere adds no pair). An arm gets
    nothing once its comparisons are decided or blocked, nor beyond `most` seeds."""
    by_name = {p.name: p for p in plan}
    live = [(c.arms(), by_name[c.name].seeds_needed) for c in comps
            if c.name in by_name and not by_name[c.name].blocked]
    planned, added = dict(n), {}

    def share(i: int) -> dict[ArmId, float]:
        """Contrast i's term of score(a) for each of its bottleneck arms."""
        arms, need = live[i]
        have = {arm: planned.get(arm, 0) for arm in arms}
        m = min(have.values())
        if m >= need:
            return {}
        low = [arm for arm, v in have.items() if v == m]
        h = sum(max(cost.get(arm, 1.0), 1e-12) for arm in low)
        return {arm: 1.0 / ((need - m) * h) for arm in low if have[arm] < most}

    # a seed changes only the terms of the comparisons its arm is in: recompute those
    member: dict[ArmId, list[int]] = {}
    for i, (arms, _) in enumerate(live):
        for arm in arms:
            member.setdefault(arm, []).append(i)
    terms = [share(i) for i in range(len(live))]
    for _ in range(max(slots, 0)):
        score: dict[ArmId, float] = {}
        for t in terms:
            for arm, x in t.items():
                score[arm] = score.get(arm, 0.0) + x
        if not score:
            break
        best = max(sorted(score), key=score.get)
        planned[best] = planned.get(best, 0) + 1
        added[best] = added.get(best, 0) + 1
        for i in member[best]:
            terms[i] = share(i)
    return added


def prior_needs(rule: DecisionRule, comps: list[Contrast], sd: float = 0.0) -> list[Need]:
    """Before any run, the needs of a null comparison with no collapse: the seeds per arm to show
    it equivalent within ±δ when one run's score has standard deviation `sd` (paired contrasts
    taken as if unpaired, sd·√Σc², which pairing can only shrink; sd = 0 gives the noise-free
    floor, which noise only raises), and the δ it could show at the cap."""
    a = rule.alpha_each(family_size(comps, rule.method))
    out = []
    for c in comps:
        quiet = sd * np.sqrt(sum(w**2 for _, w in c.coefs)) if rule.method == "paired" else sd
        need = samples_to_close(lambda t: half_width(c, quiet, t, a, rule, 0.0), rule.delta)
        out.append(Need(c.name, 0, need, np.inf, "seed cap" if need > rule.most_seeds else "",
                        half_width(c, quiet, rule.most_seeds, a, rule, 0.0)))
    return out


@dataclass(frozen=True)
class Step:
    verdicts: list[Verdict]  # every comparison, open ones with the reason they are open
    needs: list[Need]  # the open ones' needs
    added: dict[ArmId, int]  # seeds to add per arm (empty: the loop stops)


def step(rule: DecisionRule, comps: list[Contrast], outcomes: dict, previous: dict[str, Verdict] | None,
         n: dict[ArmId, int], cost: dict[ArmId, float], slots: int, budget_left: float | None = None) -> Step:
    """The `--decide` loop's step: verdicts on the finished runs' outcomes, what closing each open
    one needs, and the next wave's seeds (at most `slots` runs; n: seeds registered per arm,
    pending included; cost: device-hours of a new seed per arm). An open verdict's reason is what
    blocks it, "budget" when no slot is left, else "" (seeds were added this wave); it carries the
    δ it could be decided at within the cap."""
    verdicts = decide(rule, comps, outcomes, previous)
    plan = needs(rule, comps, verdicts, n, cost, budget_left)
    added = allocate(comps, plan, n, cost, slots, rule.most_seeds)
    why = {p.name: (p.blocked or ("" if added else "budget"), p.delta_at_cap if math.isfinite(p.delta_at_cap) else None)
           for p in plan}
    return Step([v.with_(reason=why[v.name][0], delta_at_cap=why[v.name][1]) if v.name in why else v
                 for v in verdicts], plan, added)
