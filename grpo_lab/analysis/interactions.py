"""Trick effects and interactions over seeds (docs/design.md §6).

Input: a results frame, one row per run: model, task, tricks ('+'-joined; '' or 'baseline' for
the baseline), seed, metric columns, optionally `collapsed`. Within one (model, task) every
quantity is a contrast Σ_j c_j·ȳ_j over trick-set means with Σ_j c_j = 0:

    effect of S        = S − B
    expected of C      = Σ_{t∈C} (t − B)                  (additive prediction from the singles)
    interaction of C   = C − B − Σ_{t∈C} (t − B)  = observed − expected
    attribution of t∈F = F − F∖{t}                        (leave one out)

The effect and interaction weights are analysis/contrast.py's, the ones `--decide` decides on.

Variance, `variance="pooled"` (default): one seed-to-seed noise σ per (model, task), pooled over
its trick sets (two-way set + seed residual when every set ran the same seeds, so a seed's shared
prompt order and sampling stream cancels), se = σ·√(Σ c_j²/n_j) on the pooled degrees of
freedom: 5 seeds of 11 trick sets give 40 df where a paired contrast has 4, which is what makes
a 3σ interaction detectable with 5 seeds. It assumes seed noise is alike across the sets of a cell.
A collapsed run is one of its arm's outcomes, so it stays in the pool: leaving it out would judge
the arms that collapse, whose runs are the noisy ones, with the calm arms' noise. How often an arm
collapses is compared on its own: `collapsed_only_in_combination` needs the combination's collapse
count to exceed its singles' by a one-sided Fisher exact test, Holm-adjusted over the combinations.
`variance="paired"`: each contrast on its own: per-seed contrasts over the seeds all its sets
share (t-test, n − 1 df), Welch's variance sum when fewer than two seeds are shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import polars as pl

from scipy.stats import fisher_exact

from grpo_lab.analysis import stats
from grpo_lab.analysis.contrast import effect_coefs, interaction_coefs
from grpo_lab.spec.tricks import load_catalog, same_dimension_pairs
from grpo_lab.util.yamlio import ConfigError, suggest
from grpo_lab.spec.arm import BASELINE

VARIANCES = ("pooled", "paired")


@dataclass
class ArmSeeds:
    """The runs of one trick set in one cell: seed -> metric (replicates averaged)."""
    label: str
    by_seed: dict
    collapse: float  # share of its seeds with a collapsed run

    @property
    def y(self) -> np.ndarray:
        return np.fromiter(self.by_seed.values(), float, len(self.by_seed))


@dataclass
class TaskArms:
    """One (model, task): its arms by canonical trick-set key, and the pooled seed noise."""
    model: str
    task: str
    arms: dict[str, ArmSeeds]
    sigma: float
    df: float


@dataclass(frozen=True)
class Estimate:
    """A contrast's estimate and standard error (module docstring), and how the se was got."""

    est: float
    se: float
    df: float
    n: int  # seeds behind it (the smallest arm)
    sd_unit: float  # its standard deviation with one seed per arm
    method: str


def set_key(expr: pl.Expr) -> pl.Expr:
    """Canonical trick-set key: names sorted and '+'-joined, 'baseline' for none."""
    names = expr.fill_null("").str.split("+").list.eval(
        pl.element().filter((pl.element() != "") & (pl.element() != BASELINE))).list.sort()
    return names.list.join("+").replace("", BASELINE)


def prepare(df: pl.DataFrame, metric: str, logit: bool = False) -> pl.DataFrame:
    """model, task, key, label, seed, y, collapsed: one row per (cell, set, seed), y the
    metric (logit(y) with clipping if asked) averaged over replicates, non-finite values dropped."""
    missing = [c for c in ("model", "task", "tricks", "seed", metric) if c not in df.columns]
    if missing:
        raise ConfigError(f"results frame lacks column(s) {missing}{suggest(missing[-1], df.columns)}; "
                          f"has {', '.join(df.columns)}")
    y = pl.col(metric).cast(pl.Float64)
    collapsed = pl.col("collapsed").cast(pl.Float64) if "collapsed" in df.columns else pl.lit(0.0)
    frame = df.select(pl.col("model", "task").cast(pl.String), pl.col("seed"),
                      set_key(pl.col("tricks").cast(pl.String)).alias("key"),
                      pl.col("tricks").cast(pl.String).fill_null(BASELINE).replace("", BASELINE).alias("label"),
                      y.alias("y"), collapsed.fill_null(0.0).alias("collapsed"))
    frame = frame.filter(pl.col("y").is_finite())
    if logit:
        frame = frame.with_columns(pl.Series("y", stats.logit(frame["y"].to_numpy())))
    return (frame.group_by("model", "task", "key", "seed", maintain_order=True)
            .agg(pl.col("label").first(), pl.col("y").mean(), pl.col("collapsed").max()))


