"""Parent side of the sandbox: one template process per trainer, a fresh child per program.

The template forks locked-down children ahead of need and hands this process one end of
each child's socket; a program is one message to an idle child, its results are messages
back until the child closes. What a program costs this process is bounded by the program's
own budget: its deadline is fixed when its job is sent (``timeout_s`` times the programs in
flight per core; no byte stream extends it), it may send one message per test plus its end
mark and at most ``_MAX_OUTPUT`` bytes, and a program over either budget is cut off and
killed. At most ``workers`` programs run at once; identical (code, tests) pairs, common
within a GRPO group, run once.

Scoring never fails because of a program: if the template dies or stalls (the OOM killer, a
signal from outside), it is replaced, the programs that were in flight run again one at a
time, and one that loses the template while running alone scores 0. Only a template that
cannot start at all raises ``SandboxError``.
"""

from __future__ import annotations

import array
import collections
import json
import os
import select
import signal
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field

from grpo_lab.rewards.sandbox import grading, isolation
from grpo_lab.rewards.sandbox.isolation import SandboxError

_STARTUP_S = 20.0  # an interpreter start under load can take seconds
_MAX_OUTPUT = 1 << 18  # bytes of results one program may send
_MAX_JOB = 1 << 17  # a longer program scores 0 without running (one socket message)
_IN_FLIGHT_PER_CORE = 4
_END = b"E"  # a child's last message
_MAX_POOL = 256  # idle children kept ready: about 1.5 MB of private memory each
_LOSSES_IN_A_ROW = 3  # template losses with no program scored in between: the host is broken


class _TemplateLost(Exception):
    """The template died or stopped sending children."""


@dataclass
class _Flight:
    """One program running in one child."""

    program: int
    pid: int  # in the sandbox's pid namespace: only the template can act on it
    deadline: float
    sock: socket.socket
    messages_left: int
    output: bytearray = field(default_factory=bytearray)


