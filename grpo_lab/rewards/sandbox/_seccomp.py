"""A seccomp-BPF allowlist for sandboxed programs, built from the standard library alone.

Imported by ``_zygote.py`` (``python -I -S``: no site-packages). A program may make only the
system calls CPython needs to compute values in its own process: read, write, memory, time,
futexes, its own signal mask, read-only opens and directory listings. Every other call, known
to today's kernel or added later, returns EPERM: no process or thread creation, no signal,
trace, priority or affinity change aimed at any process, no socket, no write to the file
system, no shared memory, no namespace, mount or id change. Some allowed calls are checked
by argument:

    open/openat        no write, create, truncate or append flag
    mmap               no MAP_SHARED (a shared page is a channel between programs)
    fcntl              only F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_DUPFD_CLOEXEC (F_SETOWN,
                       F_SETSIG, F_SETFL O_ASYNC, leases, notify and locks deliver signals or
                       reach other processes)
    ioctl              only TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX
    prlimit64          this process (pid 0), reading only (new limit NULL)
    sched_getaffinity  this process (pid 0)

A syscall with a foreign architecture number kills the process (a 32-bit entry point would
bypass the table); an x32 number is refused.

The numbers come from the kernel's tables (x86_64: ``asm/unistd_64.h``; aarch64: the generic
``asm-generic/unistd.h``); the x86_64 filter is exercised by the test suite, the aarch64 one has
not run on an aarch64 machine here.
"""

import ctypes
import os
import platform
import resource
import struct

ALLOWED = {  # name: (x86_64, aarch64); None where the architecture has no such call
    "read": (0, 63), "write": (1, 64), "readv": (19, 65), "writev": (20, 66), "pread64": (17, 67),
    "preadv": (295, 69), "preadv2": (327, 286), "close": (3, 57), "close_range": (436, 436),
    "fstat": (5, 80), "stat": (4, None), "lstat": (6, None), "newfstatat": (262, 79),
    "statx": (332, 291), "lseek": (8, 62),
    "mmap": (9, 222), "munmap": (11, 215), "mprotect": (10, 226), "mremap": (25, 216),
    "brk": (12, 214), "madvise": (28, 233), "futex": (202, 98),
    "rt_sigaction": (13, 134), "rt_sigprocmask": (14, 135), "rt_sigreturn": (15, 139),
    "sigaltstack": (131, 132), "rt_sigpending": (127, 136), "rt_sigsuspend": (130, 133),
    "rt_sigtimedwait": (128, 137), "pause": (34, None),
    "nanosleep": (35, 101), "clock_nanosleep": (230, 115), "clock_gettime": (228, 113),
    "clock_getres": (229, 114), "gettimeofday": (96, 169), "time": (201, None), "alarm": (37, None),
    "setitimer": (38, 103), "getitimer": (36, 102),
    "getpid": (39, 172), "getppid": (110, 173), "gettid": (186, 178), "getuid": (102, 174),
    "geteuid": (107, 175), "getgid": (104, 176), "getegid": (108, 177), "getgroups": (115, 158),
    "getresuid": (118, 148), "getresgid": (120, 150), "getpgrp": (111, None),
    "getrandom": (318, 278), "uname": (63, 160), "sysinfo": (99, 179), "getrusage": (98, 165),
    "times": (100, 153), "getrlimit": (97, 163), "prlimit64": (302, 261), "getcpu": (309, 168),
    "sched_yield": (24, 124), "sched_getaffinity": (204, 123),
    "open": (2, None), "openat": (257, 56), "getdents": (78, None), "getdents64": (217, 61),
    "readlink": (89, None), "readlinkat": (267, 78), "access": (21, None), "faccessat": (269, 48),
    "faccessat2": (439, 439), "getcwd": (79, 17), "chdir": (80, 49), "fchdir": (81, 50),
    "statfs": (137, 43), "fstatfs": (138, 44),
    "fcntl": (72, 25), "ioctl": (16, 29), "dup": (32, 23), "dup2": (33, None), "dup3": (292, 24),
    "pipe": (22, None), "pipe2": (293, 59), "poll": (7, None), "ppoll": (271, 73),
    "select": (23, None), "pselect6": (270, 72), "epoll_create": (213, None),
    "epoll_create1": (291, 20), "epoll_ctl": (233, 21), "epoll_wait": (232, None),
    "epoll_pwait": (281, 22), "epoll_pwait2": (441, 441), "eventfd2": (290, 19),
    "recvfrom": (45, 207), "recvmsg": (47, 212),
    "exit": (60, 93), "exit_group": (231, 94), "wait4": (61, 260), "waitid": (247, 95),
    "restart_syscall": (219, 128),
}
# O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND: the same bits on both architectures.
WRITE_FLAGS = 0x1 | 0x2 | 0x40 | 0x200 | 0x400
MAP_SHARED = 0x01  # MAP_SHARED_VALIDATE (0x03) has it too
FCNTL_COMMANDS = (0, 1, 2, 3, 1030)  # F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_DUPFD_CLOEXEC
IOCTL_COMMANDS = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
# Argument checks, all of which must hold: (argument index, test, value). "none_of": no bit of
# the mask set; "one_of": the low 32 bits equal one of the values; "zero": all 64 bits zero.
CHECKS = {
    "open": ((1, "none_of", WRITE_FLAGS),), "openat": ((2, "none_of", WRITE_FLAGS),),
    "mmap": ((3, "none_of", MAP_SHARED),),
    "fcntl": ((1, "one_of", FCNTL_COMMANDS),), "ioctl": ((1, "one_of", IOCTL_COMMANDS),),
    "prlimit64": ((0, "zero", None), (2, "zero", None)),
    "sched_getaffinity": ((0, "zero", None),),
}
_ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}
_X32_BIT = 0x40000000

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL, _EPERM = 0x7FFF0000, 0x80000000, 0x00050000 | 1
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE = 1, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def allowed_numbers(machine: str | None = None) -> set[int]:
    """The syscall numbers the filter lets through (some of them only with checked arguments)."""
    column = _ARCHES[machine or platform.machine()][0]
    return {nrs[column] for nrs in ALLOWED.values() if nrs[column] is not None}


