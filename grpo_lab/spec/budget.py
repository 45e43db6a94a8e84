"""GPU-hour estimates before a run, their correction by measured runs, and the budget-tier presets.

The estimate counts FLOPs per phase of a GRPO run and divides by what the hardware achieves in
that phase (peak x utilisation, experiments/hardware/*.yaml): decode is memory-bound and reaches
a small fraction of peak, training a large one. It is a planning figure that ignores everything
but FLOPs (stragglers, weight sync, rewards, start-up); `calibrate` corrects it by what finished
runs of the same model measured: each phase by its median measured/estimated ratio, plus the
median fixed cost of a run (process start, model load and warm start, checkpoints, logging).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

import yaml

from grpo_lab.spec.arm import arm_model
from grpo_lab.spec.config import RunConfig
from grpo_lab.spec.matrix import TIERS, Cell, expand, parse_matrix
from grpo_lab.spec.model_cards import Hardware, ModelCard, load_card, load_hardware, nearest_card
from grpo_lab.spec.presets import Presets, get_tier, load_presets, tier_notes, tier_tricks
from grpo_lab.util.dicts import deep_merge
from grpo_lab.util.paths import find_all
from grpo_lab.util.yamlio import ConfigError, load_yaml, suggest

# Mean response length as a fraction of max_new_tokens. Reasoning responses spread over the
# budget and drift with training (the study saw code outputs grow from 400 to 1,500 tokens), and a
# padded batch costs more than its mean. 0.6 is a planning value, not a measurement: calibration
# with measured runs absorbs the difference.
RESPONSE_FILL = 0.6
# Prompt tokens per prompt. Compact (character-level, the tiny model): measured means of the task
# generators' prompts plus BOS. Natural: a GSM8K/MBPP-style question in a chat template.
COMPACT_PROMPT_TOKENS = {"math": 8, "code": 30, "logic": 12}
COMPACT_DEFAULT, NATURAL_PROMPT_TOKENS = 20, 150
PHASES = ("sampling", "reference", "training", "eval", "fixed")  # fixed: per run, whatever its size


@dataclass(frozen=True)
class Estimate:
    """Device-hours per phase of one run (GPU-hours on GPUs, core-hours on the CPU profile)."""

    phases: dict[str, float]
    devices: int  # devices one run holds (the model card's `gpus`)
    unit: str
    calibrated_from: int = 0  # finished runs whose measurements corrected it (0: FLOPs only)

    @property
    def total(self) -> float:
        return sum(self.phases.values())

    @property
    def wall_hours(self) -> float:
        """Wall-clock hours when the run keeps all its devices busy."""
        return self.total / self.devices


def fmt_hours(hours: float) -> str:
    """Hours for people: three significant digits below 10 (CPU plans are minutes), whole above."""
    return f"{hours:.3g}" if hours < 10 else f"{hours:,.0f}"


def prompt_length(cfg: RunConfig) -> float:
    """Prompt tokens of the run's register: the register, not the task, sets the order of magnitude;
    each of prompt_shots adds about one prompt (a solved problem's prompt and its short solution)."""
    if cfg.register == "natural":
        return NATURAL_PROMPT_TOKENS * (1 + cfg.prompt_shots)
    return statistics.fmean(COMPACT_PROMPT_TOKENS.get(t, COMPACT_DEFAULT) for t in cfg.tasks)


def estimate(cfg: RunConfig, card: ModelCard, hardware: Hardware, prompt_tokens: int | None = None) -> Estimate:
    """Device-hours of one run, per phase, for a model of N = card.params parameters.

    sampling: 2N per generated token + 2N per prompt token (each prompt prefilled once per group);
    reference: 2N per prompt+response token when a reference model exists (same rule as
    trainer.setup.needs_reference); training: 6N per prompt+response token per inner update, plus
    a 2N policy forward for old log-probs when there are several updates and another for the KL
    in the reward (as trainer.grpo does); eval: sampling of eval.problems x eval.samples
    per task at the base eval, every eval.every steps and at the end. Dynamic G is counted at its
    starting G, and DAPO refills are not counted.
    """
    if card.params <= 0:
        raise ConfigError(f"model '{card.name}' has no card, so no parameter count{nearest_card(card.name)}; "
                          "if it is the model you mean, give it a card in experiments/models/ with `params:` so "
                          "its runs can be budgeted")
    n, s, e = float(card.params), cfg.sampling, cfg.eval
    prompt = prompt_tokens if prompt_tokens is not None else prompt_length(cfg)
    response = s.max_new_tokens * RESPONSE_FILL
    generated = s.prompts_per_step * s.group_size * response * cfg.steps
    prefilled = s.prompts_per_step * prompt * cfg.steps
    sequences = s.prompts_per_step * s.group_size * (prompt + response) * cfg.steps
    evals = 1 + cfg.steps // e.every + (cfg.steps % e.every > 0)
    eval_tokens = evals * len(cfg.tasks) * e.problems * (e.samples * response + prompt)
    with_reference = cfg.kl.beta > 0 or cfg.kl.schedule == "adaptive"
    updates = cfg.loss.inner_updates
    policy_forwards = (updates > 1) + (cfg.kl.in_reward and with_reference)
    flops = {
        "sampling": 2 * n * (generated + prefilled),
        "reference": 2 * n * sequences if with_reference else 0.0,
        "training": (6 * updates + 2 * policy_forwards) * n * sequences,
        "eval": 2 * n * eval_tokens,
    }
    rate = {"sampling": hardware.mfu_sampling, "eval": hardware.mfu_sampling,
            "reference": hardware.mfu_training, "training": hardware.mfu_training}
    phases = {k: f / (hardware.peak_flops * rate[k]) / 3600 for k, f in flops.items()}
    return Estimate(phases=phases | {"fixed": 0.0}, devices=card.gpus, unit=hardware.unit)


@dataclass(frozen=True)
class Measured:
    """One finished run: its FLOPs estimate and the device-hours it took, in the same phases."""

    estimate: Estimate
    phases: dict[str, float]  # PHASES -> measured device-hours; "fixed" is the rest of the run's hours


@dataclass(frozen=True)
class Calibration:
    """How measured runs of one model correct its FLOPs estimates (see `calibrate`)."""

    ratios: dict[str, float]  # phase -> median measured/estimated
    fixed: float  # median device-hours of a run outside the estimated phases
    runs: int

    def describe(self, unit: str) -> str:
        moved = ", ".join(f"{p} x{r:.3g}" for p, r in self.ratios.items() if r != 1.0)
        return f"calibrated from {self.runs} finished runs: {moved or 'phases as estimated'}, " \
               f"plus {fmt_hours(self.fixed)} {unit} fixed per run"


def fit_calibration(measured: list[Measured]) -> Calibration | None:
    """Per phase p: r_p = median_i(measured_i[p] / estimate_i[p]) over runs where the estimate is
    positive (1 where none is); fixed = median_i(measured_i["fixed"]). Medians, so one stalled or
    contended run does not drag every later plan; None without a measured run."""
    if not measured:
        return None
    ratios = {}
    for phase in PHASES[:-1]:
        pairs = [(m.estimate.phases[phase], m.phases.get(phase, 0.0)) for m in measured]
        usable = [got / est for est, got in pairs if est > 0]
        ratios[phase] = statistics.median(usable) if usable else 1.0
    return Calibration(ratios, statistics.median(m.phases.get("fixed", 0.0) for m in measured), len(measured))


def calibrate(est: Estimate, calibration: Calibration | None) -> Estimate:
    """`est` with each phase scaled by its ratio and the fixed per-run cost added."""
    if calibration is None:
        return est
    phases = {p: est.phases[p] * calibration.ratios.get(p, 1.0) for p in PHASES[:-1]}
    return replace(est, phases=phases | {"fixed": calibration.fixed}, calibrated_from=calibration.runs)


def calibration_key(model: str, trainer: str = "grpo-lab") -> str:
    """What a calibration is kept under: the model, and the trainer when it is not grpo-lab's own.
    On the tiny model TRL's GRPOTrainer took 1.3x to 8x grpo-lab's rollout and train seconds (6 to
    16 new tokens) and a tenth of its setup: one model's runs under two trainers are two
    calibrations, not one average."""
    return arm_model(model, trainer)  # the arm's model label: the report's rows and the plan's say the same


def estimate_cells(cells: list[Cell], hardware: Hardware,
                   calibrations: dict[str, Calibration] | None = None) -> list[Estimate]:
    """One estimate per cell of one expansion, computed once per (model, task, trick set):
    within an expansion only the seed differs between those cells, and it costs nothing.
    ``calibrations`` (model -> Calibration) corrects the cells of the models it names."""
    cache: dict[tuple, Estimate] = {}
    out = []
    for c in cells:
        key = (c.model, c.task, c.tricks)
        if key not in cache:
            raw = estimate(c.shared, load_card(c.shared.model), hardware)
            cache[key] = calibrate(raw, (calibrations or {}).get(calibration_key(c.shared.model, c.shared.trainer)))
        out.append(cache[key])
    return out


# ---- budget-tier presets (docs/study.md "Budget tiers"; the tiers are data: experiments/presets.yaml) ----

def _scale_base(model: str, task: str, hardware: Hardware, presets: Presets) -> dict:
    """The run settings a preset starts from: the shipped config for this model and task
    (experiments/configs/, e.g. the tiny model's), else the study's scale for a large model."""
    for path in [p for folder in find_all("experiments", "configs") for p in sorted(folder.glob("*.yaml"))]:
        data, _ = load_yaml(path)
        if isinstance(data, dict) and data.get("model") == model and data.get("task") == task:
            return {k: v for k, v in data.items() if k not in ("model", "task", "seed", "tricks")}
    return deep_merge(presets.scale, presets.scale_on_gpu if hardware.kind == "gpu" else {})


def _matrix_hours(matrix: dict, hardware: Hardware) -> tuple[int, float]:
    cells = expand(parse_matrix(matrix))
    return len(cells), sum(e.total for e in estimate_cells(cells, hardware))


def _fit_steps(matrix: dict, limit: float, hardware: Hardware, min_steps: int) -> int:
    """The base's steps, or fewer (not below min_steps), so that the matrix's estimate fits `limit`.
    Cost is close to linear in steps (evals add a stepwise term): scale once, then trim 5% at a time."""
    def hours(steps: int) -> float:
        return _matrix_hours(deep_merge(matrix, {"base": {"steps": steps}}), hardware)[1]

    start = matrix["base"]["steps"]
    floor, total = min(min_steps, start), hours(start)
    steps = start if total <= limit else max(floor, int(start * limit / total))
    while steps > floor and hours(steps) > limit:
        steps = max(floor, int(steps * 0.95))
    return steps


def _preset(tier: str, model: str, task: str, hardware: str) -> tuple[dict, list[str]]:
    if tier not in TIERS:
        raise ConfigError(f"unknown tier '{tier}'{suggest(tier, TIERS)}; tiers: {', '.join(TIERS)} (GPU-hours)")
    hw, presets = load_hardware(hardware), load_presets()
    spec = get_tier(presets, tier)
    base = deep_merge(_scale_base(model, task, hw, presets), spec.base)
    matrix = {"name": f"preset-{tier}-{model}-{task}", "models": [model], "tasks": [task],
              "seeds": list(range(spec.seeds)), "tricks": tier_tricks(spec, task), "base": base,
              "budget": {"tier": tier, "hardware": hardware}}
    start, limit = base["steps"], TIERS[tier]
    base["steps"] = _fit_steps(matrix, limit, hw, presets.min_steps)
    cells, hours = _matrix_hours(matrix, hw)
    if hours > limit:
        fit = (f"steps: at the floor of {base['steps']} the {cells} cells still cost {fmt_hours(hours)} > {limit:,.0f} "
               f"{hw.unit}: this plan does NOT fit; use a smaller model or fewer tricks or seeds")
    elif base["steps"] == start:
        fit = f"steps: {start} as configured; {cells} cells cost {fmt_hours(hours)} of {limit:,.0f} {hw.unit} on {hw.name}"
    else:
        fit = (f"steps: scaled from {start} to {base['steps']} so that {cells} cells fit: "
               f"{fmt_hours(hours)} of {limit:,.0f} {hw.unit} on {hw.name}")
    return matrix, [f"tier {tier} (docs/study.md): {spec.text}", fit, *tier_notes(spec, task)]


def preset(tier: str, model: str, task: str, hardware: str = "h800") -> dict:
    """The matrix dict of a budget tier (100 / 1k / 10k GPU-hours) for one model and task,
    following docs/study.md "Budget tiers", with steps chosen so that its estimate fits the tier."""
    return _preset(tier, model, task, hardware)[0]


def preset_yaml(tier: str, model: str, task: str, hardware: str = "h800") -> str:
    """The preset as a matrix YAML file, its header comments saying how steps were chosen."""
    matrix, notes = _preset(tier, model, task, hardware)
    header = f"# Generated by `grpo-lab preset {tier} --model {model} --task {task} --hardware {hardware}`.\n"
    body = yaml.safe_dump(matrix, sort_keys=False, default_flow_style=None, width=120)
    return header + "".join(f"# {n}\n" for n in notes) + body
