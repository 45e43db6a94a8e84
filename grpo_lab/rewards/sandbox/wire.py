"""What travels between the trainer, the template and the children (see ``_zygote.py``).

Control socket, trainer -> template: ``N<k> <cpu_s>`` (fork k children with RLIMIT_CPU
cpu_s) and ``K<pid>,...`` (kill them). Template -> trainer: ``C<pid> <cpu_s>`` carrying one
end of a new child's socket, and ``D<pid>,...`` for children it has reaped. Child socket,
trainer -> child: one job (``job``); child -> trainer: ``R`` when ready, then one message per
test and the end mark ``E``.
"""

from __future__ import annotations

import array
import json
import math
import socket
from dataclasses import dataclass, field

MAX_OUTPUT = 1 << 18  # bytes of results one program may send
MAX_JOB = 1 << 17  # a longer program scores 0 without running (one socket message)
END = b"E"  # a child's last message


def cpu_limit(timeout_s: float, stretch: float) -> int:
    """RLIMIT_CPU for a child: a second past its wall-clock deadline's worth of CPU."""
    return math.ceil(timeout_s * stretch) + 1


def order(count: int, cpu_s: int) -> bytes:
    return b"N%d %d" % (count, cpu_s)


def kill(pids: list[int]) -> bytes:
    return b"K" + b",".join(b"%d" % pid for pid in pids)


def pids(body: bytes) -> list[int]:
    return [int(p) for p in body.split(b",") if p]


def job(code: str, tests) -> bytes:
    return json.dumps({"code": code, "tests": [[t.setup, list(t.holes)] for t in tests]}).encode()


@dataclass
class Flight:
    """One program running in one child."""

    program: int
    pid: int  # in the sandbox's pid namespace: only the template can act on it
    deadline: float
    sock: socket.socket
    messages_left: int
    output: bytearray = field(default_factory=bytearray)


def drain(flight: Flight) -> str:
    """Append every message waiting on the flight's socket. "open": it may send more;
    "ended": it sent its end mark; "closed": it closed the socket without one; "over budget":
    it sent more messages or bytes than its tests allow. A candidate sending the mark early
    only cuts its own tests short."""
    while True:
        try:
            message = flight.sock.recv(MAX_OUTPUT, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return "open"
        except OSError:
            return "closed"
        if not message:
            return "closed"
        if message == END:
            return "ended"
        flight.messages_left -= 1
        if flight.messages_left < 1 or len(flight.output) + len(message) > MAX_OUTPUT:
            return "over budget"
        flight.output += message + b"\n"


def recv_fd(sock: socket.socket) -> tuple[bytes, list[int]]:
    """One message and the descriptors it carries, without waiting (socket.recv_fds of
    Python 3.11 ignores its flags argument, so it would block)."""
    msg, ancillary, _, _ = sock.recvmsg(1 << 16, socket.CMSG_LEN(array.array("i").itemsize), socket.MSG_DONTWAIT)
    fds = array.array("i")
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return msg, list(fds)
