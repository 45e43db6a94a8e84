"""`grpo-lab sweep MATRIX --screen`: run every arm's cells to a rung, drop the arms credibly below
the best (analysis/screening.py's pure rule), continue the survivors, rung after rung.

A screened cell is the same run as an unscreened one (same config, same run id, so a schedule over
`steps` is the same): the driver writes the rung's step into its run folder (rundir.STOP_AT), the
attempt pauses there with a checkpoint (worker.Paused, status `paused`), and the next rung's attempt
resumes it: no step is trained twice and a paused attempt's hours are not wasted. After the last
decision rung the survivors' stop files are removed and they train to the end; the dropped arms'
cells stay paused (pending in the registry) and are skipped by this sweep.

What each rung decided is kept in the registry, on the sweep's row (committed after the rung,
beside --decide's waves, so it travels with a shared registry): the rule, and per rung its step,
the arms dropped (why, against which arm, the core-h they had spent and the estimate of what
finishing them would have cost). A restarted sweep reads it,
skips the rungs decided and refuses other screening settings: deciding a rung again after seeing
its data would void the bound.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from sqlalchemy.orm import Session

from grpo_lab.analysis import screening as scr
from grpo_lab.execution import registry as reg
from grpo_lab.execution.runners.base import Runner
from grpo_lab.execution.sweep import SweepOptions, execute_sweep, prepare_dir
from grpo_lab.rundir import RunDir
from grpo_lab.spec.arm import arm_key
from grpo_lab.spec.plan import Plan
from grpo_lab.spec.screen_spend import screening_spend
from grpo_lab.util.yamlio import ConfigError, suggest

METRIC = "eval/pass@1"


@dataclass
class ScreenOptions:
    rungs: tuple[float, ...] = scr.DEFAULT_RUNGS  # fractions of the matrix's steps, the full length implied
    delta: float = 0.02
    alpha: float = 0.05

    @classmethod
    def parse(cls, options: dict) -> ScreenOptions:
        """From a library call's screen={...}: an unknown key or a bad value is one ConfigError."""
        names = [f.name for f in fields(cls)]
        for key in options:
            if key not in names:
                raise ConfigError(f"screen: unknown option {key!r}{suggest(key, names)}; options: {', '.join(names)}")
        out = cls(**options)
        out.rungs = tuple(out.rungs)
        try:
            out.rule
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"--screen: {exc}") from None
        return out

    @property
    def rule(self) -> scr.ScreenRule:
        return scr.ScreenRule(rungs=self.rungs, delta=self.delta, alpha=self.alpha)


def check_rungs(configs, options: ScreenOptions, matrix: Path) -> tuple[int, list[int]]:
    """(full steps, rung steps) of the matrix's configs, before anything runs: one ConfigError
    naming the field and the file when a rung misses an eval or the cells differ in steps."""
    shapes = {(c.steps, c.eval.every) for c in configs}
    if len({s for s, _ in shapes}) > 1:
        raise ConfigError(f"{matrix}: --screen needs one `steps` for every cell (got {sorted({s for s, _ in shapes})})")
    out = []
    for steps, every in sorted(shapes):
        try:
            out = scr.rung_steps(steps, options.rungs, every)
        except ValueError as exc:
            raise ConfigError(f"{matrix}: --screen {','.join(f'{r:g}' for r in options.rungs)}: {exc} "
                              "(the run config's `eval.every`)") from None
    return out[-1], out


def priced(plan: Plan, options: ScreenOptions, matrix: Path) -> tuple[Plan, list[int]]:
    """The plan with what a screened sweep of it would spend (spec/screen_spend.py) and the rung
    steps; check_rungs's ConfigError before anything runs."""
    steps = check_rungs({id(c.shared): c.shared for c in plan.cells}.values(), options, matrix)[1]
    return replace(plan, screening=screening_spend(plan, steps)), steps


def _arm(cell: reg.SweepRun) -> tuple[str, str, str]:
    return cell.model, cell.task, arm_key(cell.tricks)


def reached(cell: reg.SweepRun, step: int) -> bool:
    """Whether the cell's run is at `step` already: done, or paused there (its result says so)."""
    if cell.run.status in reg.DONE:
        return True
    last = cell.run.attempts[-1] if cell.run.attempts else None
    if last is None or last.status != "paused":
        return False
    result = RunDir(cell.run.out_dir).result(last.number) or {}
    return int(result.get("paused_at", -1)) >= step