def program(machine: str | None = None) -> bytes:
    """The filter as packed ``struct sock_filter`` records for this (or the named) machine.

    Layout: check the architecture, load the syscall number, refuse x32; for each allowed
    call without checks ``JEQ nr -> RET ALLOW``; for each checked call a jump to its block;
    else EPERM. A block loads each checked argument word and ends in EPERM on a mismatch.
    """
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise OSError(f"no seccomp syscall table for architecture {machine!r}")
    column, audit_arch = _ARCHES[machine]
    number = {name: nrs[column] for name, nrs in ALLOWED.items() if nrs[column] is not None}
    checked = {name: nr for name, nr in number.items() if name in CHECKS}
    plain = sorted(nr for name, nr in number.items() if name not in CHECKS)
    # Instructions as (code, jump-true label, jump-false label, k); labels resolve below.
    # BPF jumps only forward and at most 255 instructions, so every refusal is a RET of its own.
    code: list[tuple] = [(_LD_W_ABS, None, None, 4), (_JEQ, "arch", None, audit_arch),
                         (_RET, None, None, _KILL), ("label", "arch"), (_LD_W_ABS, None, None, 0)]
    if machine == "x86_64":
        code += [(_JGE, None, "native", _X32_BIT), (_RET, None, None, _EPERM), ("label", "native")]
    for nr in plain:  # pairs, so no jump is longer than one instruction
        code += [(_JEQ, None, f"skip{nr}", nr), (_RET, None, None, _ALLOW), ("label", f"skip{nr}")]
    code += [(_JEQ, name, None, nr) for name, nr in checked.items()]
    code += [(_RET, None, None, _EPERM)]
    for name in checked:
        code += [("label", name), *_checks(name, CHECKS[name]), (_RET, None, None, _ALLOW),
                 ("label", f"{name}.deny"), (_RET, None, None, _EPERM)]
    return _assemble(code)


