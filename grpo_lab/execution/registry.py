"""The sweep registry (SQLAlchemy 2): sweeps, runs and attempts, with status and GPU-hours.

A run is keyed by its run id (the hash of its resolved config), so one cell is one run across
sweeps: a sweep *links* runs, and a run finished by any sweep is never executed again. Every
attempt keeps its own GPU-hours, so failed and interrupted attempts remain visible as wasted
compute. SQLite in the workspace by default; any SQLAlchemy URL works.

Only the sweep driver writes here (workers write to their run folder), and one driver at a
time holds the registry's lease (grpo_lab/execution/lease.py): a second one ends naming the first.
"""

from __future__ import annotations

import importlib.util
import json
import os
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import (
    ForeignKey,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    select,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError
from sqlalchemy.orm import (
    DeclarativeBase,
    Mapped,
    Session,
    mapped_column,
    relationship,
    sessionmaker,
)

from grpo_lab.execution.registry_upgrade import add_columns
from grpo_lab.spec.arm import arm_label
from grpo_lab.util.yamlio import ConfigError

WORKSPACE = Path(".grpo-lab")  # per-project folder: registry.db, mlflow.db, runs/
DONE = ("finished", "stopped")  # a stopped run (alarm stop_on) ended on purpose: not re-run
STATUSES = ("pending", "running", "finished", "stopped", "failed")


def now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


TUNE_PREFIX = "tune-"  # a tune's study is registered as a sweep named tune-<name>


class Sweep(Base):
    __tablename__ = "sweeps"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    matrix_path: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    hardware: Mapped[str] = mapped_column(String(50), default="cpu")
    unit: Mapped[str] = mapped_column(String(30), default="gpu-hours")
    price_per_gpu_hour: Mapped[float] = mapped_column(default=0.0)
    budget_gpu_hours: Mapped[float | None]
    planned_gpu_hours: Mapped[float | None]
    env_json: Mapped[str] = mapped_column(Text, default="{}")  # the environment pinned at creation
    mlflow_parent_id: Mapped[str | None] = mapped_column(String(64))
    screen_json: Mapped[str | None] = mapped_column(Text)  # what --screen decided, rung by rung (execution/screen.py)
    created_at: Mapped[datetime] = mapped_column(default=now)
    updated_at: Mapped[datetime] = mapped_column(default=now, onupdate=now)
    cells: Mapped[list[SweepRun]] = relationship(back_populates="sweep", cascade="all, delete-orphan")

    @property
    def is_tune(self) -> bool:
        """Whether the sweep holds a tune's trials (all of them search compute) rather than a matrix."""
        return self.name.startswith(TUNE_PREFIX)


class Run(Base):
    __tablename__ = "runs"
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    config_json: Mapped[str] = mapped_column(Text)
    out_dir: Mapped[str] = mapped_column(Text)
    devices: Mapped[int] = mapped_column(default=1)
    status: Mapped[str] = mapped_column(String(20), default="pending")
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=now)
    finished_at: Mapped[datetime | None]
    attempts: Mapped[list[Attempt]] = relationship(back_populates="run", order_by="Attempt.number",
                                                   cascade="all, delete-orphan")

    @property
    def gpu_hours(self) -> float:
        return sum(a.gpu_hours for a in self.attempts)

    @property
    def wasted_gpu_hours(self) -> float:
        """Hours of attempts that did not end the run: failed or interrupted (their checkpointed
        steps are reused by the next attempt, the steps since the last checkpoint are not). A
        preempted attempt checkpointed at its last step, so none of its hours are lost; nor did a
        paused one (screening stopped it at a rung, and the run continues from there)."""
        return sum(a.gpu_hours for a in self.attempts if a.status not in (*DONE, "preempted", "paused"))


class SweepRun(Base):
    """A cell: a run as a sweep labels it (its axis tricks, not the base's)."""

    __tablename__ = "sweep_runs"
    __table_args__ = (UniqueConstraint("sweep_id", "run_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"))
    position: Mapped[int]  # order in the matrix expansion
    # the arm's model label (spec/arm.arm_model): the model, with its trainer when not grpo-lab's
    # ("tiny (trl)"); a registry from before the trainers axis is relabelled when opened (registry_upgrade)
    model: Mapped[str] = mapped_column(String(200))
    task: Mapped[str] = mapped_column(String(100))
    tricks: Mapped[str] = mapped_column(Text)  # "+"-joined; "" = baseline
    seed: Mapped[int]
    estimate_gpu_hours: Mapped[float | None]
    sweep: Mapped[Sweep] = relationship(back_populates="cells")
    run: Mapped[Run] = relationship()

    def labels(self) -> dict:
        return {"model": self.model, "task": self.task, "tricks": arm_label(self.tricks),
                "seed": self.seed, "run_id": self.run_id}


class Attempt(Base):
    __tablename__ = "attempts"
    __table_args__ = (UniqueConstraint("run_id", "number"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.run_id"))
    number: Mapped[int]
    # running|finished|stopped|failed|interrupted|preempted|paused
    status: Mapped[str] = mapped_column(String(20), default="running")
    runner: Mapped[str] = mapped_column(String(30), default="local")
    job_id: Mapped[str | None] = mapped_column(String(64))  # the scheduler's id (Slurm): a restarted driver adopts it
    host: Mapped[str | None] = mapped_column(String(200))
    started_at: Mapped[datetime] = mapped_column(default=now)
    ended_at: Mapped[datetime | None]
    start_step: Mapped[int] = mapped_column(default=0)
    gpu_hours: Mapped[float] = mapped_column(default=0.0)
    error: Mapped[str | None] = mapped_column(Text)
    run: Mapped[Run] = relationship(back_populates="attempts")


class DriverLease(Base):
    """The one sweep driver that may write runs and attempts of this registry (grpo_lab/execution/lease.py):
    runs are shared by every sweep, so two drivers would start the same run's attempts twice."""

    __tablename__ = "driver_lease"
    id: Mapped[int] = mapped_column(primary_key=True)  # always 1: the row itself is the lock
    token: Mapped[str] = mapped_column(String(64))
    pid: Mapped[int]
    host: Mapped[str] = mapped_column(String(200))
    sweep: Mapped[str] = mapped_column(String(200))
    started_at: Mapped[datetime] = mapped_column(default=now)
    beat_at: Mapped[datetime] = mapped_column(default=now)


SCHEMA_LOCK_KEY = 0x6772706F  # 'grpo': the advisory lock that serialises CREATE on PostgreSQL


class DecideWave(Base):
    __tablename__ = "decide_waves"
    __table_args__ = (UniqueConstraint("sweep_id", "wave"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    wave: Mapped[int]  # 0: the matrix as written
    hours: Mapped[float]  # device-hours the sweep had spent when this wave was analysed
    runs: Mapped[int]  # finished runs behind the analysis
    open: Mapped[int]
    significant: Mapped[int]
    equivalent: Mapped[int]
    added_json: Mapped[str] = mapped_column(Text, default="[]")  # run ids this wave added
    # the --decide options it ran under (waves.DecideOptions), so the report can say how to rerun it
    options_json: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=now)


class DecideVerdict(Base):
    __tablename__ = "decide_verdicts"
    __table_args__ = (UniqueConstraint("sweep_id", "name"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id"))
    name: Mapped[str] = mapped_column(String(400))
    kind: Mapped[str] = mapped_column(String(20))
    model: Mapped[str] = mapped_column(String(200))
    task: Mapped[str] = mapped_column(String(100))
    target: Mapped[str] = mapped_column(Text)
    verdict: Mapped[str] = mapped_column(String(20))
    est: Mapped[float | None]
    radius: Mapped[float | None]
    t: Mapped[float]
    sigma: Mapped[float | None]
    wave: Mapped[int | None]  # the wave that decided it
    hours: Mapped[float | None]  # the sweep's device-hours when it was decided
    record_json: Mapped[str | None] = mapped_column(Text)  # the whole analysis.verdict.Verdict


def default_url(workspace: Path = WORKSPACE) -> str:
    return os.environ.get("GRPO_LAB_DB") or f"sqlite:///{Path(workspace).resolve() / 'registry.db'}"


def engine_url(url: str) -> str:
    """`url` with a driver that is installed: a bare `postgresql://` means psycopg2 to SQLAlchemy, while
    the `postgres` extra installs psycopg 3. A ConfigError names the URL when it cannot be used."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ConfigError(f"registry URL {url!r} is not a SQLAlchemy URL: use sqlite:///PATH or "
                          "postgresql+psycopg://USER@HOST/DB") from None
    if parsed.drivername == "postgresql" and importlib.util.find_spec("psycopg2") is None:
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername == "postgresql+psycopg" and importlib.util.find_spec("psycopg") is None:
        raise ConfigError(f"registry URL {parsed.render_as_string(hide_password=True)}: no PostgreSQL driver "
                          "installed: pip install 'grpo-lab[postgres]'")
    return parsed.render_as_string(hide_password=False)


def connect(url: str) -> sessionmaker[Session]:
    """Open (and create) the registry at `url`; returns a session factory."""
    url = engine_url(url)
    if url.startswith("sqlite:///"):
        folder = Path(url.removeprefix("sqlite:///")).parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot write the workspace {folder}: {exc.strerror}; pass --workspace a folder "
                              f"you can write (or --db a registry URL)") from None
    engine = create_engine(url, connect_args={"timeout": 60} if url.startswith("sqlite") else {})
    if url.startswith("sqlite"):
        @event.listens_for(engine, "connect")
        def _pragmas(conn, _record):  # WAL: readers (`grpo-lab status`) never block the driver
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA foreign_keys=ON")
    try:
        create_schema(engine, url)
    except OperationalError as exc:  # a server that is down or refuses us: say which, keep the password
        raise ConfigError(f"cannot open the registry {engine.url!r}: {exc.orig}".strip()) from None
    return sessionmaker(engine, expire_on_commit=False)


def create_schema(engine, url: str) -> None:
    """Create missing tables (and add missing columns). Two processes opening a new registry at once (a sweep starting and
    `grpo-lab status`) would both CREATE: SQLite files are serialised by a lock file beside them,
    PostgreSQL by an advisory lock held for the transaction; other databases retry, since the
    loser's CREATE fails only because the winner's succeeded."""
    if url.startswith("sqlite:///"):
        import fcntl

        path = Path(url.removeprefix("sqlite:///"))
        with open(f"{path}.schema-lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            with engine.begin() as conn:
                Base.metadata.create_all(conn)
                add_columns(conn, path.parent)
        return
    if engine.dialect.name == "postgresql":  # concurrent CREATEs there collide in pg_class (UniqueViolation)
        with engine.begin() as conn:
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
            Base.metadata.create_all(conn)
            add_columns(conn)
        return
    for attempt in range(5):
        try:
            Base.metadata.create_all(engine)
            return
        except DBAPIError:
            if attempt == 4:
                raise


def get_sweep(session: Session, name: str) -> Sweep | None:
    return session.scalar(select(Sweep).where(Sweep.name == name))


def register_cells(session: Session, sweep: Sweep, cells: list, estimates: list, runs_dir: Path,
                   devices: dict[str, int]) -> int:
    """Link every cell to the sweep, creating runs not seen before; returns how many runs are new.
    Cells already linked keep their rows (labels are a function of the run id)."""
    linked = {c.run_id for c in sweep.cells}
    known = set(session.scalars(select(Run.run_id).where(Run.run_id.in_([c.run_id for c in cells]))))
    new = 0
    for pos, (cell, est) in enumerate(zip(cells, estimates)):
        if cell.run_id not in known:
            session.add(Run(run_id=cell.run_id, config_json=json.dumps(cell.config.model_dump(mode="json")),
                            out_dir=str(Path(runs_dir).resolve() / cell.run_id), devices=devices.get(cell.model, 1)))
            known.add(cell.run_id)
            new += 1
        if cell.run_id not in linked:
            sweep.cells.append(SweepRun(run_id=cell.run_id, position=pos, model=cell.model, task=cell.task,
                                        tricks="+".join(cell.tricks), seed=cell.seed,
                                        estimate_gpu_hours=est.total if est else None))
    session.commit()
    return new


def begin_attempt(session: Session, run: Run, runner: str, host: str, start_step: int) -> Attempt:
    number = 1 + max((a.number for a in run.attempts), default=0)
    attempt = Attempt(run_id=run.run_id, number=number, runner=runner, host=host, start_step=start_step)
    run.attempts.append(attempt)
    run.status = "running"
    session.commit()
    return attempt


def end_attempt(session: Session, attempt: Attempt, status: str, gpu_hours: float, error: str | None = None,
                retry: bool = False) -> None:
    """Close an attempt and move its run: finished/stopped end it; a failure leaves it failed, or
    pending when it will be retried; an interruption or a preemption leaves it pending (resumed
    from its checkpoint by this sweep or the next)."""
    attempt.status, attempt.gpu_hours, attempt.error, attempt.ended_at = status, gpu_hours, error, now()
    run = attempt.run
    if status in DONE:
        run.status, run.error, run.finished_at = status, None, now()
    else:
        run.status, run.error = ("failed" if status == "failed" and not retry else "pending"), error
    session.commit()


def counts(session: Session, sweep: Sweep) -> dict[str, int]:
    rows = session.execute(select(Run.status, func.count()).join(SweepRun, SweepRun.run_id == Run.run_id)
                           .where(SweepRun.sweep_id == sweep.id).group_by(Run.status))
    out = dict.fromkeys(STATUSES, 0)
    out.update({status: n for status, n in rows})
    return out


def decide_options(session: Session, sweep: Sweep) -> dict | None:
    """The --decide options the sweep's last wave recorded (None: no wave recorded them)."""
    last = session.scalars(select(DecideWave).where(DecideWave.sweep_id == sweep.id, DecideWave.options_json.is_not(None))
                           .order_by(DecideWave.wave.desc()).limit(1)).first()
    return None if last is None else json.loads(last.options_json)


def all_sweeps(session: Session) -> list[Sweep]:
    return list(session.scalars(select(Sweep).order_by(Sweep.created_at)))