class Sandbox:
    """Runs programs against compiled tests; thread-safe, restarted after a fork or a crash."""

    def __init__(self, isolation_mode: str = "bwrap", memory_mb: int = 256, workers: int | None = None):
        isolation.check(isolation_mode)
        self.isolation, self.memory_mb = isolation_mode, memory_mb
        cores = os.cpu_count() or 1
        # Most programs take well under a millisecond, so the wait for a child to be scheduled
        # dominates: several in flight per core hide it. A program's deadline stretches by the
        # same factor, so it still gets about timeout_s of a core.
        self.workers = workers or _IN_FLIGHT_PER_CORE * cores
        self.stretch = max(1.0, self.workers / cores)
        self._lock = threading.Lock()
        self._proc = self._ctrl = self._err = None
        self._warming: dict[int, tuple[int, socket.socket]] = {}  # fd -> (pid, socket): forked, not ready
        self._idle: collections.deque = collections.deque()  # (pid, socket) of ready children
        self._owed = 0  # children asked for and not yet received
        self.programs_run = 0  # jobs sent, over this sandbox's life (identical programs count once)
        self.templates_lost = 0  # templates that died or stalled under a batch and were replaced
        self.scored_zero_alone = 0  # programs that lost the template while running alone
        self.stall_s = _STARTUP_S  # no child sent for this long while one is needed: the template stalled
        self._owner = -1

    def run(self, programs: list[tuple[str, list[grading.CompiledTest]]], timeout_s: float) -> list[list[bool]]:
        """Per program, which tests passed."""
        with self._lock:
            unique = list(dict.fromkeys((code, tuple(tests)) for code, tests in programs))
            outputs = self._run_all(unique, timeout_s)
            verdicts = {key: _verdicts(key[1], _parse(outputs.get(i, b""))) for i, key in enumerate(unique)}
            return [verdicts[(code, tuple(tests))] for code, tests in programs]

    def _run_all(self, programs, timeout_s: float) -> dict[int, bytes]:
        """Every program's output, whatever happens to the template: the programs a lost
        template interrupted run again alone; one that loses it alone gets no output."""
        queue = collections.deque(i for i, (_, tests) in enumerate(programs) if tests)
        suspects: collections.deque = collections.deque()
        outputs: dict[int, bytes] = {}
        losses_in_a_row = 0
        while queue or suspects:
            alone = bool(suspects)
            batch = [suspects.popleft()] if alone else list(queue)
            if not alone:
                queue.clear()
            done, lost = self._attempt(programs, batch, timeout_s)
            outputs.update(done)
            if lost is None:
                losses_in_a_row = 0
                continue
            in_flight, unstarted = lost
            self.templates_lost += 1
            losses_in_a_row = 0 if done else losses_in_a_row + 1
            self._discard()
            if losses_in_a_row >= _LOSSES_IN_A_ROW:
                raise SandboxError(f"the sandbox's template was lost {losses_in_a_row} times in a row "
                                   "with no program scored: the host cannot run it")
            if alone:
                outputs[batch[0]] = b""
                self.scored_zero_alone += 1
            else:
                suspects.extend(in_flight)
                queue.extend(unstarted)
        return outputs

    def _attempt(self, programs, batch: list[int], timeout_s: float):
        """Run ``batch`` on the current template: (outputs of the programs it finished, None),
        or, once the template is lost, (those outputs, (interrupted, never started))."""
        self._ensure_started()
        jobs = {i: (_job(*programs[i]), len(programs[i][1])) for i in batch}
        todo = collections.deque(i for i in batch if len(jobs[i][0]) <= _MAX_JOB)
        done: dict[int, bytes] = {i: b"" for i in batch if len(jobs[i][0]) > _MAX_JOB}
        inflight: dict[int, _Flight] = {}
        self._unended: list[int] = []  # programs whose child closed without its end mark
        try:
            self._start_polling()
            self._receive_children()
            self._top_up(len(todo))
            while todo or inflight:
                self._send(todo, inflight, jobs, timeout_s)
                self._step(inflight, done)
            if self._unended:  # a child's own crash, or its template's death (then all of them)
                self._ping()
        except _TemplateLost:
            for flight in inflight.values():
                flight.sock.close()
            interrupted = sorted({f.program for f in inflight.values()} | set(self._unended))
            return {i: out for i, out in done.items() if i not in interrupted}, (interrupted, list(todo))
        self._top_up(len(programs))  # forked while the trainer generates the next batch
        return done, None

    def _start_polling(self) -> None:
        poller = self._poller = select.poll()
        poller.register(self._ctrl.fileno(), select.POLLIN)
        for fd in self._warming:
            poller.register(fd, select.POLLIN)
        self._waiting_since = time.monotonic()

    def _send(self, todo, inflight, jobs, timeout_s: float) -> None:
        """Give queued programs to idle children, up to ``workers`` in flight; each may send
        one message per test and its end mark."""
        while todo and len(inflight) < self.workers and self._idle:
            i = todo.popleft()
            pid, sock = self._idle.popleft()
            try:
                sock.send(jobs[i][0])
            except OSError:  # the child died idle: the job goes to the next one
                sock.close()
                todo.appendleft(i)
                self._order(1)
                continue
            self.programs_run += 1
            self._top_up(len(todo))
            deadline = time.monotonic() + timeout_s * self.stretch
            inflight[sock.fileno()] = _Flight(i, pid, deadline, sock, messages_left=jobs[i][1] + 1)
            self._poller.register(sock, select.POLLIN)

    def _step(self, inflight, done) -> None:
        """One poll: take children and results, end programs that finished or ran out of budget."""
        soonest = min((f.deadline for f in inflight.values()), default=time.monotonic() + self.stall_s)
        events = self._poller.poll(max(0, int((soonest - time.monotonic()) * 1000)) + 1)
        if self._idle or inflight or events:
            self._waiting_since = time.monotonic()
        elif time.monotonic() - self._waiting_since > self.stall_s:
            raise _TemplateLost(f"no child in {self.stall_s:.0f} s")
        for fd, _ in sorted(events, key=lambda e: e[0] != self._ctrl.fileno()):
            if fd == self._ctrl.fileno():
                self._receive_children()
            elif fd in self._warming:
                self._ready(fd)
            elif fd in inflight:
                state = _drain(inflight[fd])
                if state == "closed":
                    self._unended.append(inflight[fd].program)
                if state != "open":
                    self._finish(inflight, fd, done, kill=state == "over budget")
        now = time.monotonic()
        for fd in [fd for fd, f in inflight.items() if f.deadline <= now]:
            _drain(inflight[fd])  # what reached the socket while this process was not looking counts
            self._finish(inflight, fd, done, kill=True)

    def _ping(self) -> None:
        """Return once the template answers; _TemplateLost if it died or does not answer."""
        self._pong = False
        self._ctrl.send(b"P")
        deadline = time.monotonic() + self.stall_s
        while not self._pong:
            if time.monotonic() > deadline:
                raise _TemplateLost(f"no answer in {self.stall_s:.0f} s")
            for fd, _ in self._poller.poll(100):
                if fd == self._ctrl.fileno():
                    self._receive_children()
                elif fd in self._warming:
                    self._ready(fd)

    def _finish(self, inflight, fd: int, done: dict, kill: bool) -> None:
        flight = inflight.pop(fd)
        done[flight.program] = bytes(flight.output)
        self._poller.unregister(fd)
        flight.sock.close()
        if kill:
            self._ctrl.send(b"K%d" % flight.pid)

    def _top_up(self, wanted: int) -> None:
        """Keep up to ``wanted`` children (at most _MAX_POOL) forked or on their way."""
        self._order(min(wanted, _MAX_POOL) - len(self._idle) - len(self._warming) - self._owed)

    def _order(self, n: int) -> None:
        """Ask the template for n more children (it forks them while this process waits)."""
        if n > 0:
            try:
                self._ctrl.send(b"N%d" % n)
            except OSError:
                raise _TemplateLost("control socket closed") from None
            self._owed += n

    def _receive_children(self) -> None:
        """Take every child the template has sent; most sent their "R" long ago. The
        template's end of the control socket closes before its children are killed, so
        a closed control socket is the template's death."""
        while True:
            try:
                msg, fds = _recv_fd(self._ctrl)
            except BlockingIOError:
                return
            except OSError:
                msg, fds = b"", []
            if not msg:
                raise _TemplateLost("the template exited")
            if msg == b"P":
                self._pong = True
                continue
            self._owed -= 1
            sock = socket.socket(fileno=fds[0])
            self._warming[sock.fileno()] = (int(msg[1:]), sock)
            if not self._ready(sock.fileno(), wait=False):
                self._poller.register(sock, select.POLLIN)

    def _ready(self, fd: int, wait: bool = True) -> bool:
        """A child's first message is its "R"; anything else (it died) drops it. Without
        ``wait``, a child still warming up stays where it is (False)."""
        pid, sock = self._warming[fd]
        try:
            message = sock.recv(16, 0 if wait else socket.MSG_DONTWAIT)
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
            sock.close()
            self._order(1)
        return True

    def _ensure_started(self) -> None:
        if self._proc is not None and (self._owner != os.getpid() or self._proc.poll() is not None):
            self._forget()
        if self._proc is None:
            self._start()

    def _start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = json.dumps({"memory_mb": self.memory_mb, "cpu_s": 60, "max_job": _MAX_JOB})
        self._err = tempfile.TemporaryFile()
        try:
            self._proc = isolation.popen(self.isolation, child.fileno(), config, self._err)
        finally:
            child.close()
        self._owner = os.getpid()
        ready, _, _ = select.select([parent], [], [], _STARTUP_S)
        msg, fds = _recv_fd(parent) if ready else (b"", [])
        parent.close()
        if msg != b"R" or not fds:
            message = self._stderr()
            self._discard()
            raise SandboxError(f"the {self.isolation} sandbox did not start:\n{message}")
        self._ctrl = socket.socket(fileno=fds[0])

    def _stderr(self) -> str:
        if self._err is None:
            return ""
        self._err.seek(0)
        return self._err.read()[-4000:].decode(errors="replace")

    def _forget(self) -> None:
        """Drop a template that died, or one inherited through fork: that one belongs to the
        parent process, so only this process's copies of the sockets are closed."""
        if self._owner == os.getpid():
            self.close()
        self._drop_children()
        if self._ctrl is not None:
            self._ctrl.close()
        self._proc = self._ctrl = self._err = None
        self._owed = 0

    def _discard(self) -> None:
        """Kill this process's template now (it may be stopped, so asking it to exit is not
        enough) and forget it; the next batch starts a fresh one."""
        if self._proc is not None and self._owner == os.getpid():
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # bwrap and, with it, the namespace
            except ProcessLookupError:
                pass
        self._forget()

    def _drop_children(self) -> None:
        for _, sock in [*self._idle, *self._warming.values()]:
            sock.close()
        self._idle.clear()
        self._warming.clear()

    def close(self) -> None:
        """Stop the template; the namespace (and every child in it) goes with it."""
        self._drop_children()
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
        self._proc = self._ctrl = self._err = None
        self._owed = 0


