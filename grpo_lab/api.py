"""The Python API: what `grpo-lab plan`, `sweep` and `report` do, as calls (re-exported by grpo_lab).

    import grpo_lab

    p = grpo_lab.plan("matrices/quickstart.yaml")                  # cells, estimates, budget check
    print(len(p.cells), p.total, p.fits)
    result = grpo_lab.sweep("matrices/quickstart.yaml", workspace="ws")   # every pending cell
    print(result.counts)                                           # {'finished': 10, 'failed': 0, ...}
    html, md = grpo_lab.report_sweep("quickstart", workspace="ws")  # reports/quickstart/index.html

Each imports what it needs when called, so `import grpo_lab` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

WORKSPACE = Path(".grpo-lab")


def plan(matrix: str | Path, hardware: str | None = None, workspace: str | Path = WORKSPACE, db: str | None = None,
         screen: dict[str, Any] | None = None):
    """The matrix's Plan (grpo_lab/spec/plan.py): every cell priced on `hardware` (default: the
    matrix's budget profile), calibrated by the finished runs in the workspace's registry. screen:
    `sweep --screen`'s options (rungs=(0.25, 0.5)): the Plan's `screening` then holds the range a
    screened sweep would spend (spec/screen_spend.py); bad rungs are one ConfigError, as in `sweep`."""
    from grpo_lab.execution.calibration import from_registry
    from grpo_lab.spec.matrix import load_matrix
    from grpo_lab.spec.plan import check_data, make_plan, plan_hardware

    options = None
    if screen is not None:
        from grpo_lab.execution.screen import ScreenOptions

        options = ScreenOptions.parse(screen)
    spec = load_matrix(matrix)
    measured = from_registry(db, Path(workspace), plan_hardware(spec, hardware))
    planned = make_plan(spec, hardware, name=Path(matrix).stem, calibrations=measured)
    if options is not None:
        from grpo_lab.execution.screen import priced

        planned = priced(planned, options, Path(matrix))[0]
    check_data(planned)
    return planned


def sweep(matrix: str | Path, on_event=None, **options: Any):
    """Run the matrix's pending cells; `options` are SweepRequest's fields (runner, max_parallel,
    retries, workspace, db, tracking_uri, name, decide={...}, preflight, ...), `on_event(kind,
    **data)` receives the driver's events (execution/driver.py). Returns the SweepResult."""
    from grpo_lab.execution.driver import SweepRequest, run_sweep

    return run_sweep(SweepRequest(matrix=Path(matrix), **options), on_event)


def report_sweep(sweep_name: str, out: str | Path | None = None, workspace: str | Path = WORKSPACE,
                 db: str | None = None, metric: str = "pass@1", logit: bool = False) -> tuple[Path, Path]:
    """Write the comparison report of a registered sweep (default reports/<sweep>/); returns
    (index.html, report.md)."""
    from grpo_lab.execution import registry as reg
    from grpo_lab.report import write_report
    from grpo_lab.execution.report_inputs import sweep_data
    from grpo_lab.util.names import inside

    with reg.connect(db or reg.default_url(Path(workspace)))() as session:
        found = _find_sweep(session, sweep_name)
        target = Path(out) if out else inside(Path("reports"), found.name, "sweep name")
        return write_report(sweep_data(found, metric, logit), target)


def decide_needs(planned, delta: float, sequence: str = "t", estimand: str = "healthy", sd: float = 0.02,
                 say=print) -> None:
    """What `sweep --decide` could decide on this Plan before any run (`plan --decide-delta`):
    per task the δ decidable at the seed cap, and per comparison the seeds per arm it needs at
    `delta` with a run-to-run sd of `sd`, each line passed to `say`. ConfigError on a bad option."""
    from grpo_lab.analysis import decide as dec
    from grpo_lab.analysis.contrast import contrasts
    from grpo_lab.execution.waves import DecideOptions, plan_arms, say_needs
    from grpo_lab.util.yamlio import ConfigError

    dopts = DecideOptions.parse({"delta": delta, "sequence": sequence, "estimand": estimand})
    if sd < 0:
        raise ConfigError(f"--decide-sd: {sd} is negative (a run's standard deviation)")
    comps = contrasts(plan_arms(planned))
    say_needs(dec.prior_needs(dopts.rule, comps, sd=sd), dopts, len(comps), say)


