"""Template process of the code sandbox: ``python -I -S _zygote.py CTRL_FD CONFIG_JSON``.

Standard library only (no site-packages). It imports what candidates commonly use, then
forks locked-down children on request. On CTRL_FD it sends ``R`` with a control socket of its
own (only this process holds the other end, so the parent sees its death at once). Over that
socket the parent sends ``N<k> <cpu_s>`` (fork k more, each with RLIMIT_CPU cpu_s) and
``K<pid>,<pid>...`` (kill these: their verdicts are in); for each child this process sends back
``C<pid> <cpu_s>`` with one end of a socket pair whose other end the child holds
(SCM_RIGHTS), and ``D<pid>,<pid>...`` once it has reaped children (it looks every
millisecond while a child it killed is not yet reaped, and at every message), so the parent
knows when a program's process is gone. The parent then talks to the
child directly: no candidate code ever runs here, no job or result passes through this
process, and every program starts in a fresh process that holds nothing of its batch-mates.

A child, before it may receive a job: closes every inherited descriptor but its socket,
points stdio at /dev/null, sets hard rlimits, makes itself undumpable, drops every
capability, installs the seccomp allowlist (``_seccomp.py``: no signal, priority or affinity
call can reach another process) and an audit hook (a second layer). Then it reads one
message ``{"code", "tests": [[setup, holes]]}``, runs the code, and for each test sends one
message ``[t, [value, ...]]`` (tagged JSON, see ``encode``), so a hang in test 3 keeps tests
1 and 2, and then its end mark ``E``.
"""

import builtins
import gc
import json
import os
import select
import signal
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves the script dir out
import _seccomp  # noqa: E402

# Imported once here so a fork starts with them instead of importing under its deadline.
_PRELOAD = ("math", "re", "collections", "itertools", "functools", "heapq", "bisect", "string",
            "operator", "statistics", "fractions", "decimal", "random", "typing", "copy", "cmath")
for _name in _PRELOAD:
    __import__(_name)

_DENIED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "os.kill",
    "os.killpg", "subprocess.Popen", "socket.connect", "socket.bind", "sys.addaudithook",
    "ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function", "sqlite3.connect",
})
_DENIED_IMPORTS = frozenset({"ctypes", "_ctypes", "_xxsubinterpreters", "_posixsubprocess",
                             "readline", "_sqlite3", "_posixshmem", "multiprocessing"})
_NOFILE = 32
_CHILD_NICE = 5
_END = b"E"
_WARM_UP = {"code": "def f(x):\n    return [x, (x, 1.5), {x: {x}}, str(x)]", "tests": [["y = 1", ["f(2)"]]]}


def _audit_hook(event, args, denied=_DENIED_EVENTS, denied_imports=_DENIED_IMPORTS,
                refusal=PermissionError, split=str.split):
    if event in denied or (event == "import" and split(args[0], ".")[0] in denied_imports):
        raise refusal(f"sandbox refuses {event}")


