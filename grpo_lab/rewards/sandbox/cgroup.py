"""The code sandbox's control group: a cap on all it runs, and a kill that leaves nothing.

Each template (bwrap, the template process and every child it forks) runs in a cgroup of its
own, made under this process's cgroup and joined before bwrap starts. ``pids.max`` and a
memory limit bound what the whole sandbox can take from the host whatever its programs do,
and ``Cgroup.kill`` ends everything in it (``cgroup.kill`` on v2; on v1, SIGKILL to every
listed process until none is left) and waits until it is empty.

CPU is bounded per process (RLIMIT_CPU a second past each program's deadline, and the kill
on its verdict), not here: a cgroup competes for CPU as one task of its weight, so no fixed
weight schedules the sandbox as its processes were before. Weighted as one task it lost
10-40% to other load on the machine; weighted as the programs it runs at once, it starved the
trainer's own judging while only a few ran (benchmarks/sandbox_speed.py).

Both hierarchies work: cgroup v2 (one tree; its limits need the controllers enabled in this
process's cgroup, which the kernel refuses while that cgroup holds processes of its own, as
a trainer's usually does, so v2 often gives the kill and no limits) and v1 (a tree per
controller, e.g. /sys/fs/cgroup/{pids,memory}, writable as root). Where neither is writable
(no root, no delegation), ``create`` returns None and warns once: the sandbox then still
holds its rlimits (address space, CPU near the deadline, no new process, no file writes) and
kills each program on its verdict, confirmed by the template, but nothing caps the sandbox's
total memory or processes, and nothing can kill all of it at once beyond bwrap's pid
namespace (which dies with its first process).

The path and limit logic is pure (``parse_mountinfo``, ``parse_membership``, ``plan``,
``limit_files``); the rest is thin file-system work.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import signal
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

CONTROLLERS = ("pids", "memory")
_PREFIX = "grpo-sandbox-"
_NAME = re.compile(re.escape(_PREFIX) + r"(\d+)-\d+$")
_names = itertools.count()
_warned = False


class CgroupWarning(UserWarning):
    """The sandbox runs without some of its cgroup's guarantees on this machine."""


@dataclass(frozen=True)
class Limits:
    pids: int
    memory_bytes: int


@dataclass(frozen=True)
class Mounts:
    v2: str | None  # the unified hierarchy's directory for this process's cgroup's root
    v1: dict[str, str]  # controller -> directory of that hierarchy's root


@dataclass(frozen=True)
class Layout:
    """Where one sandbox's cgroup lives: ``{"unified": dir}`` on v2, a dir per controller on v1."""

    version: int
    dirs: dict[str, str]


def parse_mountinfo(text: str) -> tuple[tuple[str, str] | None, dict[str, tuple[str, str]]]:
    """/proc/self/mountinfo -> (v2 (mount point, root), {v1 controller: (mount point, root)}),
    where root is the cgroup path the mount shows at its mount point."""
    v2, v1 = None, {}
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        root, point = fields[3], fields[4]
        fstype, options = fields[dash + 1], fields[dash + 3] if len(fields) > dash + 3 else ""
        if fstype == "cgroup2" and v2 is None:
            v2 = (point, root)
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in CONTROLLERS:
                    v1.setdefault(option, (point, root))
    return v2, v1


