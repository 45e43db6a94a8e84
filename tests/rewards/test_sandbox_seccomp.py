"""The seccomp allowlist against the real kernel: every call off the list is refused, known or not.

Each check runs in a forked process that installs the filter and reports over a pipe, so a
call that slipped through shows up as a number in the assertion, not as a dead test run.
"""

import ctypes
import errno
import json
import mmap
import os
import platform
import re
from pathlib import Path

import pytest

from grpo_lab.rewards.sandbox import _seccomp

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the x86_64 table is the one exercised here")

HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
GENERIC_HEADER = Path("/usr/include/asm-generic/unistd.h")
# The kernel lets these two through seccomp by design (they act only when called from its own
# uprobe trampoline; elsewhere uretprobe raises SIGILL and uprobe fails), so no filter sees them.
PASSED_THROUGH_BY_THE_KERNEL = {335, 336}
NEWEST_CHECKED = 512  # above every number today's headers know: calls added later are refused too


def header_numbers(path: Path, pattern: str) -> dict[str, int]:
    return {name: int(nr) for name, nr in re.findall(pattern, path.read_text())}


def in_filtered_child(probe) -> dict:
    """Run ``probe(libc)`` in a forked process under the filter; its JSON-able result."""
    read, write = os.pipe()
    sandbox_filter = _seccomp.Filter()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            sandbox_filter.install()
            result = probe(ctypes.CDLL(None, use_errno=True))
            os.write(write, json.dumps(result).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while chunk := os.read(read, 1 << 16):
        data += chunk
    os.close(read)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), f"the filtered child died: status {status}"
    return json.loads(data)


def refused(libc, nr: int, *args: int) -> bool:
    ctypes.set_errno(0)
    return libc.syscall(nr, *[ctypes.c_long(a) for a in args]) == -1 and ctypes.get_errno() == errno.EPERM


def test_every_call_off_the_list_is_refused_known_to_the_headers_or_not():
    known = header_numbers(HEADER, r"#define __NR_(\w+)\s+(\d+)") if HEADER.exists() else {}
    allowed = _seccomp.allowed_numbers("x86_64")
    numbers = sorted((set(known.values()) | set(range(NEWEST_CHECKED))) - allowed - PASSED_THROUGH_BY_THE_KERNEL)
    assert 452 in numbers  # fchmodat2: newer than the old denylist

    def probe(libc):
        return [nr for nr in numbers if not refused(libc, nr, 0, 0, 0, 0, 0, 0)]

    assert in_filtered_child(probe) == []


def test_x32_numbers_are_refused():
    assert in_filtered_child(lambda libc: [refused(libc, 0x40000000 | nr) for nr in (0, 39, 62, 452)]) == [True] * 4


def test_checked_calls_pass_only_the_harmless_forms():
    prot, private, shared = mmap.PROT_READ, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS
    f_setown, f_setsig, f_setfl, f_setlk, f_setlease, f_notify, f_setown_ex = 8, 10, 4, 6, 1024, 1026, 15

    def probe(libc):
        r, _ = os.pipe()
        path = b"/etc/hostname" if os.path.exists("/etc/hostname") else b"/dev/null"
        out = {
            "open write": refused(libc, 2, ctypes.addressof(ctypes.create_string_buffer(b"/dev/null")), os.O_WRONLY),
            "openat append": refused(libc, 257, -100, ctypes.addressof(ctypes.create_string_buffer(path)), os.O_APPEND),
            "mmap shared": refused(libc, 9, 0, 4096, prot, shared, -1, 0),
            "prlimit64 set": refused(libc, 302, 0, 7, ctypes.addressof(ctypes.create_string_buffer(16)), 0),
            "prlimit64 other pid": refused(libc, 302, 1, 7, 0, ctypes.addressof(ctypes.create_string_buffer(16))),
            "affinity other pid": refused(libc, 204, 1, 128, ctypes.addressof(ctypes.create_string_buffer(128))),
            "ioctl FIOSETOWN": refused(libc, 16, r, 0x8901, ctypes.addressof(ctypes.c_int(1))),
            "ioctl TIOCSTI": refused(libc, 16, 0, 0x5412, ctypes.addressof(ctypes.c_char(b"x"))),
        }
        out |= {f"fcntl {cmd}": refused(libc, 72, r, cmd, 1) for cmd in
                (f_setown, f_setsig, f_setfl, f_setlk, f_setlease, f_notify, f_setown_ex)}
        out["open read works"] = os.open(path.decode(), os.O_RDONLY) >= 0
        out["private mmap works"] = libc.syscall(9, 0, 4096, prot, private, -1, 0) not in (-1, 0)
        out["fcntl F_GETFD works"] = libc.syscall(72, r, 1, 0) >= 0
        out["own affinity works"] = len(os.sched_getaffinity(0)) >= 1
        out["own limits read"] = len(__import__("resource").getrlimit(7)) == 2
        return out

    result = in_filtered_child(probe)
    assert {name for name, ok in result.items() if not ok} == set()


@pytest.mark.skipif(not HEADER.exists(), reason=f"{HEADER} not installed (linux-libc-dev)")
def test_the_table_numbers_are_the_kernel_headers_numbers():
    x86 = header_numbers(HEADER, r"#define __NR_(\w+)\s+(\d+)")
    assert {name: nrs[0] for name, nrs in _seccomp.ALLOWED.items() if nrs[0] is not None} == \
        {name: x86[name] for name, nrs in _seccomp.ALLOWED.items() if nrs[0] is not None}
    if GENERIC_HEADER.exists():
        text = GENERIC_HEADER.read_text()
        generic = header_numbers(GENERIC_HEADER, r"#define __NR_(\w+)\s+(\d+)\b")
        generic |= {{"fstatat": "newfstatat"}.get(n, n): int(v) for n, v in re.findall(r"#define __NR3264_(\w+)\s+(\d+)", text)}
        for name, (_, arm) in _seccomp.ALLOWED.items():
            assert arm == generic.get(name), name
