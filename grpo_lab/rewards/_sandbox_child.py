"""Child side of the sandbox; run as ``python -I -S _sandbox_child.py RESULT_FD``.

Reads ``{"timeout_s", "memory_mb", "cpu_s", "jobs": [[index, code, tests], ...]}`` as JSON
from stdin, locks itself down (resource limits, no network, an audit hook refusing writes
outside its working directory and process control), then runs each job in a fresh globals
dict under a per-job timer.

Progress goes to RESULT_FD, never stdout, so nothing user code prints can be mistaken for
a result. One line per event, ``S i`` (job i started), ``P i k`` (k tests passed so far),
``D i`` (job i done). Streaming lets the parent keep the finished jobs and blame the
running one when this process dies or hangs in C code where the timer cannot interrupt.

Only the standard library may be used here: the script runs without site-packages.
"""

import _thread
import builtins
import json
import os
import resource
import signal
import socket
import sys

# Events refused whatever their arguments: process control, network, deletion, privilege
# and interpreter-escape hatches. Reads stay allowed so user code can import modules.
_DENIED_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "os.kill", "os.killpg", "signal.pthread_kill", "subprocess.Popen", "pty.spawn",
    "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
    "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
    "os.remove", "os.unlink", "os.rmdir", "os.rename", "shutil.rmtree", "shutil.move",
    "os.truncate", "os.chmod", "os.chown", "os.link", "os.symlink", "os.chdir",
    "os.chroot", "os.utime", "os.setxattr", "os.removexattr", "os.putenv", "os.unsetenv",
    "resource.setrlimit", "resource.prlimit", "sys.addaudithook",
    "gc.get_objects", "gc.get_referrers", "gc.get_referents",  # could reach the hook
    "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "ctypes.call_function",
    "mmap.__new__",
})
_DENIED_IMPORTS = frozenset({
    "ctypes", "_ctypes", "subprocess", "_posixsubprocess", "multiprocessing", "pty",
})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC


class _Timeout(BaseException):
    """Raised by the timer; a BaseException so ``except Exception`` in user code misses it."""


_armed = [False]


def _on_alarm(signum, frame):
    # Only while user code runs: a late tick must not break the harness between jobs.
    if _armed[0]:
        raise _Timeout


def _limit(memory_mb: int, cpu_s: int) -> None:
    """Hard limits (soft == hard) so user code cannot raise them back."""
    mem = memory_mb * 1024 * 1024
    for res, value in (
        (resource.RLIMIT_AS, mem),
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_FSIZE, 8 * 1024 * 1024),
        (resource.RLIMIT_NPROC, 0),  # no effect for root; the audit hook covers that case
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 64),
    ):
        resource.setrlimit(res, (value, value))


def _refuse(*args, **kwargs):
    raise PermissionError("disabled in the sandbox")


class _NoNetSocket(socket.socket):
    """socket.socket whose connecting and binding methods always refuse."""

    connect = connect_ex = bind = sendto = _refuse


def _disable_network_and_threads() -> None:
    """Cheap first line; ``_socket`` stays reachable, which the audit hook then covers.

    Threads are refused because one could outlive its program and disturb the next; Python
    3.11 has no audit event for thread start, and RLIMIT_NPROC does not bind root.
    """
    _thread.start_new_thread = _thread.start_new = _refuse
    socket.socket = _NoNetSocket
    for name in ("create_connection", "create_server", "socketpair", "fromfd",
                 "getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
        setattr(socket, name, _refuse)


def _make_audit_hook(root: str):
    """The audit hook that guards the host; ``root`` must be a canonical absolute path.

    Everything the hook relies on is captured here, before user code runs, because user
    code can rebind module attributes and builtins (``os.path.realpath``, ``type``, ...).
    """
    denied, denied_imports, write_flags = _DENIED_EVENTS, _DENIED_IMPORTS, _WRITE_FLAGS
    exact_type, refusal = type, PermissionError
    split, join, startswith, decode = str.split, str.join, str.startswith, bytes.decode

    def may_write(path, absolute_only: bool) -> bool:
        # Only exact str/bytes: a file descriptor could be the result pipe, and a PathLike
        # or str subclass could name one file here and another when the file is opened.
        if exact_type(path) is bytes:
            path = decode(path, "utf-8", "surrogateescape")
        if exact_type(path) is not str or (absolute_only and not startswith(path, "/")):
            return False
        # Lexical resolution is enough: symlink and hard-link creation are refused, so no
        # link inside root can lead out of it, and the working directory cannot change.
        parts: list = []
        for part in split(path if startswith(path, "/") else root + "/" + path, "/"):
            if part == "..":
                parts[-1:] = []
            elif part not in ("", "."):
                parts += [part]
        return startswith("/" + join("/", parts) + "/", root + "/")

    def hook(event: str, args: tuple) -> None:
        if event in denied:
            raise refusal(f"sandbox refuses {event}")
        if event == "import" and split(args[0], ".")[0] in denied_imports:
            raise refusal(f"sandbox refuses importing {args[0]}")
        # os.open reports mode None and may carry a dir_fd the event does not show, so
        # there a relative path cannot be resolved: only absolute paths may be written.
        if event == "open" and args[2] & write_flags and not may_write(args[0], args[1] is None):
            raise refusal("sandbox refuses writing outside its directory")
        if event == "os.mkdir" and not may_write(args[0], False):
            raise refusal("sandbox refuses mkdir outside its directory")

    return hook


def _check(test: str, env: dict) -> bool:
    """One test: a boolean expression must be truthy; a statement (assert) must not raise."""
    try:
        code = compile(test, "<test>", "eval")
    except SyntaxError:
        code = None
    try:
        if code is not None:
            return bool(eval(code, env))
        exec(compile(test, "<test>", "exec"), env)
        return True
    except _Timeout:
        raise
    except BaseException:
        return False


def _run_job(code: str, tests: list, timeout_s: float, report) -> None:
    """Define the program, then run its tests; tests still run if the body raised late, so
    a function defined before a stray failing top-level call earns its credit."""
    env = {"__name__": "__main__", "__builtins__": builtins}
    passed = 0
    _armed[0] = True
    # The repeating tick re-raises if user code swallows the first one with a bare except.
    signal.setitimer(signal.ITIMER_REAL, timeout_s, 0.05)
    try:
        exec(compile(code, "<program>", "exec"), env)
    except _Timeout:
        raise
    except BaseException:
        pass
    for test in tests:
        if _check(test, env):
            passed += 1
            report(passed)


def main() -> None:
    fd = int(sys.argv[1])
    write = os.write
    cfg = json.loads(sys.stdin.buffer.read())
    root = os.getcwd()
    clean_builtins = dict(builtins.__dict__)
    recursion = sys.getrecursionlimit()
    signal.signal(signal.SIGALRM, _on_alarm)
    # Over-long writes then fail with an error in the program instead of killing the child.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _limit(cfg["memory_mb"], cfg["cpu_s"])
    _disable_network_and_threads()
    sys.addaudithook(_make_audit_hook(os.path.realpath(root)))
    for index, code, tests in cfg["jobs"]:
        write(fd, f"S {index}\n".encode())
        try:
            _run_job(code, tests, cfg["timeout_s"], lambda k: write(fd, f"P {index} {k}\n".encode()))
        except _Timeout:
            pass
        finally:
            _armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
        # Undo global damage so one program cannot change how the next one is judged.
        builtins.__dict__.clear()
        builtins.__dict__.update(clean_builtins)
        sys.setrecursionlimit(recursion)
        write(fd, f"D {index}\n".encode())


if __name__ == "__main__":
    main()