def pooled_noise(arms: list[ArmSeeds]) -> tuple[float, float]:
    """(σ, df): seed-to-seed std of one run's metric pooled over arms. Every arm on the same ≥2
    seeds: σ² = Σ_js (y_js − ȳ_j· − ȳ_·s + ȳ)² / ((J−1)(S−1)); otherwise
    σ² = Σ_j Σ_s (y_js − ȳ_j)² / (N − J). (NaN, 0) without replicate seeds."""
    seeds = {frozenset(a.by_seed) for a in arms}
    if len(arms) >= 2 and len(seeds) == 1 and len(next(iter(seeds))) >= 2:
        order = list(arms[0].by_seed)
        Y = np.array([[a.by_seed[s] for s in order] for a in arms])
        r = Y - Y.mean(1, keepdims=True) - Y.mean(0, keepdims=True) + Y.mean()
        df = (Y.shape[0] - 1) * (Y.shape[1] - 1)
        return float(np.sqrt((r**2).sum() / df)), float(df)
    ss = sum(float(((a.y - a.y.mean()) ** 2).sum()) for a in arms)
    df = sum(len(a.by_seed) for a in arms) - len(arms)
    return (float(np.sqrt(ss / df)), float(df)) if df > 0 else (np.nan, 0.0)


def task_arms(frame: pl.DataFrame) -> list[TaskArms]:
    """Group a `prepare`d frame into cells with their pooled noise."""
    out = []
    for (model, task), part in frame.partition_by("model", "task", as_dict=True, maintain_order=True).items():
        arms = {}
        for key, label, seed, y, col in zip(*(part[c].to_list() for c in ("key", "label", "seed", "y", "collapsed"))):
            arm = arms.setdefault(key, ArmSeeds(label, {}, 0.0))
            arm.by_seed[seed] = y
            arm.collapse += col
        for arm in arms.values():
            arm.collapse /= len(arm.by_seed)
        sigma, df = pooled_noise(list(arms.values()))
        out.append(TaskArms(model, task, arms, sigma, df))
    return out


def estimate(cell: TaskArms, coefs: dict[str, float], variance: str = "pooled") -> Estimate:
    """Σ_j c_j·ȳ_j over the cell's arms, with its standard error (see the module docstring)."""
    arms = [cell.arms[k] for k in coefs]
    c = np.array(list(coefs.values()), float)
    n = np.array([len(a.by_seed) for a in arms], float)
    means = np.array([a.y.mean() for a in arms])
    if variance == "pooled":
        return Estimate(float(c @ means), cell.sigma * float(np.sqrt((c**2 / n).sum())), cell.df, int(n.min()),
                        cell.sigma * float(np.sqrt((c**2).sum())), "pooled")
    shared = set.intersection(*(set(a.by_seed) for a in arms))
    if len(shared) >= 2:
        d = c @ np.array([[a.by_seed[s] for s in shared] for a in arms])
        sd = float(d.std(ddof=1))
        return Estimate(float(d.mean()), sd / np.sqrt(len(d)), len(d) - 1.0, len(d), sd, "paired")
    var = np.array([a.y.var(ddof=1) if len(a.by_seed) > 1 else np.nan for a in arms])
    return Estimate(float(c @ means), float(np.sqrt((c**2 * var / n).sum())), stats.welch_df(c, var, n),
                    int(n.min()), float(np.sqrt((c**2 * var).sum())), "welch")


def _more_collapses_p(table: list[list[int]]) -> float:
    """One-sided Fisher exact p of a 2x2 [[hits, misses] combination, [hits, misses] singles]."""
    return fisher_exact(table, alternative="greater").pvalue


@lru_cache(maxsize=4096)
def dimension_warning(key: str) -> str:
    """'; '-joined notes for tricks of a set that act on the same dimension (catalog tricks only)."""
    known = [t for t in key.split("+") if t in load_catalog()]
    return "; ".join(f"{a} and {b} both act on {dim}" for dim, a, b in same_dimension_pairs(known))


def _check(variance: str) -> None:
    if variance not in VARIANCES:
        raise ValueError(f"variance must be one of {VARIANCES}, got {variance!r}")


def _tests(df: pl.DataFrame, alpha: float, prefix: str = "") -> pl.DataFrame:
    """Add {prefix}ci_low, ci_high, p_value, q_value (BH over all rows) from {prefix}est, se, df."""
    lo, hi, p = stats.t_interval(df[f"{prefix}est"], df[f"{prefix}se"], df[f"{prefix}df"], alpha)
    return df.with_columns(pl.Series(f"{prefix}ci_low", lo), pl.Series(f"{prefix}ci_high", hi),
                           pl.Series(f"{prefix}p_value", p), pl.Series(f"{prefix}q_value", stats.bh(p)))


