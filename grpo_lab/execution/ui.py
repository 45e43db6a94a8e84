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
import time
from collections.abc import Callable
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


def runs_url(uri: str, port: int) -> str:
    """Where the UI shows the sweeps: the runs table of grpo-lab's experiment (a parent run per
    sweep, a child per run). MLflow 3 opens an experiment on its GenAI overview, where none of it
    shows; before any sweep is logged, the UI's home."""
    from grpo_lab.execution.tracking import experiment_id

    home = f"http://127.0.0.1:{port}"
    found = experiment_id(uri)
    return f"{home}/#/experiments/{found}/runs" if found else home


def answers(port: int) -> bool:
    """Whether the server on 127.0.0.1:port serves requests yet (MLflow's /health says OK)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


def serve_ui(uri: str, port: int = 5000, on_ready: Callable[[], None] | None = None) -> int:
    """Run the MLflow UI on 127.0.0.1:port over `uri` until interrupted; returns its exit code.
    `on_ready` is called once the server answers (it takes a minute on a slow box; a URL printed
    before that would not open)."""
    cmd, cwd = ui_command(uri, port)
    # its stdout says only which stores it chose; its stderr (a port in use, a bad store) is the user's
    server = subprocess.Popen(cmd, cwd=cwd, start_new_session=True, stdout=subprocess.DEVNULL)
    read, write = os.pipe()
    watchdog = subprocess.Popen([sys.executable, "-c", _WATCHDOG, str(server.pid)], stdin=read, start_new_session=True)
    os.close(read)

    def stop(signum, _frame):
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        while server.poll() is None and not answers(port):
            time.sleep(0.5)
        if server.poll() is None and on_ready is not None:
            on_ready()
        return server.wait()
    except KeyboardInterrupt:
        return 130
    finally:
        os.close(write)  # the watchdog stops the server's whole group
        watchdog.wait()
        server.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
