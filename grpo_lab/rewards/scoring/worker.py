"""Parent side of the scoring worker: one sandboxed template per trainer process, a fresh child
per answer.

The template (``_template.py``, started by ``launch.py``) has the scorer libraries imported and
forks locked-down children ahead of need; this process hands each child one job and reads back
one float. What a child costs is bounded: its deadline (``timeout_s`` times the answers in flight
per core, or ``timeout_s`` once a child of the same batch has reached its deadline) is fixed
when its job is sent, its reply is at most ``_MAX_REPLY`` bytes, and after its
verdict (reply, deadline or too long a reply) the template SIGKILLs and reaps it; a batch returns
only once every child it used is confirmed gone. At most ``workers`` answers are scored at once;
identical jobs (common within a GRPO group) are scored once.

Scoring never fails because of an answer: if the template dies or stalls, it is replaced, the
answers that were in flight are scored again one at a time, and one that loses the template
while alone scores 0. Only a worker that cannot start, cannot prepare a scorer, or loses its
template three times in a row with nothing scored raises ``ScoringError``.
"""

from __future__ import annotations

import collections
import json
import os
import pickle
import select
import signal
import socket
import tempfile
import time
from dataclasses import dataclass, field

from grpo_lab.rewards.sandbox import recovery, wire
from grpo_lab.rewards.scoring import launch, protocol
from grpo_lab.rewards.scoring.launch import ScoringError

_STARTUP_S = 60.0  # importing reasoning-gym, sympy and math-verify under load takes seconds
_STALL_S = 20.0  # no child sent, or no answer to a message, for this long: the template stalled
_MAX_JOB = 8 << 20
_MAX_PREPARE = 1 << 16
_IN_FLIGHT_PER_CORE = 4
_MAX_POOL = 64  # idle children kept ready


class _TemplateLost(Exception):
    """The template died or stopped answering."""


@dataclass
class _Flight:
    job: int
    pid: int  # in the sandbox's pid namespace: only the template can act on it
    deadline: float
    sock: socket.socket
    reply: bytearray = field(default_factory=bytearray)


