"""The sandbox's cgroup: where it goes on v1, v2 and mixed hosts (pure), what it limits and
kills on this machine (v1 as root, and v2's kill on the unified mount where there is one), and
what still holds, with one warning, where no cgroup can be made."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_lab.rewards.sandbox import cgroup
from grpo_lab.rewards.sandbox.cgroup import Layout, Limits, limit_files, plan, stale

V1_HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_MEMBERSHIP = "9:name=systemd:/\n8:pids:/\n4:memory:/job/42\n1:cpu:/\n0::/\n"
V2_ONLY = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V2_MEMBERSHIP = "0::/user.slice/user-1000.slice/session-3.scope\n"
# Docker without a cgroup namespace: the mount shows the container's own cgroup at its mount point
V1_CONTAINER = ("50 40 0:40 /docker/abc /sys/fs/cgroup/pids ro,nosuid - cgroup cgroup rw,pids\n"
                "51 40 0:41 /docker/abc /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n")
V1_CONTAINER_MEMBERSHIP = "5:pids:/docker/abc\n3:memory:/docker/abc/inner\n"


def test_v1_goes_under_this_process_cgroup_in_each_controller_tree():
    layout = plan(V1_HYBRID, V1_MEMBERSHIP, set(), "grpo-sandbox-7-0")
    assert layout == Layout(1, {"pids": "/sys/fs/cgroup/pids/grpo-sandbox-7-0",
                                "memory": "/sys/fs/cgroup/memory/job/42/grpo-sandbox-7-0"})


def test_v2_is_used_where_its_tree_offers_controllers_and_for_the_kill_alone_where_nothing_else_is():
    own = "/sys/fs/cgroup/user.slice/user-1000.slice/session-3.scope"
    assert plan(V2_ONLY, V2_MEMBERSHIP, {"cpu", "memory", "pids", "io"}, "x") == Layout(2, {"unified": own + "/x"})
    assert plan(V2_ONLY, V2_MEMBERSHIP, set(), "x") == Layout(2, {"unified": own + "/x"})  # kill only
    # a hybrid host whose unified tree has no controllers: the v1 trees give the limits
    assert plan(V1_HYBRID, V1_MEMBERSHIP, set(), "x").version == 1
    assert plan(V1_HYBRID, V1_MEMBERSHIP, {"pids"}, "x").version == 2


def test_a_container_mount_is_mapped_through_its_root_and_nothing_mounted_is_none():
    layout = plan(V1_CONTAINER, V1_CONTAINER_MEMBERSHIP, set(), "x")
    assert layout == Layout(1, {"pids": "/sys/fs/cgroup/pids/x", "memory": "/sys/fs/cgroup/memory/inner/x"})
    # a mount that does not show this process's cgroup is not used
    assert plan(V1_CONTAINER, "5:pids:/elsewhere\n", set(), "x") is None
    assert plan("", "", set(), "x") is None


def test_limits_are_written_in_each_version_s_own_files():
    limits = Limits(pids=600, memory_bytes=3 << 30)
    v2 = limit_files(Layout(2, {"unified": "/g/x"}), limits)
    assert v2 == [("pids", [("/g/x/pids.max", "600")]), ("memory", [("/g/x/memory.max", str(3 << 30))])]
    v1 = dict(limit_files(Layout(1, {"pids": "/p/x", "memory": "/m/x"}), limits))
    assert v1 == {"pids": [("/p/x/pids.max", "600")], "memory": [("/m/x/memory.limit_in_bytes", str(3 << 30))]}


def test_cgroups_left_by_a_dead_trainer_are_recognised():
    names = ["grpo-sandbox-1-0", "grpo-sandbox-2-3", "other", "grpo-sandbox-x-1"]
    assert stale(names, alive=lambda pid: pid == 2) == ["grpo-sandbox-1-0"]


def writable_v1() -> bool:
    return os.geteuid() == 0 and os.access("/sys/fs/cgroup/pids", os.W_OK)


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_in(group, *argv) -> subprocess.Popen:
    proc = subprocess.Popen(group.join_prefix() + list(argv))
    deadline = time.monotonic() + 5
    while proc.pid not in group.pids() and time.monotonic() < deadline:
        time.sleep(0.01)
    return proc


@pytest.mark.skipif(not writable_v1(), reason="needs root and cgroup v1 controllers (this project's CI machines)")
def test_on_this_machine_the_limits_hold_and_the_kill_leaves_nothing():
    group = cgroup.create(Limits(pids=8, memory_bytes=64 << 20))
    try:
        assert group.limited == ("pids", "memory")
        assert Path(group.layout.dirs["pids"], "pids.max").read_text().strip() == "8"
        # a fork bomb inside stops at pids.max; its processes are all killed at once
        bomb = start_in(group, "/bin/sh", "-c", "for i in $(seq 20); do sleep 60 & done; wait")
        time.sleep(0.3)
        inside = group.pids()
        assert 1 < len(inside) <= 8  # the shell gives up on a fork it cannot make
        assert group.kill() and group.pids() == []
        bomb.wait(timeout=5)
        assert not any(map(running, inside))
    finally:
        group.kill()
        group.remove()
    assert not any(os.path.exists(d) for d in group.layout.dirs.values())


def unified_mount() -> str | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if "cgroup2" in fields and os.access(fields[4], os.W_OK):
            return fields[4]
    return None


@pytest.mark.skipif(unified_mount() is None, reason="no writable cgroup v2 mount")
def test_on_a_v2_tree_one_write_kills_everything_in_the_cgroup():
    path = os.path.join(unified_mount(), f"grpo-sandbox-{os.getpid()}-test")
    os.mkdir(path)
    group = cgroup.Cgroup(Layout(2, {"unified": path}), ())
    try:
        shell = start_in(group, "/bin/sh", "-c", "sleep 60 & sleep 60 & wait")
        time.sleep(0.2)
        assert len(group.pids()) == 3
        assert group.kill() and group.pids() == []
        assert shell.wait(timeout=5) == -9
    finally:
        group.kill()
        group.remove()
    assert not os.path.exists(path)


NO_CGROUP = """import json, sys, time, warnings
from grpo_lab.rewards.sandbox import Sandbox, compile_test
from tests.rewards.processes import tree
from tests.rewards.test_sandbox_lifetime import HONEST, MARK_MB, escapers, rss_mb
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    box = Sandbox("unsafe-local", workers=2)
    programs = [(c, [compile_test(t) for t in ts]) for c, ts in HONEST + escapers(1)]
    first = [sum(p) / len(p) for p in box.run(programs, 1.0)]
    held = max(rss_mb(pid) for pid in tree(box._proc.pid))
    box.run(programs[:1], 1.0)
    box.close()
told = [str(w.message) for w in caught if w.category.__name__ == "CgroupWarning"]
print(json.dumps({"scores": first, "held": held, "mark": MARK_MB, "told": told, "group": box.group is None}))
"""


READ_ONLY_CGROUPS = ("for m in $(grep cgroup /proc/self/mountinfo | cut -d' ' -f5); "
                     "do mount -o remount,bind,ro $m; done; exec \"$@\"")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root to remount cgroups")
def test_without_a_writable_cgroup_one_warning_says_what_holds_and_escapers_still_die():
    # a trainer in a mount namespace where every cgroup tree is read-only
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", READ_ONLY_CGROUPS,
                           "sh", sys.executable, "-c", NO_CGROUP], capture_output=True, text=True, timeout=120,
                          cwd=root)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["scores"] == [1.0, 0.5] + [1.0] * 4
    assert out["held"] < out["mark"] / 2  # no escaper survived its verdict, cgroup or not
    assert out["group"] and len(out["told"]) == 1
    assert "Read-only file system" in out["told"][0] and "kill on every verdict" in out["told"][0]
