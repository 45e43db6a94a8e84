"""The built-in tiny model: a character-level Llama warm-started on the task's own generator.

It is a real `LlamaForCausalLM`, so the rollout engine and trainer take the same code path as
any Hugging Face model. A short supervised stage on the task's solutions brings its pass@1 to a
low but non-zero level, which gives GRPO non-zero groups to learn from. The weights are cached
on disk, keyed by the spec and tasks, and are reproducible from the card's seed on one machine
type only: CPU kernel sets (AVX512 vs AVX2) round differently and the warm start amplifies it
(README, "Machines and the tiny model"); runs record models.weights_digest of what they loaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from grpo_lab.models.loading import LOAD_LOCK, from_pretrained
from grpo_lab.spec.model_cards import TinySpec

CHARS = "\n" + "".join(chr(c) for c in range(32, 127))
SPECIALS = ("<pad>", "<eos>")
FORMAT_VERSION = 3  # bump when the architecture or the warm-start recipe changes


class CharCodec:
    """One token per printable ASCII character; no chat template (the compact register)."""

    def __init__(self):
        self.pad_id, self.eos_id = 0, 1
        self.stoi = {c: i + len(SPECIALS) for i, c in enumerate(CHARS)}
        self.itos = {i: c for c, i in self.stoi.items()}
        self.vocab_size = len(SPECIALS) + len(CHARS)

    def encode(self, text: str) -> list[int]:
        unknown = sorted({c for c in text if c not in self.stoi})
        if unknown:
            raise ValueError(f"tiny model's character tokenizer cannot encode {unknown!r}")
        return [self.stoi[c] for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.itos.get(int(i), "") for i in ids)

    def format_prompt(self, text: str, task: str | None = None) -> str:
        return text


def build(spec: TinySpec, codec: CharCodec) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=codec.vocab_size,
        hidden_size=spec.hidden,
        intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.heads,
        max_position_embeddings=spec.max_positions,
        pad_token_id=codec.pad_id,
        eos_token_id=codec.eos_id,
        bos_token_id=codec.eos_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(spec.seed)
    with LOAD_LOCK:
        return LlamaForCausalLM(config)


def supervised_batch(codec: CharCodec, pairs: list[tuple[str, str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (input_ids, labels) where only solution tokens and EOS carry a label."""
    seqs, labels = [], []
    for prompt, solution in pairs:
        p, s = codec.encode(prompt), codec.encode(solution) + [codec.eos_id]
        seqs.append(p + s)
        labels.append([-100] * len(p) + s)
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), codec.pad_id)
    lab = torch.full((len(seqs), width), -100)
    for i, (s, l) in enumerate(zip(seqs, labels)):
        ids[i, : len(s)] = torch.tensor(s)
        lab[i, : len(l)] = torch.tensor(l)
    return ids, lab


def probe_pass_rate(model, codec: CharCodec, tasks: list, seed: int, n: int = 64, samples: int = 4) -> float:
    """Mean reward of T=1 samples on train-split problems (the warm-start's stopping signal)."""
    from grpo_lab.rollout.torch_engine import TorchEngine

    engine = TorchEngine(model, codec.eos_id, codec.pad_id)
    rewards = []
    for task in tasks:
        probs = task.problems("train", n, seed=seed + 1)
        ro = engine.generate([codec.encode(p.prompt) for p in probs], samples, 1.0, 1.0, 16, seed=seed)
        texts = ro.texts(codec)
        rewards += [s.reward for s in task.score([probs[g] for g in ro.group], texts)]
    return sum(rewards) / len(rewards)


def warm_start(model: LlamaForCausalLM, codec: CharCodec, tasks: list, spec: TinySpec,
               say: Callable[[str], None] = lambda line: None) -> dict:
    """Supervised steps on the tasks' train-split solutions until the probe pass rate reaches
    spec.sft_target (or sft_max_steps). Returns the loss curve and probe history; `say` gets a
    line at every probe (it can take minutes on a new task)."""
    torch.manual_seed(spec.seed)
    rng = random.Random(spec.seed)
    per_task = spec.sft_check_every * spec.sft_batch // len(tasks) + 1
    opt = torch.optim.AdamW(model.parameters(), lr=spec.sft_lr, betas=(0.9, 0.98), weight_decay=0.0)
    losses, probes = [], []
    for step in range(spec.sft_max_steps):
        if step % spec.sft_check_every == 0:  # fresh problems for the next stretch of steps
            pool = [p for t in tasks for p in t.problems("train", per_task, seed=spec.seed + 1000 + step)]
            rng.shuffle(pool)
        chunk = pool[(step % spec.sft_check_every) * spec.sft_batch :][: spec.sft_batch]
        model.train()
        ids, lab = supervised_batch(codec, [(p.prompt, p.solution) for p in chunk])
        logits = model(input_ids=ids, attention_mask=(ids != codec.pad_id).long()).logits
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), lab[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # without it the warm-start spikes
        opt.step()
        losses.append(loss.item())
        if (step + 1) % spec.sft_check_every == 0:
            model.eval()
            probes.append((step + 1, probe_pass_rate(model, codec, tasks, spec.seed)))
            say(f"tiny warm start ({', '.join(t.name for t in tasks)}): step {step + 1} of at most "
                f"{spec.sft_max_steps}, probe pass@1 {probes[-1][1]:.2f} (stops at {spec.sft_target:g})")
            if probes[-1][1] >= spec.sft_target:
                break
    model.eval()
    return {"losses": losses, "probes": probes}


def task_key(t) -> str:
    """What of a task the warm start depends on; generator version 1 keeps its original spelling."""
    key = f"{t.name}/{t.register}/{t.levels}/{getattr(t, 'difficulty', None)}/{getattr(t, 'data_path', None)}"
    version = getattr(t, "generator_version", 1)  # plugin tasks need not have one
    key = key if version == 1 else f"{key}/g{version}"
    if not type(t).__module__.startswith("grpo_lab."):  # a plugin: an edited one warm-starts afresh
        from grpo_lab.tasks.registry import source_hash
        key += f"/src{source_hash(type(t))}"
    return key


def cache_key(spec: TinySpec, tasks: list) -> str:
    blob = json.dumps(
        {"spec": spec.model_dump(), "tasks": sorted(task_key(t) for t in tasks), "v": FORMAT_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def load_tiny(spec: TinySpec, tasks: list, cache_dir: Path,
              say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
              ) -> tuple[LlamaForCausalLM, CharCodec]:
    """Load the warm-started tiny model for these tasks, training and caching it on first use.
    Processes that need the same model at once wait on a lock for the one that trains it."""
    codec = CharCodec()
    folder = Path(cache_dir) / "tiny" / cache_key(spec, tasks)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        if not (folder / "config.json").exists():
            say(f"tiny warm start for {', '.join(t.name for t in tasks)}: first use on this machine, cached in {folder}")
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, a killed holder's too
            if not (folder / "config.json").exists():
                _train_and_cache(spec, tasks, codec, folder, say)
    return from_pretrained(LlamaForCausalLM, folder).eval(), codec


def _train_and_cache(spec: TinySpec, tasks: list, codec: CharCodec, folder: Path, say) -> None:
    model = build(spec, codec)
    history = warm_start(model, codec, tasks, spec, say)
    # Write beside the target and rename, so a killed process never leaves a half-written cache.
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    model.save_pretrained(tmp)
    (tmp / "warm_start.json").write_text(json.dumps({**history, "spec": spec.model_dump()}))
    try:
        os.replace(tmp, folder)
    except OSError:  # a process from before the lock won the race; its copy is identical
        shutil.rmtree(tmp, ignore_errors=True)
