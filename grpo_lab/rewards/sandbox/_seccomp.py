"""A seccomp-BPF filter for sandboxed programs, built from the standard library alone.

Imported by ``_zygote.py`` (``python -I -S``: no site-packages). The filter returns EPERM for
every system call that creates processes or threads, signals or traces another process, opens
a socket, changes the file system (any ``open``/``openat`` with a write, create, truncate or
append flag; mkdir, unlink, rename, link, chmod, chown, mknod, xattr, utime), mounts,
switches namespaces or ids, raises limits, or reaches kernel attack surface (bpf, io_uring,
userfaultfd, perf, keyrings, modules). Everything else is allowed. A process with a foreign
architecture number in its syscall is killed (a 32-bit entry point would bypass the table).

The x86_64 numbers are exercised by the test suite; the aarch64 numbers come from the
kernel's generic table and have not run on an aarch64 machine here.
"""

import ctypes
import os
import platform
import struct

_DENIED = {  # name: (x86_64, aarch64); None where the architecture has no such call
    "socket": (41, 198), "connect": (42, 203), "accept": (43, 202), "sendto": (44, 206),
    "sendmsg": (46, 211), "bind": (49, 200), "listen": (50, 201), "socketpair": (53, 199),
    "accept4": (288, 242), "sendmmsg": (307, 269),
    "clone": (56, 220), "fork": (57, None), "vfork": (58, None), "execve": (59, 221),
    "clone3": (435, 435), "execveat": (322, 281),
    "kill": (62, 129), "tkill": (200, 130), "tgkill": (234, 131), "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240), "pidfd_open": (434, 434), "pidfd_send_signal": (424, 424),
    "pidfd_getfd": (438, 438), "ptrace": (101, 117), "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271), "kcmp": (312, 272), "setpgid": (109, 154), "setsid": (112, 157),
    "shmget": (29, 194), "shmat": (30, 196), "semget": (64, 190), "msgget": (68, 186),
    "mq_open": (240, 180),
    "creat": (85, None), "truncate": (76, 45), "rename": (82, None), "mkdir": (83, None),
    "rmdir": (84, None), "link": (86, None), "unlink": (87, None), "symlink": (88, None),
    "chmod": (90, None), "fchmod": (91, 52), "chown": (92, None), "fchown": (93, 55),
    "lchown": (94, None), "utime": (132, None), "utimes": (235, None), "mknod": (133, None),
    "mkdirat": (258, 34), "mknodat": (259, 33), "fchownat": (260, 54), "futimesat": (261, None),
    "unlinkat": (263, 35), "renameat": (264, 38), "linkat": (265, 37), "symlinkat": (266, 36),
    "fchmodat": (268, 53), "utimensat": (280, 88), "renameat2": (316, 276), "openat2": (437, 437),
    "setxattr": (188, 5), "lsetxattr": (189, 6), "fsetxattr": (190, 7), "removexattr": (197, 14),
    "lremovexattr": (198, 15), "fremovexattr": (199, 16), "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "unshare": (272, 97), "setns": (308, 268), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "setuid": (105, 146), "setgid": (106, 144), "setreuid": (113, 145), "setregid": (114, 143),
    "setgroups": (116, 159), "setresuid": (117, 147), "setresgid": (119, 149),
    "setrlimit": (160, 164), "prlimit64": (302, 261),
    "personality": (135, 92), "syslog": (103, 116), "acct": (163, 89), "swapon": (167, 224),
    "swapoff": (168, 225), "reboot": (169, 142), "sethostname": (170, 161),
    "setdomainname": (171, 162), "iopl": (172, None), "ioperm": (173, None),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "quotactl": (179, 60), "vhangup": (153, 58), "kexec_load": (246, 104),
    "kexec_file_load": (320, 294), "add_key": (248, 217), "request_key": (249, 218),
    "keyctl": (250, 219), "bpf": (321, 280), "perf_event_open": (298, 241),
    "userfaultfd": (323, 282), "io_uring_setup": (425, 425), "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427), "mbind": (237, 235), "set_mempolicy": (238, 237),
    "migrate_pages": (256, 238), "move_pages": (279, 239),
}
# open(path, flags) and openat(dirfd, path, flags): the argument index that holds the flags.
_OPENS = {"open": ((2, 1), None), "openat": ((257, 2), (56, 2))}
_ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}
# O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND: the same bits on both architectures.
WRITE_FLAGS = 0x1 | 0x2 | 0x40 | 0x200 | 0x400
_X32_BIT = 0x40000000

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL, _EPERM = 0x7FFF0000, 0x80000000, 0x00050000 | 1
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, _PR_SET_PDEATHSIG = 38, 22, 2, 1


def program(machine: str | None = None) -> bytes:
    """The filter as packed ``struct sock_filter`` records for this (or the named) machine.

    Layout: check the architecture, load the syscall number, jump to DENY on any listed
    number, to an argument check for open/openat, else ALLOW.
    """
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise OSError(f"no seccomp syscall table for architecture {machine!r}")
    column, audit_arch = _ARCHES[machine]
    denied = sorted({nrs[column] for nrs in _DENIED.values() if nrs[column] is not None})
    opens = [nrs[column] for nrs in _OPENS.values() if nrs[column] is not None]
    # Instructions as (code, jump-true label, jump-false label, k); labels resolve below.
    code: list[tuple] = [(_LD_W_ABS, None, None, 4), (_JEQ, "nr", "kill", audit_arch)]
    code += [("label", "nr"), (_LD_W_ABS, None, None, 0)]
    if machine == "x86_64":
        code += [(_JGE, "deny", None, _X32_BIT)]
    code += [(_JEQ, "deny", None, nr) for nr in denied]
    code += [(_JEQ, f"open{nr}", None, nr) for nr, _ in opens]
    code += [(_RET, None, None, _ALLOW)]
    for nr, arg in opens:
        code += [("label", f"open{nr}"), (_LD_W_ABS, None, None, 16 + 8 * arg),
                 (_JSET, "deny", None, WRITE_FLAGS), (_RET, None, None, _ALLOW)]
    code += [("label", "deny"), (_RET, None, None, _EPERM), ("label", "kill"), (_RET, None, None, _KILL)]
    return _assemble(code)


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
    only makes the two prctl calls.
    """

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._buffer = ctypes.create_string_buffer(program())

        class SockFprog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

        self._fprog = SockFprog(len(self._buffer.raw) // 8, ctypes.addressof(self._buffer))

    def die_with_parent(self) -> None:
        """SIGKILL this process when its parent exits (the trainer for the template, the
        template for a child), whatever the parent's death was."""
        self._libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)

    def install(self) -> None:
        prctl = self._libc.prctl
        if prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
                prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self._fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "installing the seccomp filter failed: " + os.strerror(ctypes.get_errno()))
