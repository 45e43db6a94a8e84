import json

import pytest


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A real 2-step run folder of the tiny model, with one collapse event appended."""
    from grpo_lab.trainer.grpo import train
    from tests.conftest import tiny_cfg

    out = tmp_path_factory.mktemp("run")
    train(tiny_cfg(steps=2, eval={"every": 1}), out)
    events = [{"step": 2, "kind": "entropy_collapse", "value": 0.01, "threshold": 0.05, "message": "entropy fell"},
              {"step": 3, "kind": "loss_spike", "value": 9.0, "threshold": 5.0, "message": "loss jumped"}]
    (out / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return out
