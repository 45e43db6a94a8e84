"""Parent side of the sandbox: one template process per trainer, a fresh child per program.

The template (``template.py``) forks locked-down children ahead of need and hands this
process one end of each child's socket; a program is one message to an idle child, its
results are messages back until the child sends its end mark or closes. What a program
costs this process is bounded by the program's own budget: its deadline is fixed when its
job is sent (``timeout_s`` times the programs in flight per core; no byte stream extends
it), it may send one message per test plus its end mark and at most ``wire.MAX_OUTPUT``
bytes, and its child's CPU time is capped a second past that deadline (RLIMIT_CPU).
At most ``workers`` programs run at once; identical (code, tests) pairs, common within a
GRPO group, run once.

No program outlives its verdict: whatever ended its conversation (end mark, closed socket,
deadline, budget), its child is killed, and ``run`` returns only once the template has
reported every such child reaped. Where the sandbox has a cgroup, a batch that leaves any
process in it beyond the template and the idle children ends the template and everything
in its cgroup (``strays`` counts them).

Scoring never fails because of a program: if the template dies or stalls (the OOM killer, a
signal from outside), it is replaced, the programs that were in flight run again one at a
time, and one that loses the template while running alone scores 0. Only a template that
cannot start at all raises ``SandboxError``.
"""

from __future__ import annotations

import collections
import os
import select
import socket
import time

from grpo_lab.rewards.sandbox import cgroup, grading, isolation, recovery, wire
from grpo_lab.rewards.sandbox.isolation import SandboxError
from grpo_lab.rewards.sandbox.template import STARTUP_S, Template, TemplateLost

