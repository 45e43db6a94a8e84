"""`grpo-lab sweep MATRIX --decide`: run the matrix as the first wave, then decide every
comparison and add seeds where verdicts are open and can still close, wave after wave, until none
is open, none can close within the seed cap, or the budget is spent. The statistics are analysis/decide.py's pure functions; this is the loop and
its bookkeeping.

The registry keeps (execution/registry.py), per sweep, one `decide_waves` row per analysed wave (hours spent so far, the
verdict counts, the runs it added) and one `decide_verdicts` row per comparison (its latest
estimate and radius while open; the wave and the hours spent when it was decided). Added seeds
are ordinary cells of the sweep, so a killed `--decide` resumes where it was: the pending cells
of the last wave run first (interrupted ones from their checkpoints), then the loop goes on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from grpo_lab.analysis import collapse, eval_design
from grpo_lab.analysis import decide as dec
from grpo_lab.analysis.contrast import Contrast, contrasts
from grpo_lab.analysis.rule import ESTIMANDS, METHODS, SEQUENCES, DecisionRule
from grpo_lab.analysis.verdict import Verdict
from grpo_lab.execution import final_evals
from grpo_lab.execution import registry as reg
from grpo_lab.execution.final_evals import Design
from grpo_lab.execution.runners.base import Runner
from grpo_lab.execution.sweep import SweepOptions, execute_sweep, totals
from grpo_lab.rundir import RunDir
from grpo_lab.spec.matrix import Cell
from grpo_lab.spec.model_cards import load_card
from grpo_lab.spec.plan import Plan
from grpo_lab.spec.arm import arm_key
from grpo_lab.util.yamlio import ConfigError, suggest

METRIC = "eval/pass@1"


@dataclass
class DecideOptions:
    # device-hours for the whole sweep; wave 0 (the matrix) always runs in full, the budget bounds
    # the waves added after it
    budget: float | None = None
    delta: float = 0.02  # equivalence margin on pass@1
    alpha: float = 0.05  # family-wise, over every label and wave
    wave: int | None = None  # runs per added wave (default: the runner's slots)
    most_seeds: int = 32  # seed cap per arm; each sequence is tuned to be tightest there
    # "paired": one sequence per comparison on seed-index paired differences; "unpaired": one per
    # arm mean, combined by interval sums (analysis/decide.py)
    method: str = "paired"
    # "t": Gaussian noise of any variance per comparison (analysis/tmix.py); "betting": any noise
    # within the score's range, at ~10x the seeds (analysis/betting.py)
    sequence: str = "t"
    # what a label is about (analysis/rule.py): "healthy", pass@1 on the seeds where no run of the
    # comparison collapsed, joined to a collapse-rate verdict; "mean", over all seeds, assuming no
    # collapse mode the seeds have not shown
    estimand: str = "healthy"
    # completions per problem of the final eval the comparisons are decided on: "auto" chooses, per
    # (model, task), after wave 0 from its runs' noise and costs (analysis/eval_design.py); an int
    # K re-evaluates every run's final checkpoint with K; None keeps each run's own final eval
    eval_samples: int | str | None = "auto"

    @classmethod
    def parse(cls, options: dict) -> DecideOptions:
        """From a library call's decide={...}: an unknown key or a value out of range is a
        ConfigError naming it, raised before any run starts."""
        if not isinstance(options, dict):
            raise ConfigError(f"decide: expected a mapping of options, got {type(options).__name__}")
        names = [f.name for f in fields(cls)]
        for key in options:
            if key not in names:
                raise ConfigError(f"decide: unknown option {key!r}{suggest(key, names)}; options: {', '.join(names)}")
        out = cls(**options)
        allowed = {"method": METHODS, "sequence": SEQUENCES, "estimand": ESTIMANDS}
        for key, choices in allowed.items():
            if getattr(out, key) not in choices:
                raise ConfigError(f"decide.{key}: {getattr(out, key)!r} is not one of {', '.join(choices)}")
        number = (int, float)
        es = out.eval_samples
        ok = {"eval_samples": es is None or es == "auto" or (isinstance(es, int) and not isinstance(es, bool) and es >= 1),
              "delta": isinstance(out.delta, number) and 0 < out.delta < 1,
              "alpha": isinstance(out.alpha, number) and 0 < out.alpha < 1,
              "most_seeds": isinstance(out.most_seeds, int) and out.most_seeds >= 2,
              "wave": out.wave is None or (isinstance(out.wave, int) and out.wave >= 1),
              "budget": out.budget is None or (isinstance(out.budget, number) and out.budget > 0)}
        bad = [k for k, good in ok.items() if not good]
        if bad:
            raise ConfigError(f"decide.{bad[0]}: {getattr(out, bad[0])!r} is out of range: delta and alpha in (0, 1), "
                              "most_seeds >= 2, wave >= 1 (or unset), budget > 0 (or unset), eval_samples 'auto', "
                              "an integer >= 1 or unset")
        return out

    @property
    def rule(self) -> DecisionRule:
        """The statistics of these options, frozen (what a restart may not change)."""
        return DecisionRule(**{k: getattr(self, k) for k in STATISTICS})

    def check_continues(self, recorded: dict | None, sweep: str) -> None:
        """A restarted --decide must keep the statistics its earlier waves were decided under:
        switching the sequence, pairing, α, δ or seed cap after seeing data voids the guarantee
        (budget and wave size may change). `recorded`: the last wave's options (None: unknown)."""
        if not recorded:
            return
        # waves recorded before the sequence was an option used betting, before the estimand, mean
        was = {**asdict(DecideOptions(sequence="betting", estimand="mean")), **recorded}
        changed = [k for k in STATISTICS if was.get(k) != getattr(self, k)]
        if changed:
            diff = ", ".join(f"{k} {was.get(k)!r} -> {getattr(self, k)!r}" for k in changed)
            raise ConfigError(f"sweep '{sweep}': its --decide waves so far ran with other statistics ({diff}); "
                              "rerun with the recorded values (the report's Reproduce line has them) or give "
                              "the sweep a new --name")

    def design(self, recorded: dict | None, started: bool, choose: Callable[[], Design],
               every: list[tuple[str, str]] = ()) -> Design:
        """The eval design the waves use: the one recorded with them (none for waves recorded
        before the design existed), else, before wave 0 is recorded, per eval_samples: chosen
        (`choose()`, "auto"), K everywhere (an int) or none. An explicit K a restart gives must
        be the recorded one in every cell of `every` (the sweep's (model, task)s): switching
        measurement after seeing data voids the guarantee."""
        if started:
            was = final_evals.from_options(recorded)
            cells = set(was) | set(every)
            said = final_evals.describe(was) or "each run's own final eval"
            if isinstance(self.eval_samples, int) and was != dict.fromkeys(cells, self.eval_samples):
                raise ConfigError(f"--eval-samples {self.eval_samples}: this sweep's waves were decided on {said}; "
                                  "rerun with --eval-samples auto (keeps it) or a new --name")
            if self.eval_samples is None and was:
                raise ConfigError(f"--eval-samples none: this sweep's waves were decided on {said}; "
                                  "rerun with --eval-samples auto (keeps it) or a new --name")
            return was
        return choose() if self.eval_samples is not None else {}


