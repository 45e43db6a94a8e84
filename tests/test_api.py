"""The Python API (grpo_lab.plan / sweep / report_sweep): what the CLI does, as calls."""

import pytest

import grpo_lab
from grpo_lab.util.yamlio import ConfigError
from tests.conftest import ROOT
from tests.execution.sweeps import write_matrix

pytestmark = pytest.mark.slow


def test_plan_sweep_and_report_as_calls(tmp_path):
    p = grpo_lab.plan(ROOT / "matrices" / "quickstart.yaml", workspace=tmp_path / "empty")
    assert len(p.cells) == 10 and p.fits is True
    matrix = write_matrix(tmp_path, "api")  # baseline and ema_reference on the fast test model
    events = []
    result = grpo_lab.sweep(matrix, workspace=tmp_path / "ws", preflight=False,
                            on_event=lambda kind, **data: events.append(kind))
    assert result.counts["finished"] == 2 and result.counts["failed"] == 0
    kinds = list(dict.fromkeys(events))
    assert kinds[:2] == ["plan", "started"] and kinds[-1] == "finished" and {"start", "end"} <= set(kinds)
    assert events.count("end") == 2
    again = grpo_lab.sweep(matrix, workspace=tmp_path / "ws", preflight=False)  # idempotent, silent
    assert again.executed == [] and again.skipped == 2
    html, md = grpo_lab.report_sweep("api", out=tmp_path / "report", workspace=tmp_path / "ws")
    assert md.exists() and "ema_reference" in html.read_text()
    import re
    samples = re.findall(r'<a href="([^"]+/completions.jsonl)"', html.read_text())
    assert len(samples) == 2 and all((html.parent / s).is_file() for s in samples)  # each run's eval samples
    with pytest.raises(ConfigError, match="did you mean 'api'"):
        grpo_lab.report_sweep("apj", workspace=tmp_path / "ws")


@pytest.mark.parametrize("decide, says", [({"sequnce": "t"}, "unknown option 'sequnce' (did you mean 'sequence'?)"),
                                          ({"sequence": "bayes"}, "decide.sequence: 'bayes' is not one of t, betting"),
                                          ({"delta": 0}, "decide.delta: 0 is out of range"),
                                          ({"most_seeds": None}, "decide.most_seeds: None is out of range"),
                                          ({"wave": 0}, "decide.wave: 0 is out of range"),
                                          ({"budget": -1.0}, "decide.budget: -1.0 is out of range"),
                                          ({"eval_samples": "many"}, "decide.eval_samples: 'many' is out of range"),
                                          ({"eval_samples": 0}, "decide.eval_samples: 0 is out of range"),
                                          ("t", "expected a mapping of options")])
def test_a_bad_decide_option_is_refused_before_any_run(tmp_path, decide, says):
    matrix = write_matrix(tmp_path, "bad")
    with pytest.raises(ConfigError) as err:
        grpo_lab.sweep(matrix, workspace=tmp_path / "ws", preflight=False, decide=decide)
    assert says in str(err.value)
    assert not (tmp_path / "ws" / "runs").exists()  # nothing trained, nothing registered