_IN_FLIGHT_PER_CORE = 4
_MAX_POOL = 256  # idle children kept ready: about 1.5 MB of private memory each
_CHILD_BYTES = 8 << 20  # what the cgroup allows an idle child (about 1.5 MB)
_TEMPLATE_BYTES = 512 << 20  # bwrap and the template (about 30 MB)
# Kills go to the template in batches (a workers' worth, or after this long): an honest child
# exits by itself after its end mark, and one that does not spins at most this much longer.
_KILL_BATCH_S = 0.005


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
        self.limits = cgroup.Limits(pids=2 * (self.workers + _MAX_POOL) + 16,
                                    memory_bytes=(self.workers * memory_mb << 20) + _MAX_POOL * _CHILD_BYTES
                                    + _TEMPLATE_BYTES)
        self._lock = recovery.ForkSafeLock()
        self._template: Template | None = None
        self._warming: dict[int, tuple[int, int, socket.socket]] = {}  # fd -> (pid, cpu_s, socket): not ready
        self._idle: collections.deque = collections.deque()  # (pid, cpu_s, socket) of ready children
        self._owed = 0  # children asked for and not yet received
        self._cpu_s = 0  # RLIMIT_CPU of the children this batch uses
        self._dying: dict[int, tuple[int | None, bool]] = {}  # pid -> (program, ended) until reaped
        self._flying: set[int] = set()  # pids of the children running a program
        self._dead: set[int] = set()  # of those, the ones reported reaped before their verdict was taken
        self._kills: list[int] = []  # children to kill, sent in batches
        self._kills_since = 0.0
        self.programs_run = 0  # jobs sent, over this sandbox's life (identical programs count once)
        self.templates_lost = 0  # templates that died or stalled under a batch and were replaced
        self.scored_zero_alone = 0  # programs that lost the template while running alone
        self.strays = 0  # batches after which the cgroup held a process no child accounts for
        self.stall_s = STARTUP_S  # no child sent for this long while one is needed: the template stalled

    @property
    def _proc(self):
        """The template's bwrap (or template) process, for tests that act on it from outside."""
        return self._template.proc if self._template is not None else None

    @property
    def group(self) -> cgroup.Cgroup | None:
        """The running template's cgroup (None before the first batch or without cgroups)."""
        return self._template.group if self._template is not None else None

    def run(self, programs: list[tuple[str, list[grading.CompiledTest]]], timeout_s: float) -> list[list[bool]]:
        """Per program, which tests passed."""
        with self._lock:
            unique = list(dict.fromkeys((code, tuple(tests)) for code, tests in programs))
            outputs = self._run_all(unique, timeout_s)
            verdicts = {key: grading.verdicts(key[1], outputs.get(i, b"")) for i, key in enumerate(unique)}
            return [verdicts[(code, tuple(tests))] for code, tests in programs]

    def _run_all(self, programs, timeout_s: float) -> dict[int, bytes]:
        """Every program's output, whatever happens to the template (``recovery.run_all``)."""
        def fail(losses: int) -> SandboxError:
            return SandboxError(f"the sandbox's template was lost {losses} times in a row "
                                "with no program scored: the host cannot run it")

        return recovery.run_all(self, (i for i, (_, tests) in enumerate(programs) if tests),
                                lambda batch: self._attempt(programs, batch, timeout_s), fail, b"")

    def _attempt(self, programs, batch: list[int], timeout_s: float):
        """Run ``batch`` on the current template: (outputs of the programs it finished, None),
        or, once the template is lost, (those outputs, (interrupted, never started))."""
        self._ensure_started()
        self._cpu_s = wire.cpu_limit(timeout_s, self.stretch)
        jobs = {i: (wire.job(*programs[i]), len(programs[i][1])) for i in batch}
        todo = collections.deque(i for i in batch if len(jobs[i][0]) <= wire.MAX_JOB)
        done: dict[int, bytes] = {i: b"" for i in batch if len(jobs[i][0]) > wire.MAX_JOB}
        inflight: dict[int, wire.Flight] = {}
        try:
            self._start_polling()
            self._receive_children()
            for child in [c for c in self._idle if c[1] != self._cpu_s]:  # forked for another timeout
                self._idle.remove(child)
                self._let_go(child[0], child[2])
            self._top_up(len(todo))
            while todo or inflight:
                self._send(todo, inflight, jobs, timeout_s)
                self._step(inflight, done)
            self._await_deaths()
        except TemplateLost:
            for flight in inflight.values():
                flight.sock.close()
            # a program whose child closed without its end mark may have lost the template
            unconfirmed = {program for program, ended in self._dying.values() if program is not None and not ended}
            interrupted = sorted({f.program for f in inflight.values()} | unconfirmed)
            return {i: out for i, out in done.items() if i not in interrupted}, (interrupted, list(todo))
        if self._template.strays(len(self._idle) + len(self._warming) + self._owed) > 0:
            self.strays += 1
            self._discard()  # every process in its cgroup goes with it
        else:
            self._top_up(len(programs))  # forked while the trainer generates the next batch
        return done, None

    def _start_polling(self) -> None:
        poller = self._poller = select.poll()
        poller.register(self._template.ctrl.fileno(), select.POLLIN)
        for fd in self._warming:
            poller.register(fd, select.POLLIN)
        self._waiting_since = time.monotonic()

    def _send(self, todo, inflight, jobs, timeout_s: float) -> None:
        """Give queued programs to idle children, up to ``workers`` in flight; each may send
        one message per test and its end mark."""
        while todo and len(inflight) < self.workers and self._idle:
            i = todo.popleft()
            pid, _, sock = self._idle.popleft()
            try:
                sock.send(jobs[i][0])
            except OSError:  # the child died idle: the job goes to the next one
                self._let_go(pid, sock)
                todo.appendleft(i)
                self._order(1)
                continue
            self.programs_run += 1
            self._flying.add(pid)
            self._top_up(len(todo))
            deadline = time.monotonic() + timeout_s * self.stretch
            inflight[sock.fileno()] = wire.Flight(i, pid, deadline, sock, messages_left=jobs[i][1] + 1)
            self._poller.register(sock, select.POLLIN)

    def _step(self, inflight, done) -> None:
        """One poll: take children and results, end programs that finished or ran out of budget."""
        soonest = min((f.deadline for f in inflight.values()), default=time.monotonic() + self.stall_s)
        if self._kills:
            soonest = min(soonest, self._kills_since + _KILL_BATCH_S)
        events = self._poller.poll(max(0, int((soonest - time.monotonic()) * 1000)) + 1)
        if self._idle or inflight or events:
            self._waiting_since = time.monotonic()
        elif time.monotonic() - self._waiting_since > self.stall_s:
            raise TemplateLost(f"no child in {self.stall_s:.0f} s")
        ctrl = self._template.ctrl.fileno()
        for fd, _ in sorted(events, key=lambda e: e[0] != ctrl):
            if fd == ctrl:
                self._receive_children()
            elif fd in self._warming:
                self._ready(fd)
            elif fd in inflight:
                state = wire.drain(inflight[fd])
                if state != "open":
                    self._finish(inflight, fd, done, ended=state != "closed")
        now = time.monotonic()
        for fd in [fd for fd, f in inflight.items() if f.deadline <= now]:
            wire.drain(inflight[fd])  # what reached the socket while this process was not looking counts
            self._finish(inflight, fd, done, ended=True)
        self._send_kills()

    def _finish(self, inflight, fd: int, done: dict, ended: bool) -> None:
        """The program's verdict is in: keep its output, kill its child. ``ended``: the output
        is final whatever happens to the template (its end mark, its deadline or budget)."""
        flight = inflight.pop(fd)
        done[flight.program] = bytes(flight.output)
        self._poller.unregister(fd)
        self._flying.discard(flight.pid)
        self._let_go(flight.pid, flight.sock, flight.program, ended)

    def _let_go(self, pid: int, sock: socket.socket, program: int | None = None, ended: bool = True) -> None:
        """Close a child's socket and have it killed; its death is awaited before ``run`` returns."""
        sock.close()
        if pid in self._dead:
            self._dead.discard(pid)
        else:
            self._dying[pid] = (program, ended)
            if not self._kills:
                self._kills_since = time.monotonic()
            self._kills.append(pid)

    def _send_kills(self, now: bool = False) -> None:
        if self._kills and (now or len(self._kills) >= self.workers
                            or time.monotonic() - self._kills_since >= _KILL_BATCH_S):
            self._template.send(wire.kill(self._kills))
            self._kills.clear()

    def _await_deaths(self) -> None:
        """Return once the template has reaped every child this batch let go."""
        self._send_kills(now=True)
        deadline = time.monotonic() + self.stall_s
        ctrl = self._template.ctrl.fileno()
        while self._dying:
            if time.monotonic() > deadline:
                raise TemplateLost(f"{len(self._dying)} children not reaped in {self.stall_s:.0f} s")
            for fd, _ in self._poller.poll(100):
                if fd == ctrl:
                    self._receive_children()
                elif fd in self._warming:
                    self._ready(fd)

    def _top_up(self, wanted: int) -> None:
        """Keep up to ``wanted`` children (at most _MAX_POOL) forked or on their way."""
        self._order(min(wanted, _MAX_POOL) - len(self._idle) - len(self._warming) - self._owed)

    def _order(self, n: int) -> None:
        """Ask the template for n more children (it forks them while this process waits)."""
        if n > 0:
            self._template.send(wire.order(n, self._cpu_s))
            self._owed += n

    def _receive_children(self) -> None:
        """Take every child the template has sent and every death it reported. The template's
        end of the control socket closes before its children are killed, so a closed control
        socket is the template's death."""
        while True:
            try:
                msg, fds = wire.recv_fd(self._template.ctrl)
            except BlockingIOError:
                return
            except OSError:
                msg, fds = b"", []
            if not msg:
                raise TemplateLost("the template exited")
            if msg[:1] == b"D":
                self._reaped(wire.pids(msg[1:]))
                continue
            self._owed -= 1
            sock = socket.socket(fileno=fds[0])
            pid, cpu_s = map(int, msg[1:].split())
            self._warming[sock.fileno()] = (pid, cpu_s, sock)
            if not self._ready(sock.fileno(), wait=False):
                self._poller.register(sock, select.POLLIN)

    def _reaped(self, pids: list[int]) -> None:
        """The template reaped these children: a death awaited, a running program's end (its
        verdict comes from its socket), or an idle child lost (the OOM killer), dropped now so
        that no pid the kernel may reuse lingers here."""
        for pid in pids:
            if self._dying.pop(pid, None) is not None:
                continue
            if pid in self._flying:
                self._dead.add(pid)
                continue
            for child in [c for c in self._idle if c[0] == pid]:
                self._idle.remove(child)
                child[2].close()
            for fd in [fd for fd, c in self._warming.items() if c[0] == pid]:
                self._poller.unregister(fd)  # registered while warming (a closed one would poll as POLLNVAL)
                self._warming.pop(fd)[2].close()

    def _ready(self, fd: int, wait: bool = True) -> bool:
        """A child's first message is its "R"; anything else (it died) drops it, as does a
        CPU limit for another timeout. Without ``wait``, a child still warming up stays where
        it is (False)."""
        pid, cpu_s, sock = self._warming[fd]
        try:
            message = sock.recv(16, 0 if wait else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            message = b""
        del self._warming[fd]
        if wait:
            self._poller.unregister(fd)
        if message == b"R" and cpu_s == self._cpu_s:
            self._idle.append((pid, cpu_s, sock))
        else:
            self._let_go(pid, sock)
            self._order(1)
        return True

    def _ensure_started(self) -> None:
        if self._template is not None and not self._template.running():
            self._drop(kill=True)
        if self._template is None:
            self._template = Template(self.isolation, self.memory_mb, self.limits)

    def _discard(self) -> None:
        """Kill this process's template and everything in its cgroup now; the next batch
        starts a fresh one."""
        self._drop(kill=True)

    def _drop(self, kill: bool) -> None:
        """Forget the template and its children (killing or closing it if this process owns
        it; a template inherited through fork belongs to the parent process)."""
        for _, _, sock in [*self._idle, *self._warming.values()]:
            sock.close()
        self._idle.clear()
        self._warming.clear()
        self._dying.clear()
        self._flying.clear()
        self._dead.clear()
        self._kills.clear()
        self._owed = 0
        if self._template is not None and kill:
            self._template.kill()
        elif self._template is not None:
            self._template.close()
        self._template = None

    def close(self) -> None:
        """Stop the template; the namespace and the cgroup (every child in them) go with it."""
        self._drop(kill=False)
