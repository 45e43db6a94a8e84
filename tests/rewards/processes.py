"""Finding a sandbox's processes from the host, for tests that act on them from outside."""


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants, parents before children."""
    try:  # a child that just exited has no /proc entry left
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        kids = []
    return [pid] + [p for k in kids for p in tree(int(k))]


def template_pid(box, namespace: bool = False) -> int:
    """Host pid of the box's template, or with ``namespace`` of bwrap's process inside the
    namespace (its pid 1: every process of the sandbox dies with it)."""
    commands = {}
    for pid in tree(box._proc.pid):
        try:
            commands[pid] = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            pass
    if namespace:
        return [p for p, c in commands.items() if c.startswith(b"bwrap")][1]  # the outer bwrap comes first
    return next(p for p, c in commands.items() if b"_zygote.py" in c and not c.startswith(b"bwrap"))