STATISTICS = tuple(f.name for f in fields(DecisionRule))  # what a restart may not change


def observe(sweep: reg.Sweep, design: Design | None = None, skip: frozenset[str] = frozenset()
            ) -> tuple[dict, dict, dict]:
    """(outcomes, seeds, cost): (model, task) -> key -> {seed index: Outcome(final pass@1, collapsed)}
    of finished runs (the score at the design's K where it has one: final_evals.score; collapsed by
    the run's own trajectory, collapse.from_summary; a collapsed run whose eval at K is missing
    still counts, at its own final eval: the runs likeliest to miss it are the collapsed ones); (model, task, key) -> cells
    registered (pending included); -> mean device-hours of a run (what a new seed costs: its
    eval at K is in its own attempt's hours; wave 0's eval-only re-evals were a one-off)."""
    scores: dict = {}
    seeds: dict = {}
    hours: dict = {}
    for cell in sweep.cells:
        if cell.run_id in skip:  # --screen dropped its arm
            continue
        arm = (cell.model, cell.task, arm_key(cell.tricks))
        seeds[arm] = seeds.get(arm, 0) + 1
        summary = RunDir(cell.run.out_dir).summary() if cell.run.status in reg.DONE else None
        seen = final_evals.score(cell, summary, design or {}) if summary is not None else None
        fell = summary is not None and collapse.from_summary(summary)
        if seen is None and fell:  # a collapsed run counts even where its eval at K is missing
            own = summary.final.get("eval/pass@1")
            seen = float(own) if own is not None and math.isfinite(own) else 0.0
        if seen is not None:
            scores.setdefault(arm[:2], {}).setdefault(arm[2], {})[cell.seed] = dec.Outcome(seen, fell)
            hours.setdefault(arm, []).append(cell.run.gpu_hours)
    every = [h for hs in hours.values() for h in hs]
    fallback = sum(every) / len(every) if every else 1.0
    cost = {arm: (sum(hours[arm]) / len(hours[arm]) if hours.get(arm) else fallback) for arm in seeds}
    return scores, seeds, cost


