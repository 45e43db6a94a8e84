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
from grpo_lab.spec.sections import (  # noqa: F401  (re-exported: the sections are part of this module's API)
    ALARM_KINDS,
    RESERVED_REWARD_METRICS,
    AdvantageConfig,
    AlarmsConfig,
    CurriculumConfig,
    EvalConfig,
    KLConfig,
    LengthConfig,
    LossConfig,
    OptimConfig,
    ReferenceConfig,
    RewardConfig,
    SamplingConfig,
    TrainBackendConfig,
    VLLMConfig,
)
from grpo_lab.spec.sources import TASK_REWARD, DataConfig
from grpo_lab.spec.tricks import apply_tricks
from grpo_lab.tasks import TASKS, check_task
from grpo_lab.tasks.registry import grading_version
from grpo_lab.util.dicts import deep_merge, nest
from grpo_lab.util.validate import Strict, validate
from grpo_lab.util.yamlio import ConfigError, load_yaml


class RunConfig(Strict):
    """One training run: what it trains on and every knob of the trainer, by section."""

    model: str = Field("tiny", description="model card name, Hugging Face id (org/name) or local folder")
    task: str | list[str] = Field(
        "math", description="task, or several mixed: built-in, rg:<dataset>, entry point or 'module:Class'")
    prompt_register: Literal["compact", "natural"] | None = Field(
        None, description="prompt style: compact (character-level) or natural (chat); None: the model card's")
    prompt_shots: int = Field(
        0, ge=0, le=8, description="solved training problems shown before every prompt (training, eval, preflight) "
                                   "as earlier turns of the chat: a format demonstration for a chat model that "
                                   "never writes the answer marks strict grading reads (natural register only)")
    difficulty: int | None = Field(None, description="train and test on this one difficulty level; None: all levels")
    levels: int | None = Field(None, ge=1, description="use levels 0..levels-1 of the task; None: all")
    data_path: str | None = Field(
        None, description="data file of the task's own format; '{split}' in it names one file per split")
    data: DataConfig | None = Field(None, description="a dataset in the user's format and field names (tasks/data.py)")
    seed: int = Field(0, ge=0, description="seed of sampling, data order and initialisation (0 or more)")
    steps: int = Field(100, ge=1, description="training steps (one batch of rollouts and its updates each)")
    device: str = Field("auto", description="torch device: auto (CUDA if available, else CPU), cpu, cuda, cuda:1 ...")
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="dtype of the policy weights")
    head_precision: Literal["weights", "float32"] = Field(
        "weights", description="the LM head's logits in the weights' dtype, or in float32 from them for the torch "
                               "sampler and the trainer alike (ScaleRL's fp32 head; only acts under bfloat16/float16)")
    engine: Literal["torch", "vllm"] = Field(
        "torch", description="rollout engine: the torch sampler, or vLLM (the vllm section)")
    sandbox: Literal["bwrap", "unsafe-local"] = Field(
        "bwrap", description="how model-written programs (code tasks) and third-party scorers of model answers "
        "(rg:<dataset>, math-verify) are isolated; unsafe-local is for trusted models only")
    checkpoint_every: int = Field(25, ge=1, description="steps between checkpoints (a run resumes from the last)")
    tricks: list[str] = Field([], description="catalog tricks applied over this config, in order (`grpo-lab tricks`)")
    trainer: Literal["grpo-lab", "trl"] = Field(
        "grpo-lab", description="who trains the run: grpo-lab's GRPO loop, or TRL's GRPOTrainer (trl==1.16, "
                                "spec/trl_map.py); a trick or setting TRL cannot express is refused at plan time")
    sampling: SamplingConfig = Field(SamplingConfig(), description="rollouts per step")
    advantage: AdvantageConfig = Field(AdvantageConfig(), description="rewards to advantages")
    reward: RewardConfig = Field(RewardConfig(), description="reward, shaping and masks")
    kl: KLConfig = Field(KLConfig(), description="KL penalty")
    reference: ReferenceConfig = Field(ReferenceConfig(), description="reference model of the KL")
    loss: LossConfig = Field(LossConfig(), description="policy loss")
    optim: OptimConfig = Field(OptimConfig(), description="optimizer and LR schedule")
    backend: TrainBackendConfig = Field(TrainBackendConfig(), description="training backend (torch or DeepSpeed)")
    curriculum: CurriculumConfig = Field(CurriculumConfig(), description="which problems each step samples")
    eval: EvalConfig = Field(EvalConfig(), description="held-out evaluation")
    alarms: AlarmsConfig = Field(AlarmsConfig(), description="training-health detectors")
    vllm: VLLMConfig = Field(VLLMConfig(), description="vLLM engine settings")

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
        if self.prompt_shots:
            card = load_card(self.model)
            if self.register != "natural" or not card.chat_template or card.kind == "tiny":
                raise ValueError(f"prompt_shots: model {self.model} reads {self.register} prompts without a chat; "
                                 "shots are chat turns: set prompt_shots: 0")
        if self.backend.name == "deepspeed" and self.dtype == "float16":
            raise ValueError("backend deepspeed trains in float32 or bfloat16 (float16 loss scaling is untested here)")
        if self.trainer == "trl":
            from grpo_lab.spec.trl_map import trl_refusals

            problems = trl_refusals(self)
            if problems:  # one line: the first reason, and how many more there are
                more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
                raise ValueError(f"trainer trl: {problems[0]}{more}")
        return self

    @property
    def register(self) -> str:
        """The prompt register the run uses: its own, else its model card's."""
        return self.prompt_register or load_card(self.model).prompt_register

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
        graded = {t: v for t in self.tasks if (v := grading_version(t)) != 1}
        if graded:
            dump["grading_versions"] = graded
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
_LATER_DEFAULTS = {"sandbox": "bwrap", "data": None, "trainer": "grpo-lab", "head_precision": "weights",
                   "prompt_shots": 0}
_LATER_SECTION_DEFAULTS = {
    "reward": {"function": None, "functions": [], "verifier": "extract", "scoring": "strict", "combine": "sum"},
    "loss": {"top_entropy_frac": 1.0, "cov_frac": 2e-4, "clip_cov_lb": 1.0, "clip_cov_ub": 5.0, "kl_cov_coef": 1.0,
             "sapo_tau_pos": 1.0, "sapo_tau_neg": 1.05, "off_policy_mask": None, "entropy_schedule": "fixed",
             "entropy_target": 0.2, "entropy_coef_delta": 0.005, "entropy_coef_max": 1.0},
    "vllm": {"tis_mode": "token_truncate"},
    "curriculum": {"retire_at": None},
    "sampling": {"staleness": 0},
}


def comparable(dump: dict) -> dict:
    """A config dump without the settings that cannot change a run's results, so configs written
    before such a setting existed compare equal to today's (and keep their run ids): the default
    code sandbox scores honest programs exactly as the old one did."""
    out = {k: v for k, v in dump.items() if k not in _LATER_DEFAULTS or v != _LATER_DEFAULTS[k]}
    for section, later in _LATER_SECTION_DEFAULTS.items():
        if isinstance(out.get(section), dict):
            out[section] = {k: v for k, v in out[section].items() if k not in later or v != later[k]}
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