def sweep_verdicts(found) -> tuple[Any, str]:
    """(the report's verdict table, the closing sentence of its --decide waves, "" without) of a
    registered sweep (execution.registry.Sweep). ValueError saying why when it has no finished run
    yet or runs the report refuses to pool; the table is empty when no trick set has a baseline."""
    from grpo_lab.report import VerdictPolicy
    from grpo_lab.report.decisions import closing_text
    from grpo_lab.execution.report_inputs import sweep_data
    from grpo_lab.report.verdicts import run_stats, verdict_table

    data = sweep_data(found)
    table = verdict_table(run_stats(data.runs), data.effects, data.interactions, VerdictPolicy(), data.decisions)
    return table, closing_text(data.decisions)


def _find_sweep(session, name: str):
    """The registered sweep `name`, or one ConfigError line naming the known ones."""
    from grpo_lab.execution import registry as reg
    from grpo_lab.util.yamlio import ConfigError, suggest

    found = reg.get_sweep(session, name)
    if found is None:
        known = [s.name for s in reg.all_sweeps(session)]
        raise ConfigError(f"no sweep '{name}'{suggest(name, known)}; sweeps: {', '.join(known) or 'none'}")
    return found


def finished_runs(sweep_name: str, workspace: str | Path, db: str | None) -> list[tuple[dict, Path, int]]:
    """(labels, run folder, devices) of a sweep's finished runs; one ConfigError line when the
    sweep is unknown or has none yet."""
    from grpo_lab.execution import registry as reg
    from grpo_lab.util.yamlio import ConfigError

    with reg.connect(db or reg.default_url(Path(workspace)))() as session:
        found = _find_sweep(session, sweep_name)
        done = [(c.labels(), Path(c.run.out_dir), c.run.devices) for c in found.cells if c.run.status in reg.DONE]
    if not done:
        raise ConfigError(f"sweep '{sweep_name}' has no finished run yet: run `grpo-lab sweep` first")
    return done


def sweep_results(sweep_name: str, workspace: str | Path = WORKSPACE, db: str | None = None):
    """The results frame (analysis/results.py) of a sweep's finished runs, labelled as the
    registry knows them: what `grpo-lab interactions SWEEP` analyses."""
    from grpo_lab.analysis.results import frame_from_run_dirs

    return frame_from_run_dirs([(labels, folder) for labels, folder, _ in finished_runs(sweep_name, workspace, db)])


def predict(sweep_name: str, at: float, workspace: str | Path = WORKSPACE, db: str | None = None,
            metric: str = "pass@1", level: float = 0.9):
    """Each arm's compute curve over its finished runs (analysis/curves.py) and its predicted
    `metric` at compute `at` (device-hours; steps for runs that logged no timings): a list of
    (ArmFits, Prediction)."""
    from grpo_lab.analysis import curves

    arms = curves.from_run_dirs(finished_runs(sweep_name, workspace, db), f"eval/{metric}", level)
    return [(arm, curves.predict(arm.curve, at)) for arm in arms]


def curve_verdicts(sweep_name: str, workspace: str | Path = WORKSPACE, db: str | None = None,
                   metric: str = "pass@1", alpha: float = 0.05, arms=None):
    """Each trick set against its cell's baseline on the ceiling A and on the speed C_mid of
    their compute curves (analysis/curve_verdicts.py): a list of CurveVerdict; empty for a
    --decide sweep (its seeds were added adaptively; these labels rest on fixed-sample intervals).
    arms: the sweep's curves.ArmFits when the caller has fitted them already (`predict`'s)."""
    from grpo_lab.analysis import curve_verdicts as cvd
    from grpo_lab.analysis import curves
    from grpo_lab.execution import registry as reg
    from grpo_lab.execution import waves

    with reg.connect(db or reg.default_url(Path(workspace)))() as session:
        if waves.report_rows(session, _find_sweep(session, sweep_name))["waves"]:
            return []
    if arms is None:
        arms = curves.from_run_dirs(finished_runs(sweep_name, workspace, db), f"eval/{metric}")
    return cvd.verdicts(arms, alpha)