"""One driver (a `sweep` or a `tune`) per registry at a time: a lease row that a live driver renews.

Runs are shared by every sweep of a registry, so a second driver would begin attempts of the same
runs (a UNIQUE failure on attempts) and race the first on the MLflow store. The lease is a single
row keyed 1: inserting it is atomic on every database, and a takeover is a conditional UPDATE on
the holder's token, so two drivers can never both hold it. A holder renews it from a thread every
BEAT seconds; one that died (kill -9, a lost node) is taken over once it is STALE, or at once when
it ran on this host and its process is gone.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
import warnings
from datetime import timedelta

from sqlalchemy import delete, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from grpo_lab.execution.registry import DriverLease, now
from grpo_lab.util.yamlio import ConfigError

BEAT = 15.0  # seconds between renewals
STALE = timedelta(seconds=90)  # a lease not renewed for this long belongs to a dead driver


class DriverBusy(ConfigError):
    """Another live driver holds the registry; the message names it (pid, host, sweep)."""


def _alive(lease: DriverLease) -> bool:
    if now() - lease.beat_at > STALE:
        return False
    if lease.host != socket.gethostname():
        return True  # another machine's process: only its heartbeat can tell
    try:
        os.kill(lease.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process, but alive
    return True


def driver_alive(session: Session) -> bool:
    """Whether a live driver holds the registry (a killed one's lease row stays until taken over)."""
    held = session.get(DriverLease, 1, populate_existing=True)
    return held is not None and _alive(held)


def _busy(lease: DriverLease) -> DriverBusy:
    age = (now() - lease.beat_at).total_seconds()
    return DriverBusy(
        f"another sweep driver is running on this registry: pid {lease.pid} on host {lease.host}, sweep "
        f"'{lease.sweep}', since {lease.started_at:%Y-%m-%d %H:%M:%S} UTC (last heartbeat {age:.0f} s ago). "
        f"Wait for it to end (`grpo-lab status`), stop it (kill {lease.pid} on {lease.host}), or use another "
        f"--workspace/--db; a driver that died is taken over after {STALE.total_seconds():.0f} s")


class Lease:
    """The registry's driver lease, held by this process until `release()` (or the end of a `with`)."""

    def __init__(self, factory: sessionmaker[Session], sweep: str) -> None:
        self.factory, self.token = factory, uuid.uuid4().hex
        self._take(sweep)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="grpo-lab-lease", daemon=True)
        self._thread.start()

    def _take(self, sweep: str) -> None:
        mine = {"token": self.token, "pid": os.getpid(), "host": socket.gethostname(), "sweep": sweep}
        with self.factory() as s:
            s.add(DriverLease(id=1, **mine))
            try:
                s.commit()
                return
            except IntegrityError:
                s.rollback()
            held = s.get(DriverLease, 1, populate_existing=True)
            if held is not None and _alive(held):
                raise _busy(held)
            taken = s.execute(update(DriverLease).where(DriverLease.id == 1, DriverLease.token == held.token)
                              .values(**mine, started_at=now(), beat_at=now())) if held is not None else None
            s.commit()
            if taken is None or taken.rowcount != 1:  # released or taken by another driver meanwhile
                held = s.get(DriverLease, 1, populate_existing=True)
                if held is None:
                    return self._take(sweep)
                raise _busy(held)

    def _renew(self) -> None:
        while not self._stop.wait(BEAT):
            try:
                with self.factory() as s:
                    s.execute(update(DriverLease).where(DriverLease.token == self.token).values(beat_at=now()))
                    s.commit()
            except Exception as exc:  # a database hiccup: the next beat may pass; the sweep goes on
                warnings.warn(f"renewing the sweep driver's lease failed: {exc}")

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def release(self) -> None:
        self._stop.set()
        self._thread.join()
        with self.factory() as s:
            s.execute(delete(DriverLease).where(DriverLease.token == self.token))
            s.commit()
