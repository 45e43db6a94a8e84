"""The verdict of one comparison: what `--decide` concluded, about which estimand, on which seeds,
and why an open one is open. analysis/decide.py makes them; the registry stores them whole
(`as_dict`), and the report, its figures and the CLI only render them.

Labels (about the rule's estimand, analysis/rule.py):

    significant  the pass@1 interval excludes 0 (its sign: `direction`)
    equivalent   the interval lies inside (−δ, δ)
    open         neither; `reason` says why it stayed open when the loop stopped:
                 "seed cap" (closing needs more seeds per arm than the cap), "budget" (it could
                 close within the cap, the budget ran out first), "" (more seeds were planned)

Each carries its collapse verdict (analysis/collapse.py), which a report prints beside the label:
"no change" on the healthy estimand says nothing about a collapse mode rarer than its bound.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from grpo_lab.analysis.collapse import CollapseVerdict

LABELS = ("significant", "equivalent", "open")
REASONS = ("", "seed cap", "budget")


def _num(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def _json(x: float) -> float | None:
    return x if math.isfinite(x) else None  # JSON and SQL have no inf or NaN


@dataclass(frozen=True)
class Verdict:
    name: str  # model/task/kind:target, unique in a sweep
    kind: str  # "effect" | "interaction"
    model: str
    task: str
    target: str  # the arm key the comparison is about
    estimand: str  # analysis/rule.py ESTIMANDS
    label: str  # one of LABELS
    est: float  # the contrast's estimate on the seeds below (NaN before any)
    lower: float  # its confidence sequence at this wave (−inf/+inf before any seed)
    upper: float
    sigma: float  # sd of the paired differences (unpaired: of the noisiest arm)
    seeds: int  # seed indices the interval rests on (healthy: those where no arm collapsed)
    runs: int  # runs of the comparison's least-sampled arm
    collapse: CollapseVerdict
    reason: str = ""  # why an open one stays open (REASONS)
    # an open one: the smallest margin decidable within the seed cap (None: not computed, or none is)
    delta_at_cap: float | None = None
    wave: int | None = None  # the wave that decided it
    hours: float | None = None  # the sweep's device-hours when it was decided

    @property
    def decided(self) -> bool:
        return self.label != "open"

    @property
    def direction(self) -> int:
        """+1 / −1 for a significant interval above / below 0, else 0."""
        if self.label != "significant":
            return 0
        return 1 if self.lower > 0 else -1

    @property
    def radius(self) -> float:
        if not math.isfinite(self.est):
            return math.inf
        return max(self.est - self.lower, self.upper - self.est)

    def with_(self, **changes) -> Verdict:
        return replace(self, **changes)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["collapse"] = self.collapse.as_dict()
        if self.delta_at_cap is not None:
            d["delta_at_cap"] = _json(self.delta_at_cap)
        for k in ("est", "lower", "upper", "sigma"):
            d[k] = _json(d[k])
        d["collapse"] = {**d["collapse"], **{k: _json(d["collapse"][k]) for k in ("est", "lower", "upper")}}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Verdict:
        c = d["collapse"]
        span = (_num(c.get("lower")) if c.get("lower") is not None else -math.inf,
                _num(c.get("upper")) if c.get("upper") is not None else math.inf)
        collapse = CollapseVerdict.from_dict({**c, "est": _num(c.get("est")), "lower": span[0], "upper": span[1]})
        return cls(name=d["name"], kind=d["kind"], model=d["model"], task=d["task"], target=d["target"],
                   estimand=d["estimand"], label=d["label"], est=_num(d["est"]),
                   lower=-math.inf if d["lower"] is None else float(d["lower"]),
                   upper=math.inf if d["upper"] is None else float(d["upper"]), sigma=_num(d["sigma"]),
                   seeds=int(d["seeds"]), runs=int(d["runs"]), collapse=collapse, reason=d.get("reason", ""),
                   delta_at_cap=d.get("delta_at_cap"), wave=d.get("wave"), hours=d.get("hours"))