class ScoringWorker:
    """Scores jobs (``protocol.job``) in sandboxed children; thread-safe, restarted after a
    fork of this process or a lost template."""

    def __init__(self, isolation: str = "bwrap", memory_mb: int = 512, timeout_s: float = 2.0,
                 workers: int | None = None):
        launch.check(isolation)
        self.isolation, self.memory_mb, self.timeout_s = isolation, memory_mb, timeout_s
        cores = os.cpu_count() or 1
        self.workers = workers or _IN_FLIGHT_PER_CORE * cores
        self.stretch = max(1.0, self.workers / cores)  # each answer still gets about timeout_s of a core
        self._lock = recovery.ForkSafeLock()
        self._proc = self._ctrl = self._err = None
        self._prepared: dict[str, tuple[str, object]] = {}
        self._warming: dict[int, tuple[int, socket.socket]] = {}
        self._idle: collections.deque = collections.deque()
        self._dying: set[int] = set()  # children told to die, not yet confirmed gone
        self._owed = 0
        self._replies: list[bytes] = []  # the template's answers to P and D
        self._poller = select.poll()
        self._silent: list[int] = []  # jobs of this attempt whose child closed without a reply
        self.answers_scored = 0
        self.templates_lost = 0
        self.scored_zero_alone = 0
        self.stall_s = _STALL_S
        self._owner = -1
        self._timed_out = False  # a child of the current batch reached its deadline

    def prepare(self, kind: str, key: str, spec) -> None:
        """Make ``key`` known to every child from now on (see ``_scorers.prepare``)."""
        with self._lock:
            if key in self._prepared:
                return
            self._prepared[key] = (kind, spec)
            if self._proc is not None and self._owner == os.getpid():
                try:
                    self._send_prepare(key, kind, spec)
                except (_TemplateLost, OSError):
                    self._discard()  # the next batch starts a fresh template, which replays it

    def score(self, jobs: list[bytes]) -> list[float]:
        """One float in [0, 1] per job, in order."""
        with self._lock:
            unique = list(dict.fromkeys(jobs))
            self._timed_out = False
            values = self._run_all(unique)
            by_job = {job: values.get(i, 0.0) for i, job in enumerate(unique)}
            return [by_job[job] for job in jobs]

    def _run_all(self, jobs: list[bytes]) -> dict[int, float]:
        def fail(losses: int) -> ScoringError:
            return ScoringError(f"the scoring worker's template was lost {losses} times in a row "
                                "with no answer scored: the host cannot run it")

        return recovery.run_all(self, range(len(jobs)), lambda batch: self._attempt(jobs, batch), fail, 0.0)

    def _attempt(self, jobs: list[bytes], batch: list[int]):
        """Score ``batch`` on the current template: (values, None), or once the template is
        lost, (the values it gave, (interrupted, never started))."""
        self._ensure_started()
        todo = collections.deque(i for i in batch if len(jobs[i]) <= _MAX_JOB)
        done: dict[int, float] = {i: 0.0 for i in batch if len(jobs[i]) > _MAX_JOB}
        inflight: dict[int, _Flight] = {}
        self._silent = []
        try:
            self._start_polling()
            self._receive()
            self._top_up(len(todo))
            while todo or inflight:
                self._send(todo, inflight, jobs)
                self._step(inflight, done)
            self._confirm_deaths()  # also shows the template alive, so a silent child was its own end
        except _TemplateLost:
            for flight in inflight.values():
                flight.sock.close()
            interrupted = sorted({f.job for f in inflight.values()} | set(self._silent))
            return {i: v for i, v in done.items() if i not in interrupted}, (interrupted, list(todo))
        self._top_up(len(jobs))  # forked while the trainer generates the next batch
        return done, None

    def _start_polling(self) -> None:
        poller = self._poller = select.poll()
        poller.register(self._ctrl.fileno(), select.POLLIN)
        for fd in self._warming:
            poller.register(fd, select.POLLIN)
        self._waiting_since = time.monotonic()

    def _send(self, todo, inflight, jobs) -> None:
        while todo and len(inflight) < self.workers and self._idle:
            i = todo.popleft()
            pid, sock = self._idle.popleft()
            try:
                sock.settimeout(self.stall_s)
                sock.sendall(protocol.frame(jobs[i]))
                sock.setblocking(False)
            except OSError:  # the child died idle: the job goes to the next one
                self._bury(pid, sock)
                todo.appendleft(i)
                self._order(1)
                continue
            self.answers_scored += 1
            self._top_up(len(todo))
            # after a timeout in this batch, timeout_s of wall time (still at least a core share
            # of timeout_s / stretch): k hostile answers cost one stretched deadline, then timeout_s
            # per workers of them
            deadline = time.monotonic() + self.timeout_s * (1.0 if self._timed_out else self.stretch)
            inflight[sock.fileno()] = _Flight(i, pid, deadline, sock)
            self._poller.register(sock, select.POLLIN)

    def _step(self, inflight, done) -> None:
        soonest = min((f.deadline for f in inflight.values()), default=time.monotonic() + self.stall_s)
        events = self._poller.poll(max(0, int((soonest - time.monotonic()) * 1000)) + 1)
        if self._idle or inflight or events:
            self._waiting_since = time.monotonic()
        elif time.monotonic() - self._waiting_since > self.stall_s:
            raise _TemplateLost(f"no child in {self.stall_s:.0f} s")
        for fd, _ in sorted(events, key=lambda e: e[0] != self._ctrl.fileno()):
            if fd == self._ctrl.fileno():
                self._receive()
            elif fd in self._warming:
                self._ready(fd)
            elif fd in inflight:
                state = protocol.drain(inflight[fd].sock, inflight[fd].reply)
                if state != "open":
                    self._finish(inflight, fd, done, state == "closed")
        now = time.monotonic()
        for fd in [fd for fd, f in inflight.items() if f.deadline <= now]:
            # a reply that reached the socket while this process was not looking counts
            state = protocol.drain(inflight[fd].sock, inflight[fd].reply)
            self._timed_out |= state != "closed"
            self._finish(inflight, fd, done, state == "closed")

    def _finish(self, inflight, fd: int, done: dict, replied: bool) -> None:
        """The verdict: the reply when the child closed after it, else 0; then the child dies."""
        flight = inflight.pop(fd)
        self._poller.unregister(fd)
        done[flight.job] = protocol.parse_reply(bytes(flight.reply)) if replied else 0.0
        if replied and not flight.reply:
            self._silent.append(flight.job)
        self._bury(flight.pid, flight.sock)

    def _bury(self, pid: int, sock: socket.socket) -> None:
        """Close a child's socket and have the template kill and reap it."""
        sock.close()
        self._dying.add(pid)
        try:
            self._ctrl.send(b"K%d" % pid)
        except OSError:
            raise _TemplateLost("control socket closed") from None

    def _confirm_deaths(self) -> None:
        deadline = time.monotonic() + self.stall_s
        while self._dying:
            if time.monotonic() > deadline:
                raise _TemplateLost(f"{len(self._dying)} children not confirmed dead in {self.stall_s:.0f} s")
            for fd, _ in self._poller.poll(100):
                if fd == self._ctrl.fileno():
                    self._receive()
                elif fd in self._warming:
                    self._ready(fd)

    def _await_reply(self) -> bytes:
        deadline = time.monotonic() + self.stall_s
        while not self._replies:
            if time.monotonic() > deadline:
                raise _TemplateLost(f"no answer in {self.stall_s:.0f} s")
            if select.select([self._ctrl], [], [], 0.1)[0]:
                self._receive()
        return self._replies.pop(0)

    def _top_up(self, wanted: int) -> None:
        self._order(min(wanted, _MAX_POOL) - len(self._idle) - len(self._warming) - self._owed)

    def _order(self, n: int) -> None:
        if n > 0:
            try:
                self._ctrl.send(b"N%d" % n)
            except OSError:
                raise _TemplateLost("control socket closed") from None
            self._owed += n

    def _receive(self) -> None:
        """Take every message the template has sent: children, kill confirmations, answers."""
        while True:
            try:
                msg, fds = wire.recv_fd(self._ctrl)
            except BlockingIOError:
                return
            except OSError:
                msg, fds = b"", []
            if not msg:
                raise _TemplateLost("the template exited")
            kind = msg[:1]
            if kind == b"X":
                self._dying.discard(int(msg[1:]))
            elif kind in (b"P", b"d"):
                if kind == b"d":  # children received before it lack what it prepared
                    self._drop_children()
                self._replies.append(msg)
            elif kind == b"C" and fds:
                self._owed -= 1
                sock = socket.socket(fileno=fds[0])
                self._warming[sock.fileno()] = (int(msg[1:]), sock)
                if not self._ready(sock.fileno(), wait=False):
                    self._poller.register(sock, select.POLLIN)

    def _ready(self, fd: int, wait: bool = True) -> bool:
        """A child's first byte is its "R"; anything else (it died) buries it."""
        pid, sock = self._warming[fd]
        try:
            message = sock.recv(1, 0 if wait else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            message = b""
        del self._warming[fd]
        if wait:
            self._poller.unregister(fd)
        if message == b"R":
            self._idle.append((pid, sock))
        else:
            self._bury(pid, sock)
            self._order(1)
        return True

    def _drop_children(self) -> None:
        for fd, (pid, sock) in list(self._warming.items()):
            try:
                self._poller.unregister(fd)
            except KeyError:
                pass
            self._bury(pid, sock)
        for pid, sock in self._idle:
            self._bury(pid, sock)
        self._warming.clear()
        self._idle.clear()

    def _send_prepare(self, key: str, kind: str, spec) -> None:
        message = b"D" + pickle.dumps((kind, key, spec))
        if len(message) > _MAX_PREPARE:
            raise ScoringError(f"scorer {key!r}: its description is over {_MAX_PREPARE} bytes")
        try:
            self._ctrl.send(message)
        except OSError:
            raise _TemplateLost("control socket closed") from None
        reply = self._await_reply()
        if reply != b"d1":
            raise ScoringError(f"the scoring worker could not prepare {key!r}: "
                               f"{reply[2:].decode(errors='replace')}")

    def _ensure_started(self) -> None:
        if self._proc is not None and (self._owner != os.getpid() or self._proc.poll() is not None):
            self._forget()
        if self._proc is None:
            self._start()

    def _start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = json.dumps({"memory_mb": self.memory_mb, "cpu_s": int(self.timeout_s) + 1,
                             "max_job": _MAX_JOB, "max_prepare": _MAX_PREPARE,
                             "seccomp_dir": launch.SECCOMP_DIR})
        self._err = tempfile.TemporaryFile()
        try:
            self._proc = launch.popen(self.isolation, child.fileno(), config, self._err)
        finally:
            child.close()
        self._owner = os.getpid()
        ready, _, _ = select.select([parent], [], [], _STARTUP_S)
        msg, fds = wire.recv_fd(parent) if ready else (b"", [])
        parent.close()
        if msg != b"R" or not fds:
            message = self._stderr()
            self._discard()
            raise ScoringError(f"the {self.isolation} scoring worker did not start:\n{message}")
        self._ctrl = socket.socket(fileno=fds[0])
        try:
            for key, (kind, spec) in self._prepared.items():
                self._send_prepare(key, kind, spec)
        except (_TemplateLost, ScoringError) as e:
            message = self._stderr()
            self._discard()
            raise ScoringError(f"{e}\n{message}".strip()) from None

    def _stderr(self) -> str:
        if self._err is None:
            return ""
        self._err.seek(0)
        return self._err.read()[-4000:].decode(errors="replace")

    def _forget(self) -> None:
        """Drop a template that died, or one inherited through fork (then only this process's
        copies of its sockets are closed)."""
        if self._owner == os.getpid():
            self.close()
        for _, sock in [*self._idle, *self._warming.values()]:
            sock.close()
        if self._ctrl is not None:
            self._ctrl.close()
        self._reset()

    def _discard(self) -> None:
        """Kill this process's template now (it may be stopped) and forget it; the namespace
        and every child go with it (each child dies with the template)."""
        if self._proc is not None and self._owner == os.getpid():
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()
        self._forget()

    def _reset(self) -> None:
        self._proc = self._ctrl = self._err = None
        self._idle.clear()
        self._warming.clear()
        self._dying.clear()
        self._replies.clear()
        self._owed = 0

    def close(self) -> None:
        """Stop the template; the namespace (and every child in it) goes with it."""
        for _, sock in [*self._idle, *self._warming.values()]:
            sock.close()
        if self._ctrl is not None:
            self._ctrl.close()
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except Exception:
                self._proc.kill()
                self._proc.wait()
        if self._err is not None:
            self._err.close()
        self._reset()