def series(cell: reg.SweepRun, step: int) -> scr.Series:
    """The cell's evals after at most `step` steps (steps trained at each), and its base pass@1."""
    folder = RunDir(cell.run.out_dir)
    rows = [r for r in folder.metrics() if r.get(METRIC) is not None and r["step"] + 1 <= step]
    base = folder.base_pass1()
    return scr.Series(tuple(r["step"] + 1 for r in rows), tuple(float(r[METRIC]) for r in rows),
                      math.nan if base is None else base)


def run_screening(session: Session, sweep: reg.Sweep, runner: Runner, opts: SweepOptions, options: ScreenOptions,
                  steps: list[int], on_event: Callable | None = None,
                  say: Callable[[str], None] = lambda line: None) -> frozenset[str]:
    """The rungs of the module docstring; returns the run ids of the arms dropped (not to run on)."""
    rule = options.rule
    state = recorded(sweep) or {"rule": _jsonable(asdict(rule)), "rungs": []}
    if state["rule"] != _jsonable(asdict(rule)):
        raise ConfigError(f"sweep '{sweep.name}': its screening ran with {state['rule']}; rerun with those "
                          "settings or give the sweep a new --name")
    cells = sorted(sweep.cells, key=lambda c: c.position)
    arms = sorted({_arm(c) for c in cells})
    dropped = {tuple(d["arm"]) for r in state["rungs"] for d in r["drops"]}
    for r, step in enumerate(steps[:-1]):
        if r < len(state["rungs"]):
            continue  # decided before a restart
        live = [c for c in cells if _arm(c) not in dropped]
        for c in live:
            prepare_dir(c.run)
            RunDir(c.run.out_dir).write_stop_at(step)
        skip = {c.run_id for c in cells if _arm(c) in dropped or reached(c, step)}
        execute_sweep(session, sweep, runner, opts, on_event=on_event, skip=frozenset(skip))
        got = scr.screen(rule, r, step, steps[-1], {a: [series(c, step) for c in live if _arm(c) == a]
                                                    for a in arms if a not in dropped}, len(arms))
        state["rungs"].append({"rung": r, "step": step, "drops": [_drop(d, cells, step, steps[-1]) for d in got.drops],
                               "unread": {"/".join(x.arm): x.why_not for x in got.reads if x.why_not}})
        sweep.screen_json = json.dumps(state)
        session.commit()
        dropped |= {d.arm for d in got.drops}
        say(rung_line(state["rungs"][-1], len(arms) - len(dropped)))
    for c in cells:
        if _arm(c) not in dropped:
            RunDir(c.run.out_dir).write_stop_at(None)
    return frozenset(c.run_id for c in cells if _arm(c) in dropped)


def _jsonable(rule: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in rule.items()}


def _drop(d: scr.Drop, cells: list[reg.SweepRun], step: int, full: int) -> dict:
    """A drop as the record keeps it, with the core-h its cells spent and would have spent more."""
    spent = sum(c.run.gpu_hours for c in cells if _arm(c) == d.arm)
    return {"arm": list(d.arm), "best": d.best[2], "why": d.why, "below_baseline": d.below_baseline,
            "run_ids": [c.run_id for c in cells if _arm(c) == d.arm], "hours": spent,
            "hours_saved": spent * (full - step) / step}


def rung_line(rung: dict, left: int) -> str:
    """The driver's account of a rung."""
    head = f"--screen rung {rung['rung'] + 1} (step {rung['step']}): "
    if not rung["drops"]:
        return head + f"nothing dropped, {left} arms go on"
    names = ", ".join("/".join(d["arm"][1:]) + f" (below {d['best']})" for d in rung["drops"])
    return head + f"dropped {names}; {left} arms go on, ~{sum(d['hours_saved'] for d in rung['drops']):.3g} h saved"


def recorded(sweep: reg.Sweep) -> dict | None:
    """The screening the sweep recorded (the report's section), None without one."""
    return json.loads(sweep.screen_json) if sweep.screen_json else None


def dropped_at(sweep: reg.Sweep) -> dict[str, tuple[int, int]]:
    """run id -> (rung, counted from 1 as rung_line counts it, and its step) of every run of an arm
    the sweep's screening dropped; {} for a sweep that was not screened."""
    state = recorded(sweep) or {}
    return {rid: (r["rung"] + 1, r["step"]) for r in state.get("rungs", []) for d in r["drops"] for rid in d["run_ids"]}
