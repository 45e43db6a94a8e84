"""One sweep, two trainers, end to end: a matrix with `trainers: [grpo-lab, trl]` runs its cells under
grpo-lab's loop and TRL's GRPOTrainer on the local runner, the registry and the report keep each cell
under its own trainer, and the report's "Same trick, two trainers" lines the two sides up. Needs
trl==1.16.0 (the dev extra)."""

import pytest

pytest.importorskip("trl", exc_type=ImportError)

from pathlib import Path  # noqa: E402

from grpo_lab import api  # noqa: E402
from grpo_lab.execution import registry as reg  # noqa: E402
from grpo_lab.execution.report_inputs import sweep_data  # noqa: E402
from tests.execution.sweeps import write_matrix  # noqa: E402

pytestmark = pytest.mark.slow


def test_a_two_trainer_sweep_runs_both_and_reports_them_side_by_side(tmp_path):
    matrix = write_matrix(tmp_path, "two", seeds=(0,), tricks=["baseline", {"singles": ["clip_higher"]}],
                          steps=2, checkpoint_every=2, eval={"every": 2, "problems": 4, "samples": 2, "k": [1, 2]})
    matrix.write_text(matrix.read_text() + "trainers: [grpo-lab, trl]\n")
    ws = tmp_path / "ws"
    result = api.sweep(matrix, workspace=ws, preflight=False, max_parallel=2)
    assert result.counts["finished"] == 4 and result.counts["failed"] == 0

    with reg.connect(reg.default_url(ws))() as session:
        sweep = session.query(reg.Sweep).filter_by(name="two").one()
        data = sweep_data(sweep)
    # each trick set once under each trainer, and each run folder trained by the trainer its label names
    # (TRL's runs hold TRL's checkpoints)
    assert data.runs.select("model", "tricks").unique().height == 4
    for row in data.runs.iter_rows(named=True):
        assert (Path(row["folder"]) / "trl").exists() == row["model"].endswith(" (trl)"), row
    _, md = api.report_sweep("two", out=tmp_path / "report", workspace=ws)
    section = md.read_text().split("Same trick, two trainers", 1)[1]
    clip = next(line for line in section.splitlines() if "clip_higher" in line)
    # the trick's row holds both trainers' effects and speeds (numbers, not the missing mark)
    assert clip.count("|") >= 12 and "—" not in clip.split("|")[2], clip