def _checks(name: str, checks: tuple) -> list[tuple]:
    """Instructions that fall through when every check holds and jump to the block's refusal
    (label ``<name>.deny``) otherwise."""
    code: list[tuple] = []
    deny = f"{name}.deny"
    for k, (arg, test, value) in enumerate(checks):
        low, done = 16 + 8 * arg, f"{name}.{k}.ok"
        if test == "none_of":
            code += [(_LD_W_ABS, None, None, low), (_JSET, deny, None, value)]
        elif test == "one_of":
            code += [(_LD_W_ABS, None, None, low)]
            code += [(_JEQ, done, None, v) for v in value] + [(_JEQ, deny, deny, 0), ("label", done)]
        elif test == "zero":
            code += [(_LD_W_ABS, None, None, low), (_JEQ, None, deny, 0),
                     (_LD_W_ABS, None, None, low + 4), (_JEQ, None, deny, 0)]
        else:
            raise ValueError(f"unknown argument test {test!r} for {name}")
    return code


def _assemble(code: list[tuple]) -> bytes:
    labels, at = {}, 0
    for ins in code:
        if ins[0] == "label":
            labels[ins[1]] = at
        else:
            at += 1
    out, at = [], 0
    for ins in code:
        if ins[0] == "label":
            continue
        op, jt, jf, k = ins
        # A jump offset counts instructions after the next one; None falls through.
        offsets = [0 if j is None else labels[j] - at - 1 for j in (jt, jf)]
        if not all(0 <= o < 256 for o in offsets):
            raise ValueError("seccomp program too long for 8-bit jumps")
        out.append(struct.pack("HBBI", op, offsets[0], offsets[1], k))
        at += 1
    return b"".join(out)


class Filter:
    """A prepared filter; ``install()`` applies it to the calling process for good.

    Everything (the C library handle, the program buffer) is set up before fork, so a child
    only makes the prctl and capset calls.
    """

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._buffer = ctypes.create_string_buffer(program())

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self._fprog = SockFprog(len(self._buffer.raw) // 8, ctypes.addressof(self._buffer))
        # struct __user_cap_header_struct, then two __user_cap_data_struct, all zero: no capability
        self._cap_header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
        self._cap_data = (ctypes.c_uint32 * 6)()

    def confine(self, keep: int, memory_bytes: int, cpu_s: int, files: int) -> None:
        """A child's lock-down before the filter: every descriptor closed but ``keep``, stdio on
        /dev/null, hard rlimits (address space, CPU, no file writes, no core, ``files``
        descriptors, no new process), killed with its parent, undumpable."""
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        for res, value in ((resource.RLIMIT_AS, memory_bytes), (resource.RLIMIT_CPU, cpu_s),
                           (resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_CORE, 0),
                           (resource.RLIMIT_NOFILE, files), (resource.RLIMIT_NPROC, 0)):
            resource.setrlimit(res, (value, value))
        self.die_with_parent()
        self.undumpable()

    def die_with_parent(self) -> None:
        """SIGKILL this process when its parent exits (the trainer for the template, the
        template for a child), whatever the parent's death was."""
        self._libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)

    def undumpable(self) -> None:
        """Make /proc/<pid>/mem, fd, environ and the like of this process unreadable to others
        of its uid (where a /proc is visible at all: unsafe-local)."""
        self._libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)

    def install(self) -> None:
        """Drop every capability (root in unsafe-local keeps none), then apply the filter."""
        if self._libc.capset(self._cap_header, self._cap_data) != 0:
            raise OSError(ctypes.get_errno(), "dropping capabilities failed: " + os.strerror(ctypes.get_errno()))
        prctl = self._libc.prctl
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
                prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "installing the seccomp filter failed: " + os.strerror(ctypes.get_errno()))
