"""Parent side of the sandbox: one template process per trainer, a fresh child per program.

The template forks locked-down children ahead of need and hands this process one end of
each child's socket; a program is one message to an idle child, its results are messages
back until the child closes. Each program's deadline is fixed when its job is sent (no
byte stream extends it): ``timeout_s`` times the programs in flight per core; when it passes,
the template kills the child. At most ``workers`` programs run at once; identical (code,
tests) pairs, common within a GRPO group, run once.
"""

from __future__ import annotations

import array
import collections
import json
import os
import select
import socket
import tempfile
import threading
import time

from grpo_lab.rewards.sandbox import grading, isolation
from grpo_lab.rewards.sandbox.isolation import SandboxError

_STARTUP_S = 20.0  # an interpreter start under load can take seconds
_MAX_OUTPUT = 1 << 20  # bytes of results one program may send
_MAX_JOB = 1 << 17  # a longer program scores 0 without running (one socket message)
_IN_FLIGHT_PER_CORE = 4
_END = b"E"  # a child's last message
_MAX_POOL = 256  # idle children kept ready: about 1.5 MB of private memory each


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
        self._owner = -1

    def run(self, programs: list[tuple[str, list[grading.CompiledTest]]], timeout_s: float) -> list[list[bool]]:
        """Per program, which tests passed."""
        with self._lock:
            unique = list(dict.fromkeys((code, tuple(tests)) for code, tests in programs))
            try:
                results = self._run_unique(unique, timeout_s)
            except SandboxError:  # the template died (OOM killer, a signal): one fresh start
                self._forget()
                results = self._run_unique(unique, timeout_s)
            verdicts = dict(zip(unique, results))
            return [verdicts[(code, tuple(tests))] for code, tests in programs]

    def _run_unique(self, programs, timeout_s: float) -> list[list[bool]]:
        self._ensure_started()
        jobs = {i: _job(code, tests) for i, (code, tests) in enumerate(programs) if tests}
        todo = collections.deque(i for i, job in jobs.items() if len(job) <= _MAX_JOB)
        self._top_up(len(todo))
        outputs: dict[int, bytearray] = {}
        inflight: dict[int, tuple[int, int, float, socket.socket]] = {}  # fd -> (program, pid, deadline, sock)
        poller = self._poller = select.poll()
        poller.register(self._ctrl.fileno(), select.POLLIN)
        for fd in self._warming:
            poller.register(fd, select.POLLIN)
        self._receive_children()
        while todo or inflight:
            while todo and len(inflight) < self.workers and self._idle:
                i = todo.popleft()
                pid, sock = self._idle.popleft()
                try:
                    sock.send(jobs[i])
                except OSError:  # the child died idle: the job goes to the next one
                    sock.close()
                    todo.appendleft(i)
                    self._order(1)
                    continue
                outputs[i] = bytearray()
                self.programs_run += 1
                self._top_up(len(todo))
                inflight[sock.fileno()] = (i, pid, time.monotonic() + timeout_s * self.stretch, sock)
                poller.register(sock, select.POLLIN)
            soonest = min((d for _, _, d, _ in inflight.values()), default=time.monotonic() + _STARTUP_S)
            events = poller.poll(max(0, int((soonest - time.monotonic()) * 1000)) + 1)
            if not events and not inflight and not self._idle:
                raise SandboxError(f"the sandbox's template sent no child in {_STARTUP_S:.0f} s:\n{self._stderr()}")
            for fd, _ in events:
                if fd == self._ctrl.fileno():
                    self._receive_children()
                    continue
                if fd in self._warming:
                    self._ready(fd)
                    continue
                i, pid, _, sock = inflight[fd]
                if not _drain(sock, outputs[i]):
                    self._finish(fd, inflight, poller, kill=False)
            now = time.monotonic()
            for fd in [fd for fd, (_, _, d, _) in inflight.items() if d <= now]:
                self._finish(fd, inflight, poller, kill=True, outputs=outputs)
        self._top_up(len(programs))  # forked while the trainer generates the next batch
        return [_verdicts(tests, _parse(outputs.get(i, b""))) for i, (_, tests) in enumerate(programs)]

    def _finish(self, fd, inflight, poller, kill: bool, outputs=None) -> None:
        i, pid, _, sock = inflight.pop(fd)
        if kill:  # what reached the socket while this process was not looking still counts
            _drain(sock, outputs[i])
        poller.unregister(fd)
        sock.close()
        if kill:
            self._ctrl.send(b"K%d" % pid)

    def _top_up(self, wanted: int) -> None:
        """Keep up to ``wanted`` children (at most _MAX_POOL) forked or on their way."""
        self._order(min(wanted, _MAX_POOL) - len(self._idle) - len(self._warming) - self._owed)

    def _order(self, n: int) -> None:
        """Ask the template for n more children (it forks them while this process waits)."""
        if n > 0:
            self._ctrl.send(b"N%d" % n)
            self._owed += n

    def _receive_children(self) -> None:
        """Take every child the template has sent; most sent their "R" long ago."""
        while True:
            try:
                msg, fds = _recv_fd(self._ctrl)
            except BlockingIOError:
                return
            except OSError:
                msg, fds = b"", []
            if not msg:
                raise SandboxError(f"the sandbox's template process exited:\n{self._stderr()}")
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
        self._ctrl, self._owner = parent, os.getpid()
        ready, _, _ = select.select([parent], [], [], _STARTUP_S)
        if not ready or parent.recv(1) != b"R":
            message = self._stderr()
            self.close()
            raise SandboxError(f"the {self.isolation} sandbox did not start:\n{message}")

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


def _drain(sock: socket.socket, output: bytearray) -> bool:
    """Append every message waiting on ``sock``; False once the child is done (its end mark,
    or it closed the socket) or sent too much. A candidate sending the mark early only cuts
    its own tests short."""
    while True:
        try:
            message = sock.recv(_MAX_OUTPUT, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not message or message == _END:
            return False
        output += message[: max(0, _MAX_OUTPUT - len(output))] + b"\n"
        if len(output) >= _MAX_OUTPUT:
            return False


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
