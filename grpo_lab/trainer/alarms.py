"""Alarms: the study's "monitoring that saves compute", as detectors over the step metrics.

Each detector is a pure function `detect(past, now, cfg) -> Event | None`:
  past: earlier steps' watched metrics, oldest first (list of {key: float}; a key may be missing),
  now:  this step's metrics (all of them),
  cfg:  the `alarms:` config section (AlarmsConfig), which holds every threshold.
`AlarmMonitor` keeps the history, holds detectors back for `warmup` steps (all but `nan`), keeps
a kind quiet for `cooldown` steps after it fired, and appends each event to events.jsonl.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from grpo_lab.rundir import EVENTS, METRICS, RunDir
from grpo_lab.spec.config import ALARM_KINDS, AlarmsConfig
from grpo_lab.trainer.checkpoint import MetricsLog

REPEAT_N = 4  # character n-gram length of `repetition_rate`
# Constants, not `alarms:` settings: every config field is part of every run id, and a new field
# would make every finished run a new one.
# Low diversity has reached the advantages when this share of groups has one reward (preflight's
# red rule). A short-answer task repeats answers while it learns (tiny-math: ratio ~0.4, ~5%).
COLLAPSED_GROUPS = 0.5
# Diversity and entropy falling while the smoothed reward is this far above its warmup level is the
# policy sharpening on what it learned (healthy tiny-logic: entropy 1.4 -> 0.5, reward 0.2 ->
# 0.45), not the stall the study warns of: those two alarms fire only without it.
LEARNING_GAIN = 0.05
MAD_TO_SIGMA = 1.4826  # MAD of a normal sample times this estimates its standard deviation


@dataclass(frozen=True)
class Event:
    kind: str
    value: float
    threshold: float
    message: str


def repetition_rate(texts: list[str], n: int = REPEAT_N) -> float:
    """Fraction of repeated character n-grams, pooled over completions (n = REPEAT_N = 4).

    rate = sum_i (|L_i| - |set(L_i)|) / sum_i |L_i|, with L_i the n-grams of text i.
    'abababab' -> 5 4-grams, 2 distinct -> 0.6. Texts shorter than n add nothing; 0.0 if none
    has an n-gram. Characters suit the char-level tiny model and still catch looping BPE text:
    ordinary prose of 1,000 characters scores about 0.15, a loop approaches 1.
    """
    total = repeated = 0
    for text in texts:
        grams = [text[i:i + n] for i in range(len(text) - n + 1)]
        total += len(grams)
        repeated += len(grams) - len(set(grams))
    return repeated / total if total else 0.0


def _series(past: list[dict], key: str, last: int | None = None) -> list[float]:
    """Finite values of `key` in the last `last` steps (all steps if None): O(last), not O(run)."""
    if last is not None:
        past = past[-last:] if last > 0 else []
    return [r[key] for r in past if key in r and math.isfinite(r[key])]


def _level(past: list[dict], now: dict, key: str, n: int) -> float | None:
    """Mean of `key` over the last n steps, this one included; None if this step lacks it."""
    if key not in now:
        return None
    return statistics.fmean(_series(past, key, n - 1) + [now[key]])


def _spike(past, now, cfg: AlarmsConfig, key: str, kind: str, mads: float, min_jump: float) -> Event | None:
    """Fire when now[key] > median + max(mads * 1.4826 * MAD, min_jump) over the last `window` steps."""
    values = _series(past, key, cfg.window)
    if key not in now or len(values) < 2:
        return None
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    threshold = med + max(mads * MAD_TO_SIGMA * mad, min_jump)
    if now[key] > threshold:
        return Event(kind, now[key], threshold, f"{key} jumped to {now[key]:.4g} (running median {med:.4g})")
    return None


def adv_std_spike(past, now, cfg):
    """Within-group advantage std jumps (study: "a sudden std jump -> stop and inspect"). Z-scored
    groups have std <= 1, so a jump past min_jump comes from the share of varied groups leaping or
    from shaping added after normalisation; other normalisers follow the reward's scale."""
    return _spike(past, now, cfg, "adv/group_std_mean", "adv_std_spike",
                  cfg.adv_std_spike_mads, cfg.adv_std_spike_min_jump)