def _on_shared_seeds(cell: TaskArms, keys: list[str], variance: str) -> TaskArms:
    """In paired mode, the cell cut to the seeds that all `keys` ran (when ≥ 2), so the row's
    contrasts stay consistent: observed = expected + interaction on the same seeds."""
    shared = set.intersection(*(set(cell.arms[k].by_seed) for k in keys))
    if variance == "pooled" or len(shared) < 2:
        return cell
    arms = {k: ArmSeeds(cell.arms[k].label, {s: v for s, v in cell.arms[k].by_seed.items() if s in shared},
                        cell.arms[k].collapse) for k in keys}
    return TaskArms(cell.model, cell.task, arms, cell.sigma, cell.df)


EFFECT_SCHEMA = {"model": pl.String, "task": pl.String, "tricks": pl.String, "n_tricks": pl.Int64,
                 "n": pl.Int64, "baseline": pl.Float64, "mean": pl.Float64, "effect": pl.Float64,
                 "ci_low": pl.Float64, "ci_high": pl.Float64, "p_value": pl.Float64, "q_value": pl.Float64,
                 "method": pl.String, "warnings": pl.String}


def effects(df: pl.DataFrame, metric: str, *, alpha: float = 0.05, logit: bool = False,
            variance: str = "pooled") -> pl.DataFrame:
    """Effect of every trick set vs its cell's baseline over seeds: one row per (model, task,
    set) with EFFECT_SCHEMA columns; q_value is BH over all rows. Cells without a baseline are skipped."""
    _check(variance)
    rows = []
    for cell in task_arms(prepare(df, metric, logit)):
        if BASELINE not in cell.arms:
            continue
        for key, arm in cell.arms.items():
            if key == BASELINE:
                continue
            part = _on_shared_seeds(cell, [key, BASELINE], variance)
            ct = estimate(part, dict(effect_coefs(key)), variance)
            rows.append({"model": cell.model, "task": cell.task, "tricks": arm.label,
                         "n_tricks": key.count("+") + 1, "n": ct.n, "baseline": float(part.arms[BASELINE].y.mean()),
                         "mean": float(part.arms[key].y.mean()), "est": ct.est, "se": ct.se, "df": ct.df,
                         "method": ct.method, "warnings": dimension_warning(key)})
    if not rows:
        return pl.DataFrame(schema=EFFECT_SCHEMA)
    return _tests(pl.DataFrame(rows), alpha).rename({"est": "effect"}).select(list(EFFECT_SCHEMA))


def _interaction_row(cell: TaskArms, key: str, variance: str) -> dict | None:
    """One combination's contrasts, or None when a single or the baseline is missing."""
    tricks = key.split("+")
    if len(tricks) < 2 or any(k not in cell.arms for k in [*tricks, BASELINE]):
        return None
    k = len(tricks)
    part = _on_shared_seeds(cell, [key, *tricks, BASELINE], variance)
    inter = estimate(part, dict(interaction_coefs(key)), variance)
    observed = estimate(part, dict(effect_coefs(key)), variance)
    singles = {t: estimate(part, dict(effect_coefs(t)), variance).est for t in tricks}
    best = max(singles, key=singles.get)
    vs_best = estimate(part, dict(effect_coefs(key, best)), variance)
    n_combo, n_single = len(cell.arms[key].by_seed), sum(len(cell.arms[t].by_seed) for t in tricks)
    hits_combo = round(cell.arms[key].collapse * n_combo)
    hits_single = round(sum(cell.arms[t].collapse * len(cell.arms[t].by_seed) for t in tricks))
    # one-sided: more collapses in the combination than its singles' rate explains
    collapse_p = float(_more_collapses_p([[hits_combo, n_combo - hits_combo], [hits_single, n_single - hits_single]]))
    return {
        "model": cell.model, "task": cell.task, "tricks": cell.arms[key].label, "n_tricks": k, "n_seeds": inter.n,
        "expected": estimate(part, {**{t: 1.0 for t in tricks}, BASELINE: -float(k)}, variance).est,
        "observed": observed.est, "est": inter.est, "se": inter.se, "df": inter.df, "sd_unit": inter.sd_unit,
        "obs_est": observed.est, "obs_se": observed.se, "obs_df": observed.df,
        "best_est": vs_best.est, "best_se": vs_best.se, "best_df": vs_best.df,
        "noise_sd": cell.sigma, "best_single": cell.arms[best].label, "best_single_effect": singles[best],
        "collapse_rate": cell.arms[key].collapse,
        "collapse_p": collapse_p if hits_combo > 0 else 1.0,
        "method": inter.method, "warnings": dimension_warning(key),
    }


