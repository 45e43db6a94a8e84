"""A registry created before a column existed gets it on open, on SQLite and PostgreSQL alike."""

import json

from sqlalchemy import inspect, text

from grpo_lab.execution import registry as reg


def test_an_old_registry_gains_the_job_id_column(registry_url):
    engine = reg.connect(registry_url).kw["bind"]
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE attempts DROP COLUMN job_id"))  # as a registry from before job ids
    assert "job_id" not in {c["name"] for c in inspect(engine).get_columns("attempts")}
    engine.dispose()

    Session = reg.connect(registry_url)
    with Session() as s:
        run = reg.Run(run_id="r1", config_json="{}", out_dir="/tmp/r1")
        s.add(run)
        attempt = reg.begin_attempt(s, run, "slurm", "node1", 0)
        attempt.job_id = "4242_3"
        s.commit()
    with Session() as s:
        assert s.get(reg.Run, "r1").attempts[0].job_id == "4242_3"
    Session.kw["bind"].dispose()


def test_an_old_sqlite_registry_reads_its_screening_files_into_the_sweeps(tmp_path):
    from grpo_lab.execution.screen import recorded
    from grpo_lab.util.files import write_json

    url = reg.default_url(tmp_path)
    Session = reg.connect(url)
    with Session() as s:
        s.add_all([reg.Sweep(name=n, matrix_path="m.yaml") for n in ("scr", "plain", "broken")])
        s.commit()
    engine = Session.kw["bind"]
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE sweeps DROP COLUMN screen_json"))  # as a registry from before the column
    engine.dispose()
    record = {"rule": {"delta": 0.02}, "rungs": [{"rung": 0, "step": 4, "drops": [], "unread": {}}]}
    (tmp_path / "screens").mkdir()
    write_json(tmp_path / "screens" / "scr.json", record)  # where --screen kept its record then
    (tmp_path / "screens" / "broken.json").write_text('{"rule": {"del')  # a writer killed mid-file

    Session = reg.connect(url)
    with Session() as s:
        assert recorded(reg.get_sweep(s, "scr")) == record and recorded(reg.get_sweep(s, "plain")) is None
        assert recorded(reg.get_sweep(s, "broken")) is None
        reg.get_sweep(s, "scr").screen_json = json.dumps({**record, "rungs": []})  # the sweep screened anew
        s.commit()
    Session.kw["bind"].dispose()
    with reg.connect(url)() as s:  # opened again, the files are not read over the registry's record
        assert recorded(reg.get_sweep(s, "scr"))["rungs"] == []
