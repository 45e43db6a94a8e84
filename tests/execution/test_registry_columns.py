"""A registry created before a column existed gets it on open, on SQLite and PostgreSQL alike."""

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
