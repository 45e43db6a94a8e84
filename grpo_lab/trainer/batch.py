"""From a Rollout to training tensors, and teacher-forced log-probs of the completions.

Layout of a row: [left pad | prompt | completion | right pad]. Positions come from the
attention mask, as in generation, so the trained and the sampled distributions match.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass

import torch

from grpo_lab.rollout.base import Rollout
from grpo_lab.trainer.head import chosen_logprobs


@dataclass
class Batch:
    input_ids: torch.Tensor  # [B, P + C]
    attention_mask: torch.Tensor  # [B, P + C]
    position_ids: torch.Tensor  # [B, P + C]
    prompt_width: int  # P
    completion: torch.Tensor  # [B, C] completion token ids (pad beyond length)
    completion_mask: torch.Tensor  # [B, C] 1 on real completion tokens
    engine_logp: torch.Tensor  # [B, C] the engine's sampling log-probs

    @property
    def tokens(self) -> int:
        return int(self.attention_mask.sum())

    def rows(self, sl: slice) -> "Batch":
        """A micro-batch of rows, trimmed to its own widest prompt and completion."""
        att = self.attention_mask[sl]
        P = self.prompt_width
        first = int((att[:, :P].sum(0) > 0).nonzero().min()) if P else 0
        C = max(1, int(self.completion_mask[sl].sum(1).max()))
        cols = slice(first, P + C)
        return Batch(self.input_ids[sl, cols], att[:, cols], self.position_ids[sl, cols], P - first,
                     self.completion[sl, :C], self.completion_mask[sl, :C], self.engine_logp[sl, :C])


def build_batch(rollout: Rollout, pad_id: int, device) -> Batch:
    B = len(rollout.prompt_ids)
    P = max(map(len, rollout.prompt_ids))
    C = max(1, max(map(len, rollout.completion_ids)))
    ids = torch.full((B, P + C), pad_id, dtype=torch.long)
    att = torch.zeros((B, P + C), dtype=torch.long)
    cmask = torch.zeros((B, C))
    elogp = torch.zeros((B, C))
    for i, (p, c, lp) in enumerate(zip(rollout.prompt_ids, rollout.completion_ids, rollout.logprobs)):
        ids[i, P - len(p) : P] = torch.tensor(p, dtype=torch.long)
        ids[i, P : P + len(c)] = torch.tensor(c, dtype=torch.long)
        att[i, P - len(p) : P + len(c)] = 1
        cmask[i, : len(c)] = 1
        elogp[i, : len(lp)] = torch.tensor(lp)
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    return Batch(ids.to(device), att.to(device), pos.to(device), P, ids[:, P:].to(device),
                 cmask.to(device), elogp.to(device))


def prompt_owners(prompt_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Runs of consecutive rows with the same prompt (a GRPO group): prompt_ids [B, P] ->
    (first [U] the first row of each run, owner [B] the run of each row)."""
    new = torch.ones(prompt_ids.size(0), dtype=torch.bool, device=prompt_ids.device)
    new[1:] = (prompt_ids[1:] != prompt_ids[:-1]).any(1)
    return new.nonzero().squeeze(-1), new.long().cumsum(0) - 1


def forwarded_tokens(batch: Batch) -> int:
    """Tokens one teacher-forced pass runs (completion_hidden): every completion token, each
    group's prompt once."""
    first, _ = prompt_owners(batch.input_ids[:, : batch.prompt_width])
    return int(batch.completion_mask.sum()) + int(batch.attention_mask[first, : batch.prompt_width].sum())


def cache_arg(decoder) -> str:
    return "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"


def completion_hidden(model, batch: Batch) -> torch.Tensor:
    """Last hidden states at the positions that predict each completion token: [B, C, d].

    A group's G rows share their prompt, so the prompt runs once per group and its KV cache is
    gathered to the G rows (autograd adds the G rows' gradients in the shared prefix): the
    prompt's forward and backward cost 1/G of running every row in full, with the same result.
    Gradient checkpointing cannot keep a cache in training, so it takes the one-pass path.
    """
    P, C = batch.prompt_width, batch.completion.size(1)
    decoder = model.get_decoder()
    first, owner = prompt_owners(batch.input_ids[:, :P])
    checkpointing = torch.is_grad_enabled() and any(
        getattr(m, "gradient_checkpointing", False) for m in (decoder, *decoder.children()))
    if P == 0 or len(first) == len(owner) or checkpointing:
        return decoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       position_ids=batch.position_ids).last_hidden_state[:, P - 1 : P + C - 1]
    head = decoder(input_ids=batch.input_ids[first, :P], attention_mask=batch.attention_mask[first, :P],
                   position_ids=batch.position_ids[first, :P], use_cache=True)
    last = head.last_hidden_state[owner, -1:]
    if C == 1:
        return last
    cache = head[1]  # `cache` in transformers >= 5.2x, `past_key_values` before
    cache.batch_select_indices(owner)
    rest = decoder(input_ids=batch.input_ids[:, P : P + C - 1], attention_mask=batch.attention_mask[:, : P + C - 1],
                   position_ids=batch.position_ids[:, P : P + C - 1], use_cache=True, **{cache_arg(decoder): cache})
    return torch.cat([last, rest.last_hidden_state], dim=1)


def token_logprobs(model, batch: Batch, temperature: float, entropy: str = "none"):
    """log pi(c_t | prompt, c_<t) / T-tempered for every completion token: [B, C] (and entropy [B, C]).

    entropy: "none"; "monitor" (no gradient, from the same logits: no second forward); "grad".
    The LM head runs only on the positions that predict real completion tokens (not the prompt,
    not the padding), fused with the log-softmax (trainer/head.py) unless the entropy needs a
    gradient. Padded positions get log-prob 0 (and entropy 0).
    """
    B, C = batch.completion.shape
    hidden, head = completion_hidden(model, batch), model.get_output_embeddings()
    if entropy == "grad":
        logp_all = torch.log_softmax(head(hidden).float() / temperature, dim=-1)
        logp = logp_all.gather(-1, batch.completion[..., None]).squeeze(-1)
        return logp, -(logp_all.exp() * logp_all).sum(-1)
    real = batch.completion_mask.flatten().nonzero().squeeze(-1)
    lp, ent = chosen_logprobs(hidden.reshape(B * C, -1)[real], head.weight, head.bias,
                              batch.completion.flatten()[real], temperature, entropy == "monitor",
                              getattr(head, "compute_dtype", None))  # head.Float32Head's fp32 logits
    logp = torch.zeros(B * C, device=lp.device, dtype=lp.dtype).index_put((real,), lp).view(B, C)
    if ent is not None:
        ent = torch.zeros(B * C, device=ent.device).index_put((real,), ent).view(B, C)
    return logp, ent


FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)(```|$)", re.S)


def code_token_mask(codec, completion_ids: list[int], eos_id: int) -> list[float]:
    """1 for tokens inside the first fenced code block (and the EOS), 0 for fences and prose.

    Without a fence the whole completion is treated as code (the compact register).
    """
    pieces = [codec.decode([t]) if t != eos_id else "" for t in completion_ids]
    text = "".join(pieces)
    m = FENCE.search(text)
    if m is None:
        return [1.0] * len(completion_ids)
    lo, hi = m.span(1)
    out, pos = [], 0
    for tok, piece in zip(completion_ids, pieces):
        start, pos = pos, pos + len(piece)
        out.append(1.0 if tok == eos_id or (start < hi and pos > lo) else 0.0)
    return out
