"""The decision rule of `--decide`: every statistical choice a verdict depends on, frozen and passed
whole (analysis/decide.py, analysis/eval_design.py, execution/waves.py, the report, the validity
suite). A restarted sweep must keep it: changing any field after seeing data voids the guarantee.

Estimands (what a label is about, named in its wording):

    healthy  (default) the contrast of pass@1 over the seed indices where no run of the
             comparison collapsed (analysis/collapse.py defines a collapsed run from its own
             trajectory, before any comparison), joined to a separate verdict on how often each
             arm collapses. A trick that collapses some seeds and lifts the rest is then "higher
             on seeds that did not collapse" and "collapses more (or: a rise up to U not
             excluded)", both true; neither can be read as a lift of the mean. The rule
             that drops a seed reads its own runs only (so the kept differences stay
             i.i.d.), but it includes a score threshold (final below half the base): a
             trick that only widens the spread of its runs can read "higher on seeds that
             did not collapse", which is true of this estimand and says nothing of the mean.
             With `method="unpaired"` each arm's own collapsed runs are dropped instead of
             whole seed indices (the same per-arm healthy means, another seed count).
    mean     the contrast of mean pass@1 over all seeds, collapsed ones included, under the stated
             assumption that no trick has a collapse mode the seeds have not shown yet. Valid for
             Gaussian-like noise; under a skewed null (a trick collapsing 5-20% of seeds and sitting
             higher on the rest) it calls the trick significant in most sweeps (docs/results.md).

α is split between the two families of labels, Bonferroni over the K comparisons in each:
α·(1 − COLLAPSE_SHARE)/K per pass@1 contrast, α·COLLAPSE_SHARE/K per collapse-rate contrast.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

ESTIMANDS = ("healthy", "mean")
METHODS = ("paired", "unpaired")
SEQUENCES = ("t", "betting")
# The share of α spent on collapse-rate labels: within 32 seeds they close only for large rate
# differences, so a small share costs them little and the pass@1 labels keep most of α.
COLLAPSE_SHARE = 0.2

ESTIMAND_TEXT = {
    "healthy": "pass@1 on the seeds where no run of the comparison collapsed",
    "mean": "mean pass@1 over all seeds, assuming no collapse mode the seeds have not shown",
}


@dataclass(frozen=True)
class DecisionRule:
    alpha: float = 0.05  # family-wise error of every label the sweep prints, over all waves
    delta: float = 0.02  # equivalence margin on pass@1: |θ| < δ is "no change"
    most_seeds: int = 32  # seed cap per arm; each sequence is tuned to be tightest there
    # "paired": one sequence per comparison on seed-index paired differences; "unpaired": one per
    # arm mean, combined by interval sums
    method: str = "paired"
    # "t": Gaussian noise of any variance per comparison (analysis/tmix.py); "betting": any noise
    # within the score's range, at ~10x the seeds (analysis/betting.py)
    sequence: str = "t"
    estimand: str = "healthy"  # one of ESTIMANDS (module docstring)

    def __post_init__(self) -> None:
        choices = {"method": METHODS, "sequence": SEQUENCES, "estimand": ESTIMANDS}
        for key, allowed in choices.items():
            if getattr(self, key) not in allowed:
                raise ValueError(f"{key}: {getattr(self, key)!r} is not one of {', '.join(allowed)}")
        number = (int, float)
        ok = {"alpha": isinstance(self.alpha, number) and 0 < self.alpha < 1,
              "delta": isinstance(self.delta, number) and 0 < self.delta < 1,
              "most_seeds": isinstance(self.most_seeds, int) and not isinstance(self.most_seeds, bool)
              and self.most_seeds >= 2}
        bad = [k for k, good in ok.items() if not good]
        if bad:
            raise ValueError(f"{bad[0]}: {getattr(self, bad[0])!r} is out of range: alpha and delta in (0, 1), "
                             "most_seeds an integer >= 2")

    def alpha_each(self, family: int) -> float:
        """α of one pass@1 contrast's sequence in a family of `family` comparisons (or arms)."""
        return self.alpha * (1 - COLLAPSE_SHARE) / max(family, 1)

    def collapse_alpha_each(self, family: int) -> float:
        """α of one collapse-rate contrast's sequence."""
        return self.alpha * COLLAPSE_SHARE / max(family, 1)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def estimand_text(self) -> str:
        return ESTIMAND_TEXT[self.estimand]
