"""How the sandbox's template process is started: inside bubblewrap, or (trusted code only) not.

``bwrap``: new user, pid, network, ipc, uts and cgroup namespaces; uid/gid 65534; all
capabilities dropped; a root file system of read-only binds of the interpreter and the
system libraries only (no home, no project, no /etc); no /proc at all, so no process of the
sandbox (a batch-mate, the template) can be read through /proc/<pid>/mem, fd or environ; a
minimal /dev; a size-capped tmpfs /tmp; an empty environment. bwrap dies with the trainer
(``--die-with-parent``).

``unsafe-local``: the same template, seccomp filter, rlimits and dropped capabilities, without
the namespaces: the candidate can read any file the trainer's user can and list every process
in /proc (the sandbox's own processes are not dumpable, so their memory and descriptors stay
closed to it). For code you trust.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

ISOLATIONS = ("bwrap", "unsafe-local")
_SANDBOX_UID = "65534"
_TMPFS_BYTES = 64 << 20
_INSTALL_HINT = (
    "the code task runs model-written programs inside bubblewrap, which is not installed. "
    "Install it (Debian/Ubuntu: `apt-get install bubblewrap`; Fedora/RHEL: `dnf install bubblewrap`; "
    "Arch: `pacman -S bubblewrap`), or, for trusted code only, set `sandbox: unsafe-local` in the "
    "run config (`--set sandbox=unsafe-local`)")


class SandboxError(RuntimeError):
    """The sandbox itself is broken or cannot start (never a verdict on a program)."""


class UnsafeSandboxWarning(UserWarning):
    """Model-written code runs without OS-level isolation."""


def check(isolation: str) -> None:
    """Fail now, with the fix, if ``isolation`` cannot run here; warn for unsafe-local."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"unknown sandbox {isolation!r}; known: {', '.join(ISOLATIONS)}")
    if isolation == "unsafe-local":
        warnings.warn("sandbox: unsafe-local runs model-written code without namespaces: it can read "
                      "your files and environment. Use it for trusted code only.", UnsafeSandboxWarning,
                      stacklevel=3)
    elif shutil.which("bwrap") is None:
        raise SandboxError(_INSTALL_HINT)


def _binds() -> list[str]:
    """Read-only binds: system library folders and the interpreter's own prefix (a venv's
    python is a symlink into it), plus this package folder for the template script."""
    here = str(Path(__file__).resolve().parent)
    python = Path(os.path.realpath(sys.executable))
    paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin",
             os.path.realpath(sys.base_prefix), str(python.parent.parent), here]
    args: list[str] = []
    for path in dict.fromkeys(paths):
        args += ["--ro-bind-try", path, path]
    return args


def command(isolation: str, ctrl_fd: int, config: str) -> tuple[list[str], dict, str | None]:
    """(argv, environment, working directory) that start the template process."""
    python = os.path.realpath(sys.executable)
    template = str(Path(__file__).resolve().with_name("_zygote.py"))
    inner = [python, "-I", "-S", "-B", template, str(ctrl_fd), config]
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    if isolation == "unsafe-local":
        return inner, env, None
    wrap = ["bwrap", "--unshare-all", "--uid", _SANDBOX_UID, "--gid", _SANDBOX_UID,
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
            "--setenv", "LC_ALL", "C.UTF-8", "--setenv", "HOME", "/tmp",
            # the tmpfs first: a bind under /tmp (a checkout or venv there) is mounted on top of it
            "--size", str(_TMPFS_BYTES), "--tmpfs", "/tmp", *_binds(),
            "--dev", "/dev", "--chdir", "/tmp", "--"]
    return wrap + inner, env, None


def popen(isolation: str, ctrl_fd: int, config: str, stderr) -> subprocess.Popen:
    argv, env, cwd = command(isolation, ctrl_fd, config)
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                            pass_fds=(ctrl_fd,), env=env, cwd=cwd or "/", start_new_session=True)