def new_cells(plan: Plan, sweep: reg.Sweep, added: dict) -> list[Cell]:
    """Cells for the added seeds: each arm's next unused seed indices, configs from the plan."""
    template = {(c.model, c.task, arm_key(c.tricks)): c for c in plan.cells}
    used: dict = {}
    for cell in sweep.cells:
        used.setdefault((cell.model, cell.task, arm_key(cell.tricks)), set()).add(cell.seed)
    out = []
    for arm, k in sorted(added.items()):
        base, taken = template[arm], used.get(arm, set())
        free = (s for s in range(10**6) if s not in taken)
        for seed in [next(free) for _ in range(k)]:
            cfg = base.shared.model_copy(update={"seed": seed})
            out.append(Cell(base.model, base.task, base.tricks, seed, cfg.run_id(), base.warnings, base.shared))
    return out


def record(session: Session, sweep: reg.Sweep, wave: int, verdicts: list[Verdict], hours: float,
           runs: int) -> reg.DecideWave:
    """Store a wave's verdicts: each comparison's latest (a newly decided one with its wave and hours;
    a decided one as it was decided, its collapse counts updated)."""
    stored = {v.name: v for v in session.scalars(select(reg.DecideVerdict).where(reg.DecideVerdict.sweep_id == sweep.id))}
    for verdict in verdicts:
        v = stored.get(verdict.name)
        if v is None:
            v = reg.DecideVerdict(sweep_id=sweep.id, name=verdict.name, kind=verdict.kind, model=verdict.model,
                                  task=verdict.task, target=verdict.target, verdict="open", t=0.0)
            session.add(v)
        if verdict.decided and v.verdict == "open":
            verdict = verdict.with_(wave=wave, hours=hours)
        elif verdict.decided:
            verdict = verdict.with_(wave=v.wave, hours=v.hours)
        v.verdict, v.wave, v.hours = verdict.label, verdict.wave, verdict.hours
        v.est, v.radius, v.t, v.sigma = _finite(verdict.est), _finite(verdict.radius), verdict.seeds, _finite(verdict.sigma)
        v.record_json = json.dumps(verdict.as_dict())
    counts = dec.counts(verdicts)
    w = session.scalar(select(reg.DecideWave).where(reg.DecideWave.sweep_id == sweep.id, reg.DecideWave.wave == wave))
    if w is None:
        w = reg.DecideWave(sweep_id=sweep.id, wave=wave)
        session.add(w)
    w.hours, w.runs = hours, runs
    w.significant, w.equivalent, w.open = counts["significant"], counts["equivalent"], counts["open"]
    session.flush()
    return w


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None  # SQL has no inf or NaN


def stored_verdicts(session: Session, sweep: reg.Sweep) -> dict[str, Verdict]:
    """The sweep's latest verdicts by name (rows stored before verdicts were records are left out:
    their comparisons are decided again from the runs)."""
    rows = session.scalars(select(reg.DecideVerdict).where(reg.DecideVerdict.sweep_id == sweep.id))
    return {v.name: Verdict.from_dict(json.loads(v.record_json)) for v in rows if v.record_json}


def waves(session: Session, sweep: reg.Sweep) -> list[reg.DecideWave]:
    return list(session.scalars(select(reg.DecideWave).where(reg.DecideWave.sweep_id == sweep.id).order_by(reg.DecideWave.wave)))


