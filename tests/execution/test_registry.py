"""The registry on SQLite and PostgreSQL: cells link runs across sweeps, attempts keep their hours."""

from grpo_lab.execution import registry as reg
from grpo_lab.spec.matrix import load_matrix
from grpo_lab.spec.plan import make_plan
from tests.execution.sweeps import write_matrix


def _open(tmp_path, url, name, seeds):
    plan = make_plan(load_matrix(write_matrix(tmp_path, name, seeds=seeds)))
    Session = reg.connect(url)
    session = Session()
    sweep = reg.Sweep(name=name, matrix_path="m.yaml")
    session.add(sweep)
    reg.register_cells(session, sweep, plan.cells, plan.estimates, tmp_path / "runs", {})
    return session, sweep


def test_cells_are_runs_shared_across_sweeps(tmp_path, registry_url):
    session, a = _open(tmp_path, registry_url, "a", seeds=[0, 1])
    assert len(a.cells) == 4 and reg.counts(session, a)["pending"] == 4
    session.close()
    session, b = _open(tmp_path, registry_url, "b", seeds=[1, 2])  # seed 1's two cells are the same runs as in a
    n_runs = session.query(reg.Run).count()
    assert len(b.cells) == 4 and n_runs == 6


def test_attempt_hours_and_wasted_compute(tmp_path, registry_url):
    session, sweep = _open(tmp_path, registry_url, "a", seeds=[0])
    run = sweep.cells[0].run
    first = reg.begin_attempt(session, run, "local", "h", 0)
    reg.end_attempt(session, first, "failed", 0.5, "boom", retry=True)
    assert run.status == "pending" and run.error == "boom"
    second = reg.begin_attempt(session, run, "local", "h", 2)
    assert second.number == 2 and run.status == "running"
    reg.end_attempt(session, second, "finished", 1.0)
    assert run.status == "finished" and run.gpu_hours == 1.5 and run.wasted_gpu_hours == 0.5
    third_run = sweep.cells[1].run
    last = reg.begin_attempt(session, third_run, "local", "h", 0)
    reg.end_attempt(session, last, "failed", 0.25, "boom again")
    assert third_run.status == "failed"
    assert reg.counts(session, sweep) == {"pending": 0, "running": 0, "finished": 1, "stopped": 0, "failed": 1}


def test_concurrent_first_connections_create_the_schema_once(registry_url):
    """`grpo-lab status` started while a sweep creates its registry must not fail on CREATE TABLE."""
    import threading

    url = registry_url
    errors = []

    def open_it():
        try:
            reg.connect(url)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_registry_urls_get_an_installed_driver_and_bad_ones_a_clear_error():
    import importlib.util

    import pytest

    from grpo_lab.util.yamlio import ConfigError

    if importlib.util.find_spec("psycopg2") is None:  # the postgres extra brings psycopg 3 only
        assert reg.engine_url("postgresql://me@db.example/lab") == "postgresql+psycopg://me@db.example/lab"
    assert reg.engine_url("sqlite:////tmp/r.db") == "sqlite:////tmp/r.db"
    with pytest.raises(ConfigError, match="'registry.db' is not a SQLAlchemy URL: use sqlite:///PATH"):
        reg.engine_url("registry.db")
    with pytest.raises(ConfigError, match=r"cannot open the registry postgresql\+psycopg://me:\*\*\*@127.0.0.1:1/lab"):
        reg.connect("postgresql+psycopg://me:secret@127.0.0.1:1/lab")  # nothing listens on port 1
