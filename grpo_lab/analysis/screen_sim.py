"""`--screen` on the simulated ten_tricks sweep (analysis/simulate.py), beside the fixed design and
`--decide`: the eval curves behind each run's final score, and the four designs on one world.

Curves. simulate.draw gives each run (task, arm, seed index) its final pass@1 y (healthy or
collapsed, with the case's law). Its eval at step s of S (every EVERY steps) is

    healthy    R0 + (F − R0)·g(s)/g(S) + EVAL_SD·z_s,  the last eval (s = S) y itself
               g(s) = 1/(1 + (c/s)^B), B = SHAPE_B, c = CMID·S·speed_a·exp(0.3·u_i)
    collapsed  the same until a step drawn uniformly in [0.1·S, 0.9·S], then U(0, 0.02)

R0 = R0_SHARE·BASE[task] (the base eval), F = y without its eval noise (the world's clipped
training value). Arms in SPEED reach their level slower or faster with the same final law, so an
arm behind at a rung can end level: what the observed gap alone would get wrong. The curves follow
curves.py's form (the screening's assumption); real runs did not always (screening.py's docstring).

Designs, each on the same world, in core-hours (a run's cost is simulate.arm_cost's, times the
share of its steps it ran):

    fixed          START seeds per arm, full length; one wave's verdicts (decide.decide)
    decide         the `--decide` loop (simulate.run_sweep's, no eval design) from START seeds
    screen         SCREEN_START seeds per arm screened on the rungs (screening.screen, what the sweep
                   calls), survivors run full; verdicts as fixed; a dropped arm's comparisons stay
                   open ("screened out"), as `sweep --screen` leaves them
    screen+decide  screen, then the `--decide` loop on the comparisons of surviving arms, each at
                   the level of the full family (execution/waves.py does the same)

The screening's α bounds its wrong drops; the verdicts keep their own α (a drop is not a label).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from grpo_lab.analysis import decide as dec
from grpo_lab.analysis import screening as scr
from grpo_lab.analysis import simulate as sim
from grpo_lab.analysis.contrast import contrasts
from grpo_lab.analysis.rule import DecisionRule
from grpo_lab.analysis.verdict import Verdict

STEPS, EVERY = 240, 10  # the first real long runs (docs/results.md): 240 steps, an eval every 10
EVAL_SD = 0.02  # an in-run eval's noise (100 problems x 4 samples: docs/results.md's ~0.025)
R0_SHARE = 0.4
SHAPE_B, CMID = 1.5, 0.08  # the first jump within the first ~10% of the run, as on the tiny model
SPEED = {"lr_warmup": 3.0, "kl_anneal": 0.5}  # c multipliers: a slow and a fast arm, same final law
START = 2  # a matrix's seeds: what the fixed design and --decide start from
SCREEN_START = 4  # seeds per arm a screening starts (short runs buy more of them)
SPREAD = 0.2  # the spread case: arm means from the baseline + δ down to the baseline − SPREAD
DESIGNS = ("fixed", "decide", "screen", "screen+decide")


@dataclass
class Curves:
    """One task's eval curves, (arms, most, evals) at steps EVERY, 2·EVERY, ..., STEPS."""

    steps: np.ndarray
    values: np.ndarray
    base: float


def draw_curves(world: sim.World, task: str, rng: np.random.Generator) -> Curves:
    """The module docstring's curves for every run of `world` (one task)."""
    steps = np.arange(EVERY, STEPS + 1, EVERY)
    arms, most = world.train.shape
    r0 = R0_SHARE * sim.BASE[task]
    mu = np.array([world.law[a].mu for a in sim.ARMS])[:, None]
    w = np.minimum(mu, 1 - mu)
    final_level = np.clip(world.train, mu - w, mu + w)
    speed = np.array([SPEED.get(a, 1.0) for a in sim.ARMS])[:, None]
    c = CMID * STEPS * speed * np.exp(0.3 * rng.standard_normal((arms, most)))
    g = lambda s: 1.0 / (1.0 + (c[..., None] / s) ** SHAPE_B)  # noqa: E731
    values = r0 + (final_level[..., None] - r0) * g(steps) / g(np.array([STEPS]))
    values = values + EVAL_SD * rng.standard_normal(values.shape)
    values[..., -1] = world.scores(1)
    at = rng.uniform(0.1, 0.9, (arms, most)) * STEPS
    floor = rng.uniform(0.0, 2 * sim.COLLAPSED, values.shape)
    gone = world.collapsed[..., None] & (steps[None, None, :] >= at[..., None])
    values = np.where(gone, floor, values)
    values[..., -1] = world.scores(1)
    return Curves(steps, np.clip(values, 0.0, 1.0), r0)


