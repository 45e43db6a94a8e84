"""Template of the scoring worker: ``python -I -B _template.py CTRL_FD CONFIG_JSON``.

Runs inside the sandbox (``launch.py``) with the scorer libraries imported once
(``_scorers.py``: reasoning-gym, sympy, math-verify), then forks one locked-down child per
answer. On CTRL_FD it sends ``R`` with a control socket only this process holds; over it the
parent sends

    N<k>            fork k more children; each is sent back as ``C<pid>`` with one end of a
                    stream socket whose other end the child holds (SCM_RIGHTS)
    K<pid>          kill that child and reap it; answered ``X<pid>`` once it is gone
    P               answered ``P`` (alive)
    D<pickle>       prepare a scorer (build a dataset, import a module) so the children forked
                    after it inherit it; answered ``d1`` or ``d0<error>``

A child, before it may receive an answer: closes every inherited descriptor but its socket,
points stdio at /dev/null, sets hard rlimits (address space, CPU, no file writes, no
processes), makes itself undumpable, drops every capability and installs the seccomp
allowlist. It then sends ``R``, reads one job (an 8-byte length and a pickle written by the
trainer), scores it and writes one float as ASCII, and exits. No answer ever runs in a process
that scored another, so nothing one answer does can change another's score.
"""

import gc
import json
import mmap
import os
import pickle
import resource
import select
import signal
import socket
import sys

_CONFIG = json.loads(sys.argv[2])
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), _CONFIG["seccomp_dir"]]
import _scorers  # noqa: E402  (the scorer libraries, imported before any fork)
import _seccomp  # noqa: E402

_NOFILE = 64
_HEADER = 8


def _address_space():
    """Bytes of address space this process maps now (there is no /proc to read it from):
    the smallest soft RLIMIT_AS under which a 64 KB mapping still fits, by bisection."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    low, high = 0, 1 << 44
    while high - low > 1 << 20:
        middle = (low + high) // 2
        try:
            resource.setrlimit(resource.RLIMIT_AS, (middle, hard))
            mmap.mmap(-1, 1 << 16).close()
            high = middle
        except (OSError, MemoryError, ValueError):
            low = middle
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return high


def _lock_down(keep, cfg, seccomp):
    seccomp.confine(keep, _address_space() + (cfg["memory_mb"] << 20), cfg["cpu_s"], _NOFILE)
    seccomp.install()


def _read_job(sock, max_job):
    """The job's bytes, or None when the parent closed the socket or broke the framing."""
    data = bytearray()
    size = None
    while size is None or len(data) < _HEADER + size:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return None
        data += chunk
        if size is None and len(data) >= _HEADER:
            size = int.from_bytes(data[:_HEADER], "big")
            if size > max_job:
                return None
    return bytes(data[_HEADER:_HEADER + size])


def _child(sock, cfg, seccomp):
    """Lock down, score one job from ``sock``, answer on it, exit. Never returns."""
    keep = sock.fileno()
    _lock_down(keep, cfg, seccomp)
    os.write(keep, b"R")
    job = _read_job(sock, cfg["max_job"])
    if job is not None:
        value = _scorers.run(pickle.loads(job))
        os.write(keep, repr(value).encode())
    os._exit(0)


def _spawn(ctrl, cfg, seccomp):
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            mine.close()
            ctrl.close()
            _child(theirs, cfg, seccomp)
        finally:
            os._exit(0)
    theirs.close()
    socket.send_fds(ctrl, [b"C%d" % pid], [mine.fileno()])
    mine.close()


def _kill(pid):
    """SIGKILL one child and wait until it is gone. Children are reaped here only, so a
    pid the parent names is never one the kernel gave to a newer child."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _prepare(message):
    try:
        _scorers.prepare(*pickle.loads(message))
    except Exception as e:  # reported to the parent, which refuses to score without it
        return b"d0" + f"{type(e).__name__}: {e}".encode()[:2000]
    gc.freeze()
    return b"d1"


def main():
    boot = socket.socket(fileno=int(sys.argv[1]))
    ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    seccomp = _seccomp.Filter()
    seccomp.die_with_parent()
    seccomp.undumpable()
    _scorers.warm_up()
    gc.freeze()  # the collector would otherwise touch (and so copy) every inherited object
    owed = 0
    poller = select.poll()
    poller.register(ctrl.fileno(), select.POLLIN)
    socket.send_fds(boot, [b"R"], [theirs.fileno()])
    theirs.close()
    boot.close()
    while True:
        if poller.poll(None if owed == 0 else 0):
            msg = ctrl.recv(_CONFIG["max_prepare"])
            if not msg:
                break
            kind = msg[:1]
            if kind == b"N":
                owed += int(msg[1:])
            elif kind == b"K":
                _kill(int(msg[1:]))
                ctrl.send(b"X" + msg[1:])
            elif kind == b"D":  # children sent before the answer lack it: the parent drops them
                ctrl.send(_prepare(msg[1:]))
            elif msg == b"P":
                ctrl.send(b"P")
        elif owed:
            _spawn(ctrl, _CONFIG, seccomp)
            owed -= 1
    os.killpg(0, signal.SIGKILL)  # every child is in this process group; so is this process


if __name__ == "__main__":
    main()
