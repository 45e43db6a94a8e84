"""One running template process (``_zygote.py``): its start, its control socket, its cgroup, its end.

The template runs inside bubblewrap (or not: ``unsafe-local``) and, where this machine
allows, in a cgroup of its own (``cgroup.py``) joined before bwrap starts, so that every
process of the sandbox is born inside it. Ending a template kills bwrap's process group and
then everything in the cgroup, and waits until the cgroup is empty.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import tempfile

from grpo_lab.rewards.sandbox import cgroup, isolation, wire
from grpo_lab.rewards.sandbox.isolation import SandboxError

STARTUP_S = 20.0  # an interpreter start under load can take seconds


class TemplateLost(Exception):
    """The template died or stopped answering."""


class Template:
    """A started template, owned by the process that started it (a forked trainer inherits
    the object, never the template: it starts its own)."""

    def __init__(self, mode: str, memory_mb: int, limits: cgroup.Limits):
        self.group = cgroup.create(limits)
        boot, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = json.dumps({"memory_mb": memory_mb, "max_job": wire.MAX_JOB})
        self._err = tempfile.TemporaryFile()
        self.ctrl = None
        try:
            prefix = self.group.join_prefix() if self.group else []
            self.proc = isolation.popen(mode, child.fileno(), config, self._err, prefix)
        except BaseException:
            self._err.close()
            if self.group:
                self.group.remove()
            raise
        finally:
            child.close()
        self.owner = os.getpid()
        ready, _, _ = select.select([boot], [], [], STARTUP_S)
        msg, fds = wire.recv_fd(boot) if ready else (b"", [])
        boot.close()
        if msg != b"R" or not fds:
            message = self._stderr()
            self.kill()
            raise SandboxError(f"the {mode} sandbox did not start:\n{message}")
        self.ctrl = socket.socket(fileno=fds[0])
        self.base = self._settle()

    def _settle(self) -> int:
        """How many processes bwrap and the template are in the cgroup (0 without one);
        drops a cgroup that the template did not end up in."""
        if self.group is None:
            return 0
        listed = self.group.pids()
        if self.proc.pid not in listed:
            cgroup.give_up(self.group, "the sandbox could not join its cgroup")
            self.group = None
            return 0
        return len(listed)

    def send(self, message: bytes) -> None:
        try:
            self.ctrl.send(message)
        except OSError:
            raise TemplateLost("control socket closed") from None

    def owned(self) -> bool:
        return self.owner == os.getpid()

    def running(self) -> bool:
        return self.owned() and self.proc.poll() is None

    def strays(self, children: int) -> int:
        """Processes in the cgroup beyond bwrap, the template and ``children`` (those the
        parent holds, idle or on their way): 0 when every program's process is gone."""
        return 0 if self.group is None else len(self.group.pids()) - self.base - children

    def kill(self) -> None:
        """End it now (it may be stopped, so asking it to exit is not enough): bwrap's group,
        then everything in the cgroup; the zombie is reaped."""
        if self.owned():
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # bwrap and, with it, the namespace
            except ProcessLookupError:
                pass
            self._end_group()
            self.proc.wait()
        self.release()

    def close(self) -> None:
        """Ask it to stop (its end of the control socket closes and it kills its children),
        then make sure nothing of it is left."""
        if self.ctrl is not None:
            self.ctrl.close()
            self.ctrl = None
        if self.owned():
            try:
                self.proc.wait(timeout=5)
            except Exception:
                self.proc.kill()
                self.proc.wait()
            self._end_group()
        self.release()

    def release(self) -> None:
        """Drop this process's handles (a forked process holds copies of the parent's)."""
        if self.ctrl is not None:
            self.ctrl.close()
            self.ctrl = None
        self._err.close()
        self.group = None

    def _end_group(self) -> None:
        if self.group is not None:
            self.group.kill()
            self.group.remove()

    def _stderr(self) -> str:
        self._err.seek(0)
        return self._err.read()[-4000:].decode(errors="replace")
