"""A run config as TRL's GRPOConfig keys (trainer: trl), or the reasons it cannot be one.

Planning refuses a `trainer: trl` run whose settings TRL cannot express (RunConfig's validator
calls `trl_refusals`), and the TRL executor (trainer/trl_executor.py) builds its GRPOConfig from
`grpo_config_keys`; both read the same table, so what plans is what runs. Nothing here imports
TRL: planning stays fast and works without it installed.

Where the keys come from, in order (later wins):
  1. FIXED: what grpo-lab's trainer always does (constant LR, no top-k, the dataset in order);
  2. RULES: the run's own settings, one rule per config key, each naming the GRPOConfig keys of a
     value or None where TRL has no faithful equivalent (tests/spec/test_trl_map.py checks them);
  3. the applied tricks' declared switches (experiments/tricks.yaml `equivalents.trl`, read by
     spec/tricks.py): a trick's own settings are not mapped again by the rules, since its switch
     says what it is in TRL (gspo's inner updates are TRL's steps_per_generation, not num_iterations).
A setting that no rule maps, no trick explains and NEUTRAL does not list is refused by name: a
run never silently trains something other than its config says.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

from grpo_lab.util.dicts import flatten

# Keys the executor honours itself or that do not change what is trained: the model and its data,
# bookkeeping (checkpoints, evals made by grpo-lab's evaluator), task grading (the executor scores
# with the task grpo-lab builds from the same config), and the trainer choice itself.
NEUTRAL = ("model", "task", "prompt_register", "prompt_shots", "difficulty", "levels", "data_path", "data", "device",
           "sandbox", "checkpoint_every", "tricks", "trainer", "steps", "sampling.prompts_per_step", "eval.",
           "reward.verifier", "reward.scoring", "optim.micro_batch", "alarms.")  # grpo-lab's alarms watch TRL runs too

FIXED: dict[str, Any] = {
    "top_k": 0,  # grpo-lab samples the whole distribution (top_p only); TRL's generation default is 50
    "shuffle_dataset": False,  # the executor feeds the problems grpo-lab's curriculum draws, in order
    "scale_rewards": "group",  # grpo-lab's z-score advantages
    "loss_type": "dapo",  # token_mean: per-token losses over every token of the batch
    "lr_scheduler_type": "constant",
    "warmup_steps": 0,
}

_AGGREGATION = {"token_mean": "dapo", "seq_mean": "grpo", "token_sum_norm": "dr_grpo"}
_NORMALIZATION = {"zscore": "group", "batch_std": "batch", "mean_only": "none"}
Rule = Callable[[Any], "dict[str, Any] | None"]


def _only(value: Any, keys: dict[str, Any] | None = None) -> Rule:
    """A setting TRL matches at one value only (the keys it needs there, none by default)."""
    return lambda v: (keys or {}) if v == value else None


RULES: dict[str, Rule] = {
    "seed": lambda v: {"seed": v},
    "dtype": _only("float32", {"bf16": False, "fp16": False}),
    # vLLM colocated with training, as grpo-lab's engine runs it (one engine per training process);
    # TRL's server mode (a separate `trl vllm-serve`) is a deployment choice outside a run config
    "engine": lambda v: {"use_vllm": True, "vllm_mode": "colocate"} if v == "vllm" else {"use_vllm": False},
    "vllm.gpu_memory_utilization": lambda v: {"vllm_gpu_memory_utilization": v},
    "vllm.enable_sleep_mode": lambda v: {"vllm_enable_sleep_mode": v},
    "vllm.max_model_len": lambda v: {"vllm_max_model_length": v},
    "vllm.enforce_eager": _only(False),  # TRL builds its LLM with CUDA graphs and no switch for them
    # TRL corrects the sampler/trainer mismatch by default (sequence_mask at 3); grpo-lab only when tis_cap is set
    "vllm.tis_cap": lambda v: ({"vllm_importance_sampling_correction": False} if v is None else
                               {"vllm_importance_sampling_correction": True, "vllm_importance_sampling_clip_max": v}),
    "vllm.tis_mode": lambda v: {"vllm_importance_sampling_mode": v},  # the same four modes, by name
    "optim.lr": lambda v: {"learning_rate": v},
    "optim.betas": lambda v: {"adam_beta1": v[0], "adam_beta2": v[1]},
    "optim.weight_decay": lambda v: {"weight_decay": v},
    "optim.grad_clip": lambda v: {"max_grad_norm": 0.0 if v is None else v},  # HF Trainer: 0 clips nothing
    "optim.warmup_steps": _only(0),
    "optim.schedule": _only("constant"),
    "sampling.group_size": lambda v: {"num_generations": v},
    "sampling.group_ladder": _only(None),
    "sampling.temperature": lambda v: {"temperature": v},
    "sampling.temperature_schedule": _only(None),
    "sampling.top_p": lambda v: {"top_p": v},
    "sampling.max_new_tokens": lambda v: {"max_completion_length": v},
    "sampling.dynamic_sampling": _only(False),
    "advantage.normalization": lambda v: {"scale_rewards": _NORMALIZATION[v]} if v in _NORMALIZATION else None,
    "advantage.clip": _only(None),
    "advantage.zero_group_floor": _only(0.0),
    "reward.format": _only("none"),
    "reward.length.kind": _only("none"),
    "reward.mask_truncated": lambda v: {"mask_truncated_completions": v},
    # reward functions are TRL reward_funcs, in order, with their weights (trainer/trl_reward.py)
    "reward.function": lambda v: {"reward_weights": [1.0]} if v else {},
    "reward.functions": lambda v: {"reward_weights": [f["weight"] for f in v]} if v else {},
    "kl.beta": lambda v: {"beta": v},
    "kl.schedule": _only("fixed"),
    "kl.estimator": _only("k3"),  # TRL's per-token KL is k3
    "kl.in_reward": _only(False),
    "reference.mode": _only("frozen"),
    "loss.clip_low": lambda v: {"epsilon": v},
    "loss.clip_high": lambda v: {"epsilon_high": v},
    "loss.dual_clip": lambda v: {"delta": v},
    "loss.aggregation": lambda v: {"loss_type": _AGGREGATION[v]},
    "loss.weighting": _only("token", {"importance_sampling_level": "token"}),
    "loss.top_entropy_frac": lambda v: {"top_entropy_quantile": v},
    "loss.entropy_coef": lambda v: {"entropy_coef": v},
    # Skywork-OR1's controller (schedules.AdaptiveEntropy) is TRL's use_adaptive_entropy with these
    # bounds (TRL's entropy_coef_min is its floor, 0); trl_refusals holds it to one update per step
    "loss.entropy_schedule": lambda v: {"use_adaptive_entropy": v == "adaptive"},
    "loss.entropy_target": lambda v: {"entropy_target": v},
    "loss.entropy_coef_delta": lambda v: {"entropy_coef_delta": v},
    "loss.entropy_coef_max": lambda v: {"entropy_coef_max": v},
    "loss.off_policy_mask": lambda v: {"off_policy_mask_threshold": v},  # None: off in both
    "loss.sapo_tau_pos": lambda v: {"sapo_temperature_pos": v},  # read under loss_type sapo only, as here
    "loss.sapo_tau_neg": lambda v: {"sapo_temperature_neg": v},
    "loss.inner_updates": lambda v: {"num_iterations": v},
    "loss.mask": _only("prompt"),
    "backend.name": _only("torch"),
    # TRL's default is on (memory over time); grpo-lab keeps activations unless told (transformers 5's name)
    "backend.gradient_checkpointing": lambda v: {"activation_checkpointing": v},
    "curriculum.mode": _only("uniform"),  # the executor feeds the uniform curriculum's draws in order
    "curriculum.retire_at": _only(None),
}


@lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    from grpo_lab.spec.config import RunConfig  # here: config.py's validator imports this module

    return flatten(RunConfig().model_dump(mode="json"))


def _trick_settings(names: list[str]) -> dict[str, list[tuple[str, Any]]]:
    """Config key -> every applied trick that sets it, with its value, in the order applied."""
    from grpo_lab.spec.tricks import get_trick

    out: dict[str, list[tuple[str, Any]]] = {}
    for name in names:
        for key, value in flatten(get_trick(name).settings).items():
            out.setdefault(key, []).append((name, value))
    return out


def _json(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _switch_conflicts(names: list[str]) -> list[str]:
    """Two applied switches that set one GRPOConfig key to different values: TRL would train the
    later one only (sapo then dr_grpo: loss_type=dr_grpo, plain PPO-clip, while grpo-lab trains SAPO)."""
    out, seen = [], {}
    for name in names:
        for key, value in (trl_switch(name) or {}).items():
            if key in seen and seen[key][1] != value:
                out.append(f"tricks '{seen[key][0]}' and '{name}' set GRPOConfig {key} to {seen[key][1]!r} and "
                           f"{value!r}: TRL would train the last one only; drop one of them")
            seen[key] = (name, value)
    return out


def _overridden(key: str, value: Any, sets: list[tuple[str, Any]]) -> list[str]:
    """Each trick whose setting of `key` the resolved config no longer holds (a later trick's or
    the run's own override): its TRL switch would describe a run that is not trained."""
    by = next((f" (trick '{t}')" for t, v in reversed(sets) if _json(v) == value), "")
    return [f"setting {key}={value!r}{by} overrides trick '{trick}' ({set_to!r}): its TRL switch "
            f"no longer describes the run" for trick, set_to in sets
            if _json(set_to) != value and trl_switch(trick) is not None]


def _switch_overrides(cfg, flat: dict[str, Any], by_trick: dict, defaults: dict[str, Any]) -> list[str]:
    """A run setting changed from its default (and set by no trick) whose GRPOConfig key a trick's
    switch sets otherwise: TRL would train the switch's value (cispo with loss.aggregation=seq_mean:
    TRL's cispo aggregates over tokens). A switch describes its trick over the default settings."""
    changed = {key: RULES[key](value) or {} for key, value in flat.items()
               if key in RULES and key not in by_trick and value != defaults.get(key)}
    return [f"setting {key}={flat[key]!r} maps to GRPOConfig {gkey}={mapped[gkey]!r}, which trick '{name}' "
            f"switches to {value!r}: TRL would not train the setting"
            for name in cfg.tricks for gkey, value in (trl_switch(name) or {}).items()
            for key, mapped in changed.items() if gkey in mapped and mapped[gkey] != value]


def trl_refusals(cfg) -> list[str]:
    """One line per reason `cfg` (a RunConfig) cannot run on TRL: a trick without a TRL switch,
    two switches at odds, a setting no rule maps, a trick's setting overridden after it, a generation
    batch that does not split into its optimizer batches. [] when it can."""
    from grpo_lab.spec.tricks import get_trick

    out = []
    for name in cfg.tricks:
        if trl_switch(name) is None:
            eq = get_trick(name).equivalents
            out.append(f"trick '{name}' has no faithful TRL mapping (equivalents.trl: {eq.trl if eq else 'missing'}); "
                       "run it with trainer: grpo-lab")
    out += _switch_conflicts(list(cfg.tricks))
    by_trick = _trick_settings(list(cfg.tricks))
    defaults = _defaults()
    flat = _settings(cfg)
    out += _switch_overrides(cfg, flat, by_trick, defaults)
    for key, value in flat.items():
        if key in by_trick:
            out += _overridden(key, value, by_trick[key])
            continue
        if key in RULES:
            if RULES[key](value) is None:
                out.append(f"setting {key}={value!r} has no TRL equivalent here")
        elif value != defaults.get(key) and not key.startswith(NEUTRAL):
            out.append(f"setting {key}={value!r} has no TRL mapping")
    keys = _mapped(cfg)
    out += _vllm_refusals(cfg, keys)
    split = _split_refusal(cfg, keys)
    if keys.get("use_adaptive_entropy") and updates_per_step(keys) > 1:
        out.append(f"adaptive entropy control moves its coefficient once per step here and once per optimizer step "
                   f"in TRL ({updates_per_step(keys)} a step): run it with one update per step or trainer: grpo-lab")
    return out + [split] if split else out


def trl_switch(name: str) -> dict[str, Any] | None:
    """A catalog trick's TRL switch as GRPOConfig keys, None where it has none."""
    from grpo_lab.spec.tricks import get_trick

    eq = get_trick(name).equivalents
    return None if eq is None else eq.trl_keys


def _mapped(cfg) -> dict[str, Any]:
    """FIXED, then the rules of the settings no trick sets, then the tricks' switches (later wins);
    a refused rule or switch adds nothing (trl_refusals names it)."""
    by_trick = _trick_settings(list(cfg.tricks))
    keys = dict(FIXED)
    for key, value in _settings(cfg).items():
        if key in RULES and key not in by_trick:
            keys.update(RULES[key](value) or {})
    for name in cfg.tricks:
        keys.update(trl_switch(name) or {})
    return keys


def _settings(cfg) -> dict[str, Any]:
    """The run config's flat settings the mapping reads: the vllm section only under engine vllm
    (a shared base may carry it for runs on the torch engine, where it changes nothing)."""
    flat = flatten(cfg.model_dump(mode="json"))
    return flat if cfg.engine == "vllm" else {k: v for k, v in flat.items() if not k.startswith("vllm.")}


def _vllm_refusals(cfg, keys: dict[str, Any]) -> list[str]:
    """TRL's colocated vLLM loads the model and its tokenizer from the policy's folder; the tiny
    model's characters are no tokenizer vLLM can load (grpo-lab's own engine feeds it token ids)."""
    from grpo_lab.spec.model_cards import load_card

    if not keys.get("use_vllm") or load_card(cfg.model).kind != "tiny":
        return []
    return ["engine vllm under TRL loads the model's own tokenizer, and the tiny model has none vLLM can load: "
            "run it with engine: torch or trainer: grpo-lab"]


def _split_refusal(cfg, keys: dict[str, Any]) -> str | None:
    """Why one generation batch does not split into steps_per_generation equal optimizer batches
    (TRL raises it at run time), None when it does."""
    rows = cfg.sampling.prompts_per_step * keys.get("num_generations", cfg.sampling.group_size)
    per_generation = keys.get("steps_per_generation", 1)
    if rows % per_generation:
        return (f"prompts_per_step x group_size ({rows}) does not split into steps_per_generation "
                f"({per_generation}) equal optimizer batches")
    return None


def grpo_config_keys(cfg) -> dict[str, Any]:
    """GRPOConfig keyword arguments for `cfg` (a RunConfig that trl_refusals passes), with the batch
    and step counts: one grpo-lab step = one generation batch of prompts_per_step x group_size
    completions, trained on by num_iterations x steps_per_generation optimizer steps."""
    problems = trl_refusals(cfg)
    if problems:
        raise ValueError(problems[0])
    keys = _mapped(cfg)
    rows = cfg.sampling.prompts_per_step * keys["num_generations"]
    per_generation = keys.get("steps_per_generation", 1)
    keys.update(per_device_train_batch_size=rows // per_generation, gradient_accumulation_steps=1,
                steps_per_generation=per_generation,
                max_steps=cfg.steps * updates_per_step(keys))
    return keys


def updates_per_step(keys: dict[str, Any]) -> int:
    """TRL optimizer steps (its global steps) per grpo-lab step, for GRPOConfig keys."""
    return keys.get("num_iterations", 1) * keys.get("steps_per_generation", 1)