def run_decide(session: Session, sweep: reg.Sweep, plan: Plan, runner: Runner, opts: SweepOptions,
               dopts: DecideOptions, on_event=None, say=print, skip: frozenset[str] = frozenset()) -> str:
    """The --decide loop; returns why it stopped ("decided", "budget", "cannot close": every open
    comparison is beyond the seed cap or the budget). `skip`: the cells of the arms --screen
    dropped: their comparisons are left out, each kept one at its level in the full family (α
    scaled by the share kept, so α_each is what it would be: the Bonferroni bound holds)."""
    budget = dopts.budget if dopts.budget is not None else plan.limit
    recorded = reg.decide_options(session, sweep)
    dopts.check_continues(recorded, sweep.name)
    rule = dopts.rule
    comps = contrasts(plan_arms(plan))
    if skip:
        gone = {(c.model, c.task, arm_key(c.tricks)) for c in sweep.cells if c.run_id in skip}
        kept = [c for c in comps if not gone & set(c.arms())]
        rule = replace(rule, alpha=rule.alpha * max(len(kept), 1) / len(comps))
        comps = kept
    devices = {c.model: load_card(c.shared.model).gpus for c in plan.cells}  # keyed by the arm's model label
    choose = lambda: choose_design(sweep, plan, comps, dopts, say,  # noqa: E731
                                   None if budget is None else budget - totals(sweep)["gpu_hours"])
    cells_of = sorted({(c.model, c.task) for c in plan.cells})
    design = dopts.design(recorded, True, choose, cells_of) if waves(session, sweep) else None
    # the option a restart records is the one the design came from (auto on a restart keeps it)
    first = recorded.get("eval_samples") if recorded else dopts.eval_samples
    while True:
        execute_sweep(session, sweep, runner, opts, on_event=on_event, design=design, skip=skip)
        if design is None:  # wave 0 ran: choose once
            design = dopts.design(recorded, False, choose)
        final_evals.run_final_evals(sweep, runner, design, opts.retries, say)
        scores, seeds, cost = observe(sweep, design, skip)
        hours = totals(sweep, design)["gpu_hours"]
        done = waves(session, sweep)
        runs = sum(len(v) for arms in scores.values() for v in arms.values())
        # a restart that finds no new finished run (a budget stop, raised) re-analyses the last wave
        wave = (done[-1].wave if done[-1].runs == runs else done[-1].wave + 1) if done else 0
        slots = dopts.wave or runner.slots
        mean_cost = sum(cost.values()) / len(cost)
        left = None if budget is None else budget - hours
        if left is not None:
            slots = min(slots, int(left / mean_cost))
        result = dec.step(rule, comps, scores, stored_verdicts(session, sweep), seeds, cost, max(slots, 0), left)
        w = record(session, sweep, wave, result.verdicts, hours, runs)
        w.options_json = json.dumps({**asdict(dopts), "eval_samples": first,
                                     "eval_design": [[m, t, k] for (m, t), k in sorted(design.items())]})
        m = dec.counts(result.verdicts)
        say(f"wave {wave}: {hours:.3g} {sweep.unit} spent; {m['significant']} significant, "
            f"{m['equivalent']} equivalent, {m['open']} open of {len(comps)}")
        if m["open"] == 0:
            session.commit()
            return "decided"
        if wave == 0:
            flip = replace(rule, estimand="mean" if rule.estimand == "healthy" else "healthy")
            other = dec.needs(flip, comps, dec.decide(flip, comps, scores), seeds, cost, left)
            say_needs(result.needs, dopts, len(comps), say, other)
        if not result.added:
            session.commit()
            return "budget" if slots <= 0 else "cannot close"
        cells = new_cells(plan, sweep, result.added)
        w.added_json = json.dumps(json.loads(w.added_json or "[]") + [c.run_id for c in cells])
        reg.register_cells(session, sweep, cells, [None] * len(cells), Path(opts.workspace) / "runs", devices)


def choose_design(sweep: reg.Sweep, plan: Plan, comps: list[Contrast], dopts: DecideOptions,
                  say=print, budget_left: float | None = None) -> Design:
    """The eval design after wave 0: "auto" asks eval_design.choose per (model, task) (from the
    runs' noise and costs only, on their own final evals; no re-evals beyond `budget_left`); an
    int K applies everywhere."""
    own = {(c.model, c.task): c.shared.eval.samples for c in plan.cells}
    if isinstance(dopts.eval_samples, int):
        return dict.fromkeys(own, dopts.eval_samples)
    outcomes, _, _ = observe(sweep)
    beta, costs = final_evals.design_inputs(sweep)
    choice = eval_design.choose_after_wave0(dopts.rule, comps, outcomes, costs, beta, budget_left)
    for (m, t), c in choice.items():
        best, table = c["multiplier"], c["by_multiplier"]

        def cost(x: int) -> str:
            hours, closable = table[x]
            return f"{hours / closable:.3g} {sweep.unit} per closable comparison ({closable})" if closable \
                else "nothing closable"

        say(f"eval design {m}/{t}: final evals at {best * own[(m, t)]} completions per problem (x{best}): "
            f"{cost(best)}; x1: {cost(1)}")
    return {cell: c["multiplier"] * own[cell] for cell, c in choice.items() if c["multiplier"] > 1}