def loss_spike(past, now, cfg):
    return _spike(past, now, cfg, "loss/total", "loss_spike", cfg.loss_spike_mads, cfg.loss_spike_min_jump)


def _learning(past, now, cfg) -> bool:
    """The smoothed reward is at least LEARNING_GAIN above its mean over the warmup steps."""
    early = _series(past[: max(cfg.warmup, 1)], "reward/mean")
    level = _level(past, now, "reward/mean", cfg.smooth)
    return bool(early) and level is not None and level - statistics.fmean(early) >= LEARNING_GAIN


def diversity_collapse(past, now, cfg):
    """Distinct answers per group, averaged over `smooth` steps, below unique_answer_min (0.6),
    while at least COLLAPSED_GROUPS of the groups have one reward (same smoothing): a low ratio
    alone fired on every step of healthy short-answer runs, whose groups repeat answers yet still
    disagree on reward. Without the zero-variance metric the ratio decides alone. Quiet while the
    run is learning (`_learning`): sharpening on solved problems also ties groups."""
    level = _level(past, now, "diversity/unique_answer_ratio", cfg.smooth)
    flat = _level(past, now, "reward/zero_std_frac", cfg.smooth)
    if (level is not None and level < cfg.unique_answer_min and (flat is None or flat >= COLLAPSED_GROUPS)
            and not _learning(past, now, cfg)):
        tied = "" if flat is None else f", {flat:.0%} of groups with one reward"
        return Event("diversity_collapse", level, cfg.unique_answer_min,
                     f"unique-answer ratio {level:.2f} over {cfg.smooth} steps{tied}: advantages collapse to zero")
    return None


def entropy_collapse(past, now, cfg):
    """Entropy below max(entropy_frac * early, entropy_floor); early = mean over the warmup steps.
    Quiet while the run is learning (`_learning`): a learning policy grows confident."""
    early = _series(past[: max(cfg.warmup, 1)], "entropy/mean")
    if "entropy/mean" not in now or not early or _learning(past, now, cfg):
        return None
    value, early_mean = now["entropy/mean"], statistics.fmean(early)
    threshold = max(cfg.entropy_frac * early_mean, cfg.entropy_floor)
    if value < threshold:
        return Event("entropy_collapse", value, threshold,
                     f"entropy {value:.3g} fell below {threshold:.3g} (early {early_mean:.3g})")
    return None


def kl_explosion(past, now, cfg):
    """KL, averaged over `smooth` steps, above min(kl_max, max(kl_median_multiple * median, kl_min)),
    the median over the `window` steps before. Smoothing: an explosion lasts, a one-step blip of a
    small batch does not."""
    level = _level(past, now, "kl/mean", cfg.smooth)
    values = _series(past, "kl/mean", cfg.window)
    if level is None or not values:
        return None
    med = statistics.median(values)
    threshold = min(cfg.kl_max, max(cfg.kl_median_multiple * med, cfg.kl_min))
    if level > threshold:
        return Event("kl_explosion", level, threshold,
                     f"KL {level:.3g} over {cfg.smooth} steps (running median {med:.3g})")
    return None


def reward_cliff(past, now, cfg):
    """Smoothed reward (mean of `smooth` steps) lost `reward_drop` of its best level in the last
    `window` steps, and at least reward_drop_min: a sharp fall after a plateau, not noise around a
    low level nor a slow decline."""
    level = _level(past, now, "reward/mean", cfg.smooth)
    rewards = _series(past, "reward/mean", cfg.window)
    if level is None or len(rewards) < cfg.smooth:
        return None
    k = cfg.smooth
    best = max(statistics.fmean(rewards[i - k:i]) for i in range(k, len(rewards) + 1))
    threshold = min(best * (1 - cfg.reward_drop), best - cfg.reward_drop_min)
    if level < threshold:
        return Event("reward_cliff", level, threshold,
                     f"smoothed reward fell to {level:.3g} from a plateau of {best:.3g}")
    return None