def encode(value, depth=0):
    """Plain values -> JSON-ready data; tuples, sets, dicts... become one-key tagged objects.
    Only exact built-in types: a subclass could carry its own ``__eq__``."""
    kind = type(value)
    if depth > 100:
        raise TypeError("nested too deep")
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if value == value and abs(value) != float("inf") else {"float": repr(value)}
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind in (tuple, set, frozenset):
        items = [encode(v, depth + 1) for v in value]
        return {kind.__name__: items}
    if kind is dict:
        return {"dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is bytes:
        return {"bytes": value.hex()}
    if kind is complex:
        return {"complex": [value.real, value.imag]}
    raise TypeError(f"{kind.__name__} is not plain data")


def _value(hole, env):
    try:
        return encode(eval(hole, env))
    except BaseException as e:  # an error is a failed value, never a crash of the harness
        return {"error": type(e).__name__}


def _write(fd, data):
    while data:
        data = data[os.write(fd, data):]


def _run(job, out):
    env = {"__name__": "__main__", "__builtins__": builtins}
    try:  # the tests still run if the body raised late: its earlier definitions stand
        exec(compile(job["code"], "<program>", "exec"), env)
    except BaseException:
        pass
    for index, (setup, holes) in enumerate(job["tests"]):
        try:
            if setup:
                exec(compile(setup, "<setup>", "exec"), env)
            values = [_value(h, env) for h in holes]
            line = json.dumps([index, values]).encode()
        except BaseException:
            line = json.dumps([index, None]).encode()
        _write(out, line)  # one message per test: a later hang keeps this one


def _child(sock, cfg, seccomp, cpu_s):
    """Lock down, wait for one job on ``sock``, answer on it, exit. Never returns."""
    keep = sock.fileno()
    seccomp.confine(keep, cfg["memory_mb"] << 20, cpu_s, _NOFILE)
    os.nice(_CHILD_NICE)  # when children queue for forks, the template forking them comes first
    seccomp.install()
    sys.addaudithook(_audit_hook)
    # A forked child copies every page it touches (refcounts); one throw-away job now takes
    # those copies while the child waits, instead of under a program's deadline.
    _run(_WARM_UP, 1)
    os.write(keep, b"R")  # ready: the parent starts a program's clock only on a warm child
    job = sock.recv(cfg["max_job"])
    if job:
        _run(json.loads(job), keep)
        os.write(keep, _END)  # the parent stops listening here, not at this process's teardown
    sock.close()
    os._exit(0)


def _spawn(ctrl, cfg, seccomp, cpu_s):
    """Fork one idle child and hand the parent its end of the child's socket: its pid, or
    None when the host has no process or descriptor to spare right now."""
    try:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        mine.close()
        theirs.close()
        return None
    if pid == 0:
        try:
            mine.close()
            ctrl.close()
            _child(theirs, cfg, seccomp, cpu_s)
        finally:
            os._exit(0)
    theirs.close()
    socket.send_fds(ctrl, [b"C%d %d" % (pid, cpu_s)], [mine.fileno()])
    mine.close()
    return pid


def _reap():
    """Pids of the children that have exited since the last call."""
    reaped = []
    while True:
        try:
            pid = os.waitpid(-1, os.WNOHANG)[0]
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped.append(pid)


def _pids(text):
    return [int(p) for p in text.split(b",") if p]


def _timeout_ms(owed, backoff, killed):
    if owed and not backoff:
        return 0  # children to fork: look for messages, then fork one
    if killed:
        return 1  # a killed child is reaped and reported as soon as it is gone
    return 10 if owed else None  # a fork failed: try again shortly; else wait for the parent


def main():
    # The descriptor passed in is also held by bwrap's own processes, so its closing would not
    # show this process's death: the parent gets a control socket only this process holds.
    boot = socket.socket(fileno=int(sys.argv[1]))
    ctrl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    cfg = json.loads(sys.argv[2])
    seccomp = _seccomp.Filter()
    seccomp.die_with_parent()
    seccomp.undumpable()
    gc.freeze()  # the collector would otherwise touch (and so copy) every inherited object
    owed, cpu_s, backoff, live, killed = 0, 1, False, set(), set()
    poller = select.poll()
    poller.register(ctrl.fileno(), select.POLLIN)
    socket.send_fds(boot, [b"R"], [theirs.fileno()])
    theirs.close()
    boot.close()
    while True:
        events = poller.poll(_timeout_ms(owed, backoff, killed))
        for _ in events:
            msg = ctrl.recv(1 << 16)
            if not msg:
                os.killpg(0, signal.SIGKILL)  # every child is in this process group; so is this process
            if msg[:1] == b"N":
                count, cpu_s = map(int, msg[1:].split())
                owed += count
            elif msg[:1] == b"K":
                for pid in _pids(msg[1:]):
                    if pid in live:  # a reaped pid may be reused by a later child
                        os.kill(pid, signal.SIGKILL)
                        killed.add(pid)
        if owed and not events:
            pid = _spawn(ctrl, cfg, seccomp, cpu_s)
            backoff = pid is None  # out of processes or descriptors for now: try again shortly
            if pid is not None:
                live.add(pid)
                owed -= 1
        reaped = _reap()
        if reaped:
            live.difference_update(reaped)
            killed.difference_update(reaped)
            ctrl.send(b"D" + b",".join(b"%d" % pid for pid in reaped))


if __name__ == "__main__":
    main()
