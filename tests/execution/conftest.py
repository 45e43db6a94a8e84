import os

import pytest

from tests.execution.slurm_cluster import SlurmCluster, missing


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real one-node Slurm cluster (tests/execution/slurm_cluster.py) for the session; the Slurm
    commands this process and its children run (submitit's sbatch, squeue) are pointed at it."""
    why = missing()
    if why:
        pytest.skip(why)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except RuntimeError as exc:
        cluster.stop()
        pytest.skip(f"the Slurm daemons did not start: {str(exc)[:300]}")
    before = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    yield cluster
    cluster.stop()
    if before is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = before