def repetition(past, now, cfg):
    """Repeated character n-grams, averaged over `smooth` steps, above repetition_max: a loop
    lasts, while one odd completion among two-character answers (tiny-logic) read as 67% at once."""
    value = _level(past, now, "diversity/repetition", cfg.smooth)
    if value is not None and value > cfg.repetition_max:
        return Event("repetition", value, cfg.repetition_max,
                     f"{value:.0%} of character {REPEAT_N}-grams in completions are repeats over {cfg.smooth} steps")
    return None


def nan(past, now, cfg):
    bad = sorted(k for k, v in now.items() if isinstance(v, float) and not math.isfinite(v))
    if bad:
        return Event("nan", float(len(bad)), 0.0, f"non-finite metrics: {', '.join(bad[:8])}")
    return None


DETECTORS = {f.__name__: f for f in (adv_std_spike, diversity_collapse, entropy_collapse, kl_explosion,
                                     reward_cliff, repetition, loss_spike, nan)}
assert tuple(DETECTORS) == ALARM_KINDS, "config.ALARM_KINDS and the detectors must agree"
WATCHED = ("adv/group_std_mean", "loss/total", "diversity/unique_answer_ratio", "entropy/mean",
           "kl/mean", "reward/mean", "reward/zero_std_frac", "diversity/repetition")


class AlarmMonitor:
    """Runs the detectors each step; events go to out_dir/events.jsonl.

    On resume the history is rebuilt from metrics.jsonl and the cooldowns from events.jsonl, both
    cut back to `start_step`, so a resumed run raises exactly the alarms the uninterrupted one would.
    """

    def __init__(self, cfg: AlarmsConfig, out_dir: Path, start_step: int):
        self.cfg = cfg
        self.path = RunDir(out_dir) / EVENTS
        self.history = [{k: r[k] for k in WATCHED if k in r}
                        for r in _read(RunDir(out_dir) / METRICS, start_step)]
        events = _read(self.path, start_step)
        self.path.write_text("".join(json.dumps(e) + "\n" for e in events))
        self.last_fired = {e["kind"]: e["step"] for e in events}
        self.counts = {k: sum(e["kind"] == k for e in events) for k in ALARM_KINDS}

    def observe(self, step: int, metrics: dict) -> list[Event]:
        """Run the detectors on this step's metrics, log what fired, then remember the step."""
        fired = []
        for kind, detect in DETECTORS.items():
            if kind != "nan" and len(self.history) < self.cfg.warmup:
                continue
            if step - self.last_fired.get(kind, -math.inf) < self.cfg.cooldown:
                continue
            event = detect(self.history, metrics, self.cfg)
            if event is not None:
                fired.append(event)
                self.last_fired[kind] = step
                self.counts[kind] += 1
        if fired:
            with self.path.open("a") as f:
                f.writelines(json.dumps({"step": step, **asdict(e)}) + "\n" for e in fired)
        self.history.append({k: float(metrics[k]) for k in WATCHED if k in metrics})
        return fired

    def stop_reason(self, step: int, fired: list[Event]) -> str | None:
        """'<kind> at step N' for the first fired kind listed in stop_on, else None. A reward that
        is NaN stops the run whatever stop_on says: every step after it trains on a broken signal."""
        kind = next((e.kind for e in fired if e.kind in self.cfg.stop_on), None)
        if kind is None and any(e.kind == "nan" and "reward/" in e.message for e in fired):
            bad = next(e.message for e in fired if e.kind == "nan")
            return f"nan reward at step {step} ({bad.removeprefix('non-finite metrics: ')})"
        return f"{kind} at step {step}" if kind else None


def _read(path: Path, keep_below: int) -> list[dict]:
    """The JSON lines of `path` whose step is below keep_below (a torn last line is dropped)."""
    if not path.exists():
        return []
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    return [json.loads(ln) for ln in lines if MetricsLog._step(ln) < keep_below]
