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


def plan(matrix: str | Path, hardware: str | None = None, workspace: str | Path = WORKSPACE, db: str | None = None):
    """The matrix's Plan (grpo_lab/spec/plan.py): every cell priced on `hardware` (default: the
    matrix's budget profile), calibrated by the finished runs in the workspace's registry."""
    from grpo_lab.execution.calibration import from_registry
    from grpo_lab.spec.matrix import load_matrix
    from grpo_lab.spec.plan import check_data, make_plan, plan_hardware

    spec = load_matrix(matrix)
    measured = from_registry(db, Path(workspace), plan_hardware(spec, hardware))
    planned = make_plan(spec, hardware, name=Path(matrix).stem, calibrations=measured)
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
    from grpo_lab.report.inputs import sweep_data
    from grpo_lab.util.names import inside

    with reg.connect(db or reg.default_url(Path(workspace)))() as session:
        found = _find_sweep(session, sweep_name)
        target = Path(out) if out else inside(Path("reports"), found.name, "sweep name")
        return write_report(sweep_data(found, metric, logit), target)


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