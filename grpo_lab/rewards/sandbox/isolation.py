"""How the sandbox's template process is started: inside bubblewrap, or (trusted code only) not.

``bwrap``: new user, pid, network, ipc, uts and cgroup namespaces; uid/gid 65534; all
capabilities dropped; a root file system of read-only binds of the interpreter's standard
library, its binary, the shared libraries ``ldd`` finds them linking to and this package's
folder (the template script), and nothing else (no /usr/local, /usr/src, /usr/share, /opt, /srv, home, project or /etc; no site-packages or
dist-packages of any interpreter: an installed dataset, a package holding reference solutions
or a checkout with its venv stays out of reach); no /proc at all, so no process of the
sandbox (a batch-mate, the template) can be read through /proc/<pid>/mem, fd or environ; a
minimal /dev; a size-capped tmpfs /tmp; an empty environment. bwrap dies with the trainer
(``--die-with-parent``).

``unsafe-local``: the same template, seccomp filter, rlimits and dropped capabilities, without
the namespaces: the candidate can read any file the trainer's user can and list every process
in /proc (the sandbox's own processes are not dumpable, so their memory and descriptors stay
closed to it). For code you trust.
"""

from __future__ import annotations

import functools
import glob
import os
import re
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


_UNSAFE_NOTE = ("sandbox: unsafe-local runs model-written code without namespaces: it can read "
                "your files and environment. Use it for trusted code only.")


def check(isolation: str, unsafe_note: str = _UNSAFE_NOTE, missing: Exception | None = None) -> None:
    """Fail now, with the fix, if ``isolation`` cannot run here (``missing``, by default the
    code sandbox's install hint, when bwrap is absent); warn ``unsafe_note`` for unsafe-local."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"unknown sandbox {isolation!r}; known: {', '.join(ISOLATIONS)}")
    if isolation == "unsafe-local":
        warnings.warn(unsafe_note, UnsafeSandboxWarning, stacklevel=3)
    elif shutil.which("bwrap") is None:
        raise missing or SandboxError(_INSTALL_HINT)


_PACKAGES = ("site-packages", "dist-packages")
# merged-/usr systems reach the loader and libraries through these links (/lib64/ld-linux-x86-64.so.2)
_ROOT_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# glibc before 2.35 has no built-in C.UTF-8: the locale the sandbox sets is a data folder
_LOCALES = ("/usr/lib/locale/C.utf8", "/usr/lib/locale/C.UTF-8")


def _needed_libraries(binaries: list[str]) -> list[str]:
    """The shared libraries (loader included) that ``binaries`` link to, as ``ldd`` resolves
    them on this host. Raises SandboxError when ldd cannot be run."""
    if shutil.which("ldd") is None:
        raise SandboxError("the code sandbox binds only the shared libraries the interpreter links to, "
                           "and finds them with `ldd`, which is not installed (glibc's libc-bin package)")
    done = subprocess.run(["ldd", *binaries], capture_output=True, text=True, env={"LC_ALL": "C"})
    found = re.findall(r"^\s+(?:\S+ => )?(/\S+) \(0x", done.stdout, re.MULTILINE)
    return list(dict.fromkeys(found))


def interpreter_paths() -> tuple[list[str], list[str]]:
    """(the folders and file of the running interpreter's own that it needs to start and import
    its standard library: the stdlib and lib-dynload folders, its binary; the package folders
    inside those, to hide). Paths of the base installation, never a venv's."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix,
            "installed_base": sys.base_prefix, "installed_platbase": sys.base_exec_prefix}
    paths = sysconfig.get_paths(vars=base)
    dynload = sysconfig.get_config_var("DESTSHARED") or ""
    folders = [paths["stdlib"], paths["platstdlib"], os.path.dirname(os.__file__), dynload]
    folders = list(dict.fromkeys(os.path.realpath(f) for f in folders if f and os.path.isdir(f)))
    folders = [f for f in folders if not any(f.startswith(g + "/") for g in folders)]  # one bind holds both
    hidden = [os.path.join(f, kind) for f in folders for kind in _PACKAGES]
    hidden += [paths["purelib"], paths["platlib"]]
    return folders + [os.path.realpath(sys.executable)], [h for h in dict.fromkeys(hidden) if os.path.isdir(h)]


@functools.lru_cache(maxsize=None)
def _libraries(python: str, dynload: str) -> tuple[str, ...]:
    """The interpreter's libraries, each at the path the sandbox shows it: the name the loader
    asks for (``libc.so.6``) in its folder with links resolved, where the root links made
    inside (/lib64 -> usr/lib64) lead. Cached: ldd runs once a process."""
    extensions = sorted(glob.glob(os.path.join(dynload, "*.so"))) if dynload else []
    return tuple(os.path.join(os.path.realpath(os.path.dirname(lib)), os.path.basename(lib))
                 for lib in _needed_libraries([python, *extensions]))


def _binds() -> list[str]:
    """Read-only binds of the interpreter's standard library and binary, the shared libraries
    they link to and nothing else of the host's system folders (no /usr/local, /usr/src,
    /usr/share, /opt, /home, /srv: a checkout or venv there stays out of reach); the package
    folders inside the standard library hidden under an empty read-only tmpfs; plus this
    package folder for the template script."""
    here = str(Path(__file__).resolve().parent)
    shown, hidden = interpreter_paths()
    python = os.path.realpath(sys.executable)
    args: list[str] = []
    for link in _ROOT_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
    for lib in _libraries(python, sysconfig.get_config_var("DESTSHARED") or ""):
        args += ["--ro-bind", os.path.realpath(lib), lib]
    for path in _LOCALES:
        args += ["--ro-bind-try", path, path]
    for path in shown:
        args += ["--ro-bind", path, path]
    for path in hidden:
        args += ["--tmpfs", path]
    args += ["--ro-bind", here, here]
    for path in hidden:  # after the binds made inside them
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
    return bwrap({"LC_ALL": "C.UTF-8", "HOME": "/tmp"}, _binds()) + inner, env, None


def bwrap(env: dict[str, str], binds: list[str]) -> list[str]:
    """bwrap's arguments up to the command: every namespace, uid/gid 65534, no capability, an
    environment of ``env`` only, a size-capped tmpfs /tmp, ``binds``, a minimal /dev, dies with
    the trainer. Shared with the scoring worker (``rewards/scoring/launch.py``)."""
    wrap = ["bwrap", "--unshare-all", "--uid", _SANDBOX_UID, "--gid", _SANDBOX_UID,
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    for key, value in env.items():
        wrap += ["--setenv", key, value]
    # the tmpfs first: a bind under /tmp (a checkout or venv there) is mounted on top of it
    return wrap + ["--size", str(_TMPFS_BYTES), "--tmpfs", "/tmp", *binds, "--dev", "/dev", "--chdir", "/tmp", "--"]


def popen(isolation: str, ctrl_fd: int, config: str, stderr, prefix: list[str] = ()) -> subprocess.Popen:
    """Start the template; ``prefix`` runs first and execs the rest (a cgroup's join)."""
    argv, env, cwd = command(isolation, ctrl_fd, config)
    return subprocess.Popen([*prefix, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                            pass_fds=(ctrl_fd,), env=env, cwd=cwd or "/", start_new_session=True)
