"""`grpo-lab ui` prints its URL once the server answers, and the URL opens on the sweeps' runs."""

import socket
import sys
import time

from grpo_lab.execution import tracking, ui

# a stand-in for MLflow's server: answers /health after a start-up delay, then stops by itself
FAKE_SERVER = ("import http.server, sys, threading, time\n"
               "time.sleep(1.5)\n"
               "server = http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), http.server.SimpleHTTPRequestHandler)\n"
               "threading.Timer(2, server.shutdown).start()\n"
               "server.serve_forever()\n")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_url_is_given_only_once_the_server_answers(tmp_path, monkeypatch):
    port = free_port()
    (tmp_path / "health").write_text("OK")
    monkeypatch.setattr(ui, "ui_command", lambda uri, p: ([sys.executable, "-c", FAKE_SERVER, str(p)], tmp_path))
    ready = []
    t0 = time.monotonic()
    assert ui.serve_ui("sqlite:///unused.db", port, on_ready=lambda: ready.append((time.monotonic() - t0,
                                                                                   ui.answers(port)))) == 0
    assert len(ready) == 1 and ready[0][0] >= 1.5 and ready[0][1]


def test_the_url_opens_on_the_sweeps_runs_not_mlflows_overview(tmp_path):
    uri = tracking.default_tracking_uri(tmp_path / "ws")
    assert ui.runs_url(uri, 5123) == "http://127.0.0.1:5123"  # no sweep logged yet: the UI's home
    assert not (tmp_path / "ws").exists()  # the store is left for the sweep's Tracker to create
    tracker = tracking.Tracker(uri)
    assert ui.runs_url(uri, 5123) == f"http://127.0.0.1:5123/#/experiments/{tracker.experiment_id}/runs"