def series(curves: Curves, arm: int, seeds: int, upto: int) -> list[scr.Series]:
    """The first `seeds` seeds' evals of `arm` up to step `upto`."""
    keep = curves.steps <= upto
    return [scr.Series(tuple(int(s) for s in curves.steps[keep]), tuple(float(v) for v in curves.values[arm, i, keep]),
                       curves.base) for i in range(seeds)]


@dataclass(frozen=True)
class Screened:
    drops: list[scr.Drop]
    hours: float  # the screened seeds' core-h (dropped arms up to their rung, survivors full)


def run_screen(rule: scr.ScreenRule, curves: dict[str, Curves], seeds: int = START,
               arms: tuple[str, ...] = sim.ARMS) -> Screened:
    """screening.screen rung by rung on `arms` of every task in `curves` at `seeds` seeds (what
    the sweep does); the Bonferroni split counts them all."""
    steps = scr.rung_steps(STEPS, rule.rungs, EVERY)
    live = {(sim.MODEL, t, a) for t in curves for a in arms}
    total = len(live)
    drops: list[scr.Drop] = []
    for r, at in enumerate(steps[:-1]):
        read = {arm: series(curves[arm[1]], sim.ARMS.index(arm[2]), seeds, at) for arm in live}
        got = scr.screen(rule, r, at, STEPS, read, total)
        drops += got.drops
        live -= {d.arm for d in got.drops}
    share = {d.arm: d.step / STEPS for d in drops}
    hours = sum(seeds * sim.arm_cost(t, a).train * share.get((sim.MODEL, t, a), 1.0)
                for t in curves for a in arms)
    return Screened(drops, hours)


def _outcomes(worlds: dict[str, sim.World], n: dict, dropped: set) -> dict:
    out = {}
    for task, world in worlds.items():
        y, z = world.scores(1), world.collapsed
        out[(sim.MODEL, task)] = {a: {s: dec.Outcome(float(y[i, s]), bool(z[i, s])) for s in range(n[(sim.MODEL, task, a)])}
                                  for i, a in enumerate(sim.ARMS) if (sim.MODEL, task, a) not in dropped}
    return out


def screened_verdicts(verdicts: list[Verdict], drops: list[scr.Drop]) -> list[Verdict]:
    """A dropped arm's comparisons: open, "screened out"."""
    dropped = {d.arm[1:] for d in drops}
    return [v.with_(label="open", reason="screened out")
            if any((v.task, k) in dropped for k in (v.target, *v.target.split("+"))) else v for v in verdicts]


def decide_loop(rule: DecisionRule, worlds: dict, n: dict, hours: float, budget: float, wave: int,
                dropped: set, previous: dict | None = None) -> tuple[list[Verdict], float, dict]:
    """simulate.run_sweep's loop (no eval design) over the comparisons whose arms all survive,
    each at the per-comparison level of the full family (α scaled by the share kept)."""
    comps = contrasts({(sim.MODEL, t): list(sim.ARMS) for t in sim.TASKS})
    live = [c for c in comps if not any(arm in dropped for arm in c.arms())]
    sub = replace(rule, alpha=rule.alpha * len(live) / len(comps))
    costs = {(sim.MODEL, t, a): sim.arm_cost(t, a).train for t in sim.TASKS for a in sim.ARMS}
    previous = dict(previous or {})
    while True:
        outcomes = _outcomes(worlds, n, dropped)
        left = budget - hours
        live_cost = [c for arm, c in costs.items() if arm not in dropped]
        slots = min(wave, int(left / (sum(live_cost) / len(live_cost)))) if wave else 0
        result = dec.step(sub, live, outcomes, previous, n, costs, max(slots, 0), left)
        previous = {v.name: v for v in result.verdicts}
        if not result.added or all(v.decided for v in result.verdicts):
            break
        for arm, k in result.added.items():
            n[arm] += k
            hours += k * costs[arm]
    # the comparisons left out (a dropped arm in each) as open verdicts, for screened_verdicts to label
    rest = {v.name: v for v in dec.decide(rule, comps, _outcomes(worlds, n, dropped))}
    return [previous.get(c.name, rest[c.name]) for c in comps], hours, n