def _job(code: str, tests) -> bytes:
    return json.dumps({"code": code, "tests": [[t.setup, list(t.holes)] for t in tests]}).encode()


def _drain(flight: _Flight) -> str:
    """Append every message waiting on the flight's socket. "open": it may send more;
    "ended": it sent its end mark; "closed": it closed the socket without one; "over budget":
    it sent more messages or bytes than its tests allow. A candidate sending the mark early
    only cuts its own tests short."""
    while True:
        try:
            message = flight.sock.recv(_MAX_OUTPUT, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return "open"
        except OSError:
            return "closed"
        if not message:
            return "closed"
        if message == _END:
            return "ended"
        flight.messages_left -= 1
        if flight.messages_left < 1 or len(flight.output) + len(message) > _MAX_OUTPUT:
            return "over budget"
        flight.output += message + b"\n"


def _recv_fd(sock: socket.socket) -> tuple[bytes, list[int]]:
    """One message and the descriptors it carries, without waiting (socket.recv_fds of
    Python 3.11 ignores its flags argument, so it would block)."""
    msg, ancillary, _, _ = sock.recvmsg(64, socket.CMSG_LEN(array.array("i").itemsize), socket.MSG_DONTWAIT)
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return msg, list(fds)


def _parse(output: bytes) -> dict[int, list | None]:
    """Result messages -> {test index: raw values}; the first message per test counts."""
    out: dict[int, list | None] = {}
    for line in output.split(b"\n"):
        try:
            index, values = grading.parse_line(line)
        except (ValueError, RecursionError):
            continue
        out.setdefault(index, values)
    return out


def _verdicts(tests: tuple[grading.CompiledTest, ...], lines: dict) -> list[bool]:
    return [index in lines and grading.judge(test, lines[index]) for index, test in enumerate(tests)]