def say_needs(plan: list[dec.Need], dopts: DecideOptions, family: int, say=print,
              other: list[dec.Need] | None = None) -> None:
    """Print, per task, the δ decidable at the seed cap (and under the other estimand, `other`'s
    needs, what it would buy) and the smallest collapse-rate rise the cap can rule out in a family
    of `family` comparisons (every comparison's collapse verdict, open or not); then, per
    open comparison, the seeds per arm it needs under the rule, whether
    the seed cap or the budget blocks it (the allocator then spends nothing on it), and the δ it
    could be decided at within the cap."""
    rule = dopts.rule
    blocked = [p for p in plan if p.blocked]
    rise = collapse.compare((("a", 1.0), ("b", -1.0)), {"a": dict.fromkeys(range(rule.most_seeds), False),
                                                         "b": dict.fromkeys(range(rule.most_seeds), False)},
                            (-1.0, 1.0), rule.collapse_alpha_each(family), rule.most_seeds).upper
    say(f"labels are about {rule.estimand_text}; with no collapse seen in {rule.most_seeds} seeds per arm, "
        f"a collapse-rate rise below {100 * rise:.0f} points cannot be excluded")
    flip = "mean" if rule.estimand == "healthy" else "healthy"
    for task in sorted({p.name.rsplit("/", 2)[1] for p in plan}):
        mine = [p.delta_at_cap for p in plan if p.name.rsplit("/", 2)[1] == task]
        alt = [p.delta_at_cap for p in other or [] if p.name.rsplit("/", 2)[1] == task]
        also = f"; --estimand {flip}: {min(alt):.3g} to {max(alt):.3g}" if alt else ""
        say(f"  {task}: δ decidable at the cap ({rule.most_seeds} seeds): {min(mine):.3g} to {max(mine):.3g}{also}")
    say(f"{len(plan)} open comparisons; {len(blocked)} cannot close within the seed cap "
        f"({rule.most_seeds}) or the budget at δ = {rule.delta:g}:")
    for p in plan:
        need = "never" if not math.isfinite(p.seeds_needed) else f"{p.seeds_needed:.0f}"
        flag = f"  BLOCKED by the {p.blocked}; decidable at δ ≥ {p.delta_at_cap:.3g}" if p.blocked else ""
        now = f"{p.seeds} now, " if p.seeds else ""
        say(f"  {p.name}: {now}needs {need} seeds per arm{flag}")


def plan_arms(plan: Plan) -> dict[tuple[str, str], list[str]]:
    """(model, task) -> the plan's arm keys, in plan order."""
    out: dict = {}
    for c in plan.cells:
        key = arm_key(c.tricks)
        if key not in out.setdefault((c.model, c.task), []):
            out[(c.model, c.task)].append(key)
    return out


def report_rows(session: Session, sweep: reg.Sweep) -> dict:
    """{"waves": [...], "verdicts": [Verdict], "options": {...}} as the report reads them: empty
    lists for a sweep that never ran with --decide; options: DecideOptions of its last recorded
    wave (None when no wave recorded them). Verdicts stored before they were records read as
    mean-estimand verdicts with no collapse verdict."""
    done = waves(session, sweep)
    ws = [{"wave": w.wave, "hours": w.hours, "runs": w.runs, "significant": w.significant,
           "equivalent": w.equivalent, "open": w.open, "added": len(json.loads(w.added_json))}
          for w in done]
    rows = session.scalars(select(reg.DecideVerdict).where(reg.DecideVerdict.sweep_id == sweep.id))
    vs = [Verdict.from_dict(json.loads(v.record_json)) if v.record_json else _legacy(v) for v in rows]
    return {"waves": ws, "verdicts": vs, "options": reg.decide_options(session, sweep)}


def _legacy(v: reg.DecideVerdict) -> Verdict:
    est = math.nan if v.est is None else v.est
    radius = math.inf if v.radius is None else v.radius
    return Verdict(name=v.name, kind=v.kind, model=v.model, task=v.task, target=v.target, estimand="mean",
                   label=v.verdict, est=est, lower=est - radius, upper=est + radius,
                   sigma=math.nan if v.sigma is None else v.sigma, seeds=int(v.t), runs=int(v.t),
                   collapse=collapse.CollapseVerdict((), math.nan, -math.inf, math.inf, 0, "open"),
                   wave=v.wave, hours=v.hours)