@dataclass(frozen=True)
class Outcome:
    verdicts: list[Verdict]
    hours: float
    drops: list[scr.Drop]
    wrong_drop: bool  # an arm within δ of its task's best (healthy estimand) dropped
    wrong_drop_mean: bool  # the same on the mean estimand (collapsed runs counted)


def wrong_drops(drops: list[scr.Drop], worlds: dict[str, sim.World], delta: float) -> tuple[bool, bool]:
    """(healthy, mean): whether any dropped arm's true value is within δ of its task's best."""
    out = []
    for value in (lambda law: law.mu, lambda law: (1 - law.p) * law.mu + law.p * sim.COLLAPSED):
        best = {t: max(value(w.law[a]) for a in sim.ARMS) for t, w in worlds.items()}
        out.append(any(value(worlds[d.arm[1]].law[d.arm[2]]) > best[d.arm[1]] - delta + 1e-12 for d in drops))
    return out[0], out[1]


def spread(world: sim.World, task: str) -> sim.World:
    """The spread case from a null world: the baseline unchanged, the other arms' means evenly
    from BASE + 0.02 down to BASE − SPREAD (where screening has arms to drop), noise kept."""
    base = sim.BASE[task]
    others = [a for a in sim.ARMS if a != "baseline"]
    mu = {"baseline": base, **{a: base + 0.02 - (0.02 + SPREAD) * i / (len(others) - 1) for i, a in enumerate(others)}}
    shift = np.array([mu[a] - world.law[a].mu for a in sim.ARMS])[:, None]
    law = {a: replace(world.law[a], mu=mu[a]) for a in sim.ARMS}
    return replace(world, law=law, train=world.train + shift)


def draw_worlds(case: str, most: int, rng: np.random.Generator) -> dict[str, sim.World]:
    """simulate.draw's worlds of every task, or the spread case's."""
    if case == "spread":
        return {t: spread(sim.draw("gaussian", t, 1.0, most, rng), t) for t in sim.TASKS}
    return {t: sim.draw(case, t, 1.0, most, rng) for t in sim.TASKS}


def replicate(case: str, rule: DecisionRule, screen: scr.ScreenRule, rng: np.random.Generator,
              budget: float = 6.0, wave: int = 16, designs=DESIGNS, screen_seeds: int = SCREEN_START
              ) -> tuple[dict[str, Outcome], dict[str, sim.World]]:
    """One world of `case` and every design of `designs` on it (module docstring); and the world."""
    worlds = draw_worlds(case, rule.most_seeds, rng)
    curves = {t: draw_curves(w, t, rng) for t, w in worlds.items()}
    full = START * sum(sim.arm_cost(t, a).train for t in sim.TASKS for a in sim.ARMS)
    out = {}
    screened = run_screen(screen, curves, screen_seeds) if any(d.startswith("screen") for d in designs) else None
    for d in designs:
        screens = screened is not None and d.startswith("screen")
        drops = screened.drops if screens else []
        seeds = screen_seeds if screens else START
        n = {(sim.MODEL, t, a): seeds for t in sim.TASKS for a in sim.ARMS}
        verdicts, hours, _ = decide_loop(rule, worlds, n, screened.hours if screens else full,
                                         budget, wave if d.endswith("decide") else 0, {x.arm for x in drops})
        out[d] = Outcome(screened_verdicts(verdicts, drops), hours, drops, *wrong_drops(drops, worlds, screen.delta))
    return out, worlds
