"""How the sandbox's template process is started: inside bubblewrap, or (trusted code only) not.

``bwrap``: new user, pid, network, ipc, uts and cgroup namespaces; uid/gid 65534; all
capabilities dropped; a root file system of read-only binds of the system libraries and the
interpreter's standard library only (no home, no project, no /etc; no site-packages or
dist-packages of any interpreter, nothing of /usr/local but the interpreter's own standard
library: an installed dataset or a package holding reference solutions stays out of
reach); no /proc at all, so no process of the
sandbox (a batch-mate, the template) can be read through /proc/<pid>/mem, fd or environ; a
minimal /dev; a size-capped tmpfs /tmp; an empty environment. bwrap dies with the trainer
(``--die-with-parent``).

``unsafe-local``: the same template, seccomp filter, rlimits and dropped capabilities, without
the namespaces: the candidate can read any file the trainer's user can and list every process
in /proc (the sandbox's own processes are not dumpable, so their memory and descriptors stay
closed to it). For code you trust.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import sysconfig
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


_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
_PACKAGES = ("site-packages", "dist-packages")
# where system and pip-installed Python packages live beside the system libraries
_SYSTEM_PACKAGES = tuple(f"{root}/python*/{kind}" for root in ("/usr/lib*", "/lib*") for kind in _PACKAGES)


def interpreter_paths() -> tuple[list[str], list[str]]:
    """(what the running interpreter needs to start and import its standard library: the
    stdlib and lib-dynload folders, its binary, its shared libraries; the package folders
    inside those, to hide). Paths of the base installation, never a venv's."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
            "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    paths = sysconfig.get_paths(vars=base)
    folders = [paths["stdlib"], paths["platstdlib"], os.path.dirname(os.__file__),
               sysconfig.get_config_var("DESTSHARED") or ""]
    folders = list(dict.fromkeys(os.path.realpath(f) for f in folders if f and os.path.isdir(f)))
    folders = [f for f in folders if not any(f.startswith(g + "/") for g in folders)]  # one bind holds both
    files = [os.path.realpath(sys.executable)]
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    if libdir and not libdir.startswith(_SYSTEM):  # a shared libpython and what lib-dynload links to
        files += [os.path.realpath(f) for f in sorted(glob.glob(os.path.join(libdir, "lib*.so*")))]
    hidden = [os.path.join(f, kind) for f in folders for kind in _PACKAGES]
    hidden += [paths["purelib"], paths["platlib"]]
    return folders + list(dict.fromkeys(files)), [h for h in dict.fromkeys(hidden) if os.path.isdir(h)]


def _binds() -> list[str]:
    """Read-only binds of the system folders and the interpreter's standard library, with
    every Python package folder of the host hidden under an empty read-only tmpfs (/usr/local
    whole, site- and dist-packages); plus this package folder for the template script."""
    here = str(Path(__file__).resolve().parent)
    shown, inner_hidden = interpreter_paths()
    hidden = [p for p in ["/usr/local", *sorted(set(sum(map(glob.glob, _SYSTEM_PACKAGES), [])))] if os.path.isdir(p)]
    args: list[str] = []
    for path in _SYSTEM:
        args += ["--ro-bind-try", path, path]
    for path in hidden:
        args += ["--tmpfs", path]
    for path in shown:
        args += ["--ro-bind", path, path]
    for path in inner_hidden:
        args += ["--tmpfs", path]
    args += ["--ro-bind", here, here]
    for path in dict.fromkeys(hidden + inner_hidden):  # after the binds made inside them
        args += ["--remount-ro", path]
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


def popen(isolation: str, ctrl_fd: int, config: str, stderr, prefix: list[str] = ()) -> subprocess.Popen:
    """Start the template; ``prefix`` runs first and execs the rest (a cgroup's join)."""
    argv, env, cwd = command(isolation, ctrl_fd, config)
    return subprocess.Popen([*prefix, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                            pass_fds=(ctrl_fd,), env=env, cwd=cwd or "/", start_new_session=True)