def parse_membership(text: str) -> tuple[str | None, dict[str, str]]:
    """/proc/self/cgroup -> (this process's v2 path, {v1 controller: its path})."""
    v2, v1 = None, {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            v2 = parts[2]
        for controller in parts[1].split(","):
            if controller in CONTROLLERS:
                v1[controller] = parts[2]
    return v2, v1


def _under(mount: tuple[str, str], own: str) -> str | None:
    """The directory of cgroup ``own`` in a hierarchy mounted as (point, root); None if the
    mount does not show it."""
    point, root = mount
    if root != "/" and own != root and not own.startswith(root.rstrip("/") + "/"):
        return None
    return os.path.normpath(point + "/" + own[len(root.rstrip("/")):])


def plan(mountinfo: str, membership: str, v2_controllers: set[str], name: str) -> Layout | None:
    """Where cgroup ``name`` goes: under this process's own cgroup, on v2 if its tree offers
    pids or memory (``v2_controllers``: this cgroup's cgroup.controllers), else on
    v1 for the controllers mounted there, else on v2 without limits; None without cgroups."""
    (v2_mount, v1_mounts), (v2_own, v1_own) = parse_mountinfo(mountinfo), parse_membership(membership)
    v2_dir = _under(v2_mount, v2_own) if v2_mount and v2_own is not None else None
    if v2_dir is not None and v2_controllers & set(CONTROLLERS):
        return Layout(2, {"unified": os.path.join(v2_dir, name)})
    v1_dirs = {c: _under(v1_mounts[c], v1_own[c]) for c in CONTROLLERS if c in v1_mounts and c in v1_own}
    v1_dirs = {c: os.path.join(d, name) for c, d in v1_dirs.items() if d is not None}
    if v1_dirs:
        return Layout(1, v1_dirs)
    return Layout(2, {"unified": os.path.join(v2_dir, name)}) if v2_dir is not None else None


def limit_files(layout: Layout, limits: Limits) -> list[tuple[str, list[tuple[str, str]]]]:
    """(controller, [(file, value), ...]) to write for ``limits``, in order."""
    if layout.version == 2:
        d = layout.dirs["unified"]
        return [("pids", [(f"{d}/pids.max", str(limits.pids))]),
                ("memory", [(f"{d}/memory.max", str(limits.memory_bytes))])]
    files = {"pids": lambda d: [(f"{d}/pids.max", str(limits.pids))],
             "memory": lambda d: [(f"{d}/memory.limit_in_bytes", str(limits.memory_bytes))]}
    return [(c, files[c](d)) for c, d in layout.dirs.items()]


def stale(names: list[str], alive) -> list[str]:
    """Sandbox cgroup names left by processes that are gone (``alive(pid)`` is False)."""
    return [n for n in names if (m := _NAME.match(n)) and not alive(int(m.group(1)))]


class Cgroup:
    """One sandbox's cgroup on this machine."""

    def __init__(self, layout: Layout, limited: tuple[str, ...]):
        self.layout, self.limited = layout, limited
        # on v1 every process joins every hierarchy; the pids one lists them (any would)
        self._listing = layout.dirs.get("unified") or layout.dirs.get("pids") or next(iter(layout.dirs.values()))

    def join_prefix(self) -> list[str]:
        """argv prefix that moves the started process into this cgroup before it execs the
        rest of the command line (so every process it starts is born inside)."""
        writes = "; ".join(f"echo $$ > {shlex.quote(d + '/cgroup.procs')}" for d in self.layout.dirs.values())
        return ["/bin/sh", "-c", f'{{ {writes}; }} 2>/dev/null; exec "$@"', "sh"]

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in Path(self._listing, "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def kill(self, timeout_s: float = 10.0) -> bool:
        """SIGKILL everything in the cgroup; True once it is empty, False if something is
        still listed after ``timeout_s``."""
        try:
            Path(self._listing, "cgroup.kill").write_text("1")  # v2, kernel 5.14+: one write
        except OSError:
            pass
        deadline = time.monotonic() + timeout_s
        while pids := self.pids():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def remove(self) -> None:
        for d in self.layout.dirs.values():
            try:
                os.rmdir(d)
            except OSError:
                pass

    def usage(self) -> int | None:
        """Bytes of memory charged to the cgroup now (None without the memory controller)."""
        d = self.layout.dirs.get("unified") or self.layout.dirs.get("memory")
        name = "memory.current" if self.layout.version == 2 else "memory.usage_in_bytes"
        try:
            return int(Path(d, name).read_text()) if d else None
        except (OSError, ValueError):
            return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


_HOLDS = ("each program's rlimits (address space, CPU time near its deadline, no new process, no file "
          "writes) and its kill on every verdict, confirmed by the template before scores are returned")
_WHAT = {"pids": "processes", "memory": "memory"}


def _warn(problem: str, lacks: str, holds: str = _HOLDS) -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(f"code sandbox: {problem}. Still holding: {holds}. Not holding: {lacks}.",
                      CgroupWarning, stacklevel=4)


def _no_cgroup(problem: str) -> None:
    _warn(problem, "a cap on the sandbox's total memory and processes, and one kill of everything it runs "
                   "(bwrap's pid namespace still ends with its first process)")


def _v2_controllers(layout: Layout) -> set[str]:
    try:
        return set(Path(os.path.dirname(layout.dirs["unified"]), "cgroup.controllers").read_text().split())
    except OSError:
        return set()


def _make(layout: Layout) -> str | None:
    """Make the layout's directories (after clearing stale siblings); the error, or None."""
    made = []
    for d in layout.dirs.values():
        parent = os.path.dirname(d)
        try:
            for name in stale(os.listdir(parent), _alive):
                os.rmdir(os.path.join(parent, name))
        except OSError:
            pass
        try:
            os.mkdir(d)
        except OSError as e:
            for m in made:
                os.rmdir(m)
            return f"cannot make {d} ({e.strerror})"
        made.append(d)
    return None


def create(limits: Limits) -> Cgroup | None:
    """A new cgroup for one template, with whichever of ``limits`` this machine allows; None,
    with one warning per process, where no cgroup can be made here."""
    name = f"{_PREFIX}{os.getpid()}-{next(_names)}"
    try:
        mountinfo, membership = Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text()
    except OSError:
        mountinfo = membership = ""
    layout = plan(mountinfo, membership, set(), name)
    if layout is not None and layout.version == 2:  # with the controllers this cgroup offers
        layout = plan(mountinfo, membership, _v2_controllers(layout), name)
    if layout is None:
        _no_cgroup("no cgroup hierarchy is mounted")
        return None
    error = _make(layout)
    if error is not None:
        _no_cgroup(error)
        return None
    if layout.version == 2:  # refused while this process's cgroup holds processes itself
        for controller in CONTROLLERS:
            try:
                Path(os.path.dirname(layout.dirs["unified"]), "cgroup.subtree_control").write_text(f"+{controller}")
            except OSError:
                pass
    limited = []
    for controller, writes in limit_files(layout, limits):
        try:
            for path, value in writes:
                Path(path).write_text(value)
            limited.append(controller)
        except OSError:
            pass
    missing = [_WHAT[c] for c in CONTROLLERS if c not in limited]
    if missing:
        why = " (v2 enables them only below a cgroup that holds no process)" if layout.version == 2 else ""
        _warn(f"its cgroup has no {', '.join(c for c in CONTROLLERS if c not in limited)} limit here{why}",
              f"a cap on the sandbox's total {', '.join(missing)}",
              _HOLDS + ", and one kill of everything in the sandbox's cgroup")
    return Cgroup(layout, tuple(limited))


def give_up(group: Cgroup, why: str) -> None:
    """Stop using ``group`` (its processes, if any, are the caller's to end) and say why."""
    group.remove()
    _no_cgroup(why)
