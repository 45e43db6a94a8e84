"""`sweep --screen` shows, with its plan and before anything is registered, the same range of
spend that `plan --screen` prices (spec/screen_spend.py)."""

from pathlib import Path

import pytest

from grpo_lab.api import plan
from grpo_lab.execution import registry as reg
from grpo_lab.execution.driver import SweepRequest, run_sweep

QUICKSTART = Path(__file__).resolve().parents[2] / "matrices" / "quickstart.yaml"


class Shown(Exception):
    """Raised by the listener at the plan event: the sweep goes no further."""


def test_the_sweep_shows_the_plans_screening_range_before_it_starts(tmp_path):
    got = {}

    def on_event(kind, **data):
        if kind == "plan":
            got["plan"] = data["plan"]
            raise Shown

    with pytest.raises(Shown):
        run_sweep(SweepRequest(matrix=QUICKSTART, workspace=tmp_path / "ws", screen={"rungs": (0.5,)}), on_event)
    planned = plan(QUICKSTART, workspace=tmp_path / "ws", screen={"rungs": (0.5,)})
    assert got["plan"].screening == planned.screening and planned.screening.least < planned.screening.most
    with reg.connect(reg.default_url(tmp_path / "ws"))() as session:  # shown before anything is registered or run
        assert reg.all_sweeps(session) == []