_F, _S, _I, _B = pl.Float64, pl.String, pl.Int64, pl.Boolean
INTERACTION_SCHEMA = {
    "model": _S, "task": _S, "tricks": _S, "n_tricks": _I, "n_seeds": _I, "expected": _F, "observed": _F,
    "interaction": _F, "ci_low": _F, "ci_high": _F, "p_value": _F, "q_value": _F, "p_holm": _F, "delta": _F,
    "noise_sd": _F, "best_single": _S, "best_single_effect": _F, "verdict": _S, "flagged": _B, "seeds_needed": _I,
    "collapsed_only_in_combination": _B, "collapse_rate": _F, "obs_q_value": _F, "best_q_value": _F,
    "method": _S, "warnings": _S}


def verdict(alpha: float) -> pl.Expr:
    """One word per combination, first match wins (most actionable first):
    collapsed_only_in_combination (collapses more often than its singles, Holm over combinations) > harmful (observed < 0, BH q ≤ α) > negative_interaction
    (interaction < −δ, q ≤ α) > below_best_single (observed < best single's effect, BH q ≤ α) >
    synergy (interaction > δ, q ≤ α) > additive (95% CI within ±δ, or not significant with the
    power to see ±δ) > inconclusive."""
    c, d = pl.col, pl.col("delta")
    significant = c("q_value") <= alpha
    additive = ((c("ci_low") > -d) & (c("ci_high") < d)) | (
        ~significant & (c("se") <= pl.lit(float(stats.detectable_se(1.0, alpha))) * d))
    return (pl.when(c("collapsed_only_in_combination")).then(pl.lit("collapsed_only_in_combination"))
            .when((c("observed") < 0) & (c("obs_q_value") <= alpha)).then(pl.lit("harmful"))
            .when((c("interaction") < -d) & significant).then(pl.lit("negative_interaction"))
            .when((c("best_est") < 0) & (c("best_q_value") <= alpha)).then(pl.lit("below_best_single"))
            .when((c("interaction") > d) & significant).then(pl.lit("synergy"))
            .when(additive).then(pl.lit("additive"))
            .otherwise(pl.lit("inconclusive")))


def interactions(df: pl.DataFrame, metric: str, *, delta: float | None = None, alpha: float = 0.05,
                 logit: bool = False, variance: str = "pooled") -> pl.DataFrame:
    """Interaction of every multi-trick set whose singles and baseline ran in its cell, one row
    each (INTERACTION_SCHEMA). q_value: BH over all rows (the screening flag); p_holm: Holm,
    for a claim that must hold family-wise. `flagged` is docs/design.md §6's negative interaction:
    interaction < −δ with q ≤ α, or collapsed_only_in_combination. δ (`delta`, in metric
    units, logit units with logit=True) defaults to the cell's seed-to-seed noise σ: an
    interaction smaller than one seed's wobble is not worth a claim at any seed count.
    seeds_needed: seeds for a 95% CI half-width below δ at the observed variance."""
    _check(variance)
    rows = [row for cell in task_arms(prepare(df, metric, logit)) for key in cell.arms
            if (row := _interaction_row(cell, key, variance)) is not None]
    if not rows:
        return pl.DataFrame(schema=INTERACTION_SCHEMA)
    out = pl.DataFrame(rows).sort("model", "task", "n_tricks", "tricks")
    out = _tests(_tests(_tests(out, alpha), alpha, "obs_"), alpha, "best_")
    out = out.with_columns(pl.Series("collapsed_only_in_combination", stats.holm(out["collapse_p"]) <= alpha))
    d = out["noise_sd"] if delta is None else pl.Series([float(delta)] * out.height)
    need = stats.seeds_needed(out["sd_unit"], d, out["df"] / (out["n_seeds"] - 1).clip(lower_bound=1), alpha)
    out = out.with_columns(
        pl.Series("p_holm", stats.holm(out["p_value"])), d.alias("delta"), pl.col("est").alias("interaction"),
        pl.Series("seeds_needed", need).fill_nan(None).cast(pl.Int64))
    flagged = ((pl.col("interaction") < -pl.col("delta")) & (pl.col("q_value") <= alpha)).fill_null(False)
    out = out.with_columns((flagged | pl.col("collapsed_only_in_combination")).alias("flagged"),
                           verdict(alpha).alias("verdict"))
    return out.select(list(INTERACTION_SCHEMA))
