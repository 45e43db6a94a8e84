"""How the scoring worker's template is started: inside bubblewrap, or (trusted setups) not.

``bwrap``: the code sandbox's namespaces (user, pid, network, ipc, uts, cgroup; uid/gid 65534;
no capability; no /proc; a minimal /dev; a size-capped tmpfs /tmp; an empty environment; dies
with the trainer), over a root file system of read-only binds: the system libraries, the
interpreter, the environment's site-packages (the scorers are third-party libraries, so they
must be importable) and this package's folder. Nothing of the host is writable.

``unsafe-local``: the same template, seccomp filter and rlimits, without the namespaces.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

from grpo_lab.rewards.sandbox import isolation as isolation_args
from grpo_lab.rewards.sandbox.isolation import SandboxError
from grpo_lab.rewards.sandbox.isolation import check as isolation_check

_HERE = Path(__file__).resolve().parent
SECCOMP_DIR = str(_HERE.parent / "sandbox")  # _seccomp.py, imported by the template
# One thread per process: a fork copies only the thread that forks, and the seccomp filter
# refuses the clone a thread pool would make.
_ENV = {"LC_ALL": "C.UTF-8", "HOME": "/tmp", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1", "NUMEXPR_NUM_THREADS": "1"}
INSTALL_HINT = (
    "rg:<dataset> tasks and the math-verify verifier score answers in a sandboxed worker that needs "
    "bubblewrap, which is not installed. Install it (Debian/Ubuntu: `apt-get install bubblewrap`; "
    "Fedora/RHEL: `dnf install bubblewrap`; Arch: `pacman -S bubblewrap`), or, for a trusted model "
    "only, set `sandbox: unsafe-local` in the run config (`--set sandbox=unsafe-local`)")


class ScoringError(SandboxError):
    """The scoring worker itself is broken or cannot start (never a verdict on an answer)."""


def check(isolation: str) -> None:
    """Fail now, with the fix, if ``isolation`` cannot run here; warn for unsafe-local."""
    isolation_check(isolation, "sandbox: unsafe-local runs third-party scorers on model answers without "
                    "namespaces: a completion that reaches eval can read your files. Use it for trusted "
                    "models only.", ScoringError(INSTALL_HINT))


def _binds() -> list[str]:
    python = Path(os.path.realpath(sys.executable))
    paths = ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin",
             os.path.realpath(sys.base_prefix), str(python.parent.parent), sys.prefix,
             *site.getsitepackages(), str(_HERE), SECCOMP_DIR]
    args: list[str] = []
    for path in dict.fromkeys(paths):
        args += ["--ro-bind-try", path, path]
    return args


def command(isolation: str, ctrl_fd: int, config: str) -> tuple[list[str], dict]:
    """(argv, environment) that start the template. The interpreter keeps its environment's
    name (a venv's ``bin/python``) so that environment's site-packages are on its path."""
    inner = [sys.executable, "-I", "-B", str(_HERE / "_template.py"), str(ctrl_fd), config]
    if isolation == "unsafe-local":
        return inner, {"PATH": "/usr/bin:/bin", **_ENV}
    return isolation_args.bwrap(_ENV, _binds()) + inner, {"PATH": "/usr/bin:/bin"}


def popen(isolation: str, ctrl_fd: int, config: str, stderr) -> subprocess.Popen:
    argv, env = command(isolation, ctrl_fd, config)
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                            pass_fds=(ctrl_fd,), env=env, cwd="/", start_new_session=True)
