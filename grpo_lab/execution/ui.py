"""`grpo-lab ui`: the MLflow UI over a sweep's tracking store, and nothing left running after it.

The server runs in a process group of its own (mlflow, uvicorn and its workers). A watchdog
beside it holds the read end of a pipe whose write end only this process holds: when this
process ends in any way (Ctrl-C, SIGTERM, SIGHUP, even SIGKILL), the pipe closes and the
watchdog takes the whole group down. Artifacts of a SQLite store (its Default experiment too)
stay in the workspace beside the database, and the server runs there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from grpo_lab.execution.tracking import artifact_root

_WATCHDOG = ("import os, signal, sys, time\n"
             "group = int(sys.argv[1])\n"
             "sys.stdin.buffer.read()\n"  # returns when the last writer, the ui command, is gone
             "for sig in (signal.SIGTERM, signal.SIGKILL):\n"
             "    try:\n"
             "        os.killpg(group, sig)\n"
             "    except ProcessLookupError:\n"
             "        break\n"
             "    time.sleep(3)\n")


def ui_command(uri: str, port: int) -> tuple[list[str], Path | None]:
    """The server's argv and working directory (the store's folder for SQLite, else none)."""
    cmd = [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1", "--port", str(port)]
    root = artifact_root(uri, "")
    if root is None:
        return cmd, None
    return cmd + ["--default-artifact-root", root], Path(uri.removeprefix("sqlite:///")).resolve().parent


def serve_ui(uri: str, port: int = 5000) -> int:
    """Run the MLflow UI on 127.0.0.1:port over `uri` until interrupted; returns its exit code."""
    cmd, cwd = ui_command(uri, port)
    server = subprocess.Popen(cmd, cwd=cwd, start_new_session=True)
    read, write = os.pipe()
    watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(server.pid)], stdin=read, start_new_session=True)
    os.close(read)

    def stop(signum, _frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        return server.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        os.close(write)  # the watchdog stops the server's whole group
        watchdog.wait()
        server.wait()
