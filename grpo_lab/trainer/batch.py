"""From a Rollout to training tensors, and teacher-forced log-probs of the completions.

Layout of a row: [left pad | prompt | completion | right pad]. Positions come from the
attention mask, as in generation, so the trained and the sampled distributions match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from grpo_lab.rollout.base import Rollout


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


CHUNK_ELEMS = 1 << 18  # rows of the [N, V] logits processed at a time (about 1 MB: cache-resident)


class ChosenLogprob(torch.autograd.Function):
    """log softmax(h @ W.T + b) / T at the chosen tokens, and optionally the entropy, for
    rows of hidden states h [N, d]: (logp [N], entropy [N] or None).

    The same numbers as log_softmax + gather (x - max - log sum exp(x - max)), without the
    [N, V] log-softmax, the division by T and the entropy temporaries of the plain autograd
    path: the logits are the only [N, V] tensor; the reductions run over cache-sized chunks of
    rows, and backward turns the saved logits into their gradient in place (so it runs once).
    The entropy carries no gradient (the "monitor" mode).
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature: float, want_entropy: bool):
        logits = torch.nn.functional.linear(hidden, weight, bias).float()
        if temperature != 1.0:
            logits.div_(temperature)
        N, V = logits.shape
        logz = torch.empty(N, dtype=logits.dtype, device=logits.device)  # max + log sum exp
        logp = torch.empty_like(logz)
        ent = torch.empty_like(logz) if want_entropy else None
        step = max(1, CHUNK_ELEMS // V)
        for s in range(0, N, step):
            x = logits[s : s + step]
            m = x.amax(-1, keepdim=True)
            z = x - m
            e = z.exp()
            total = e.sum(-1)
            lse = total.log()
            logp[s : s + step] = z.gather(-1, targets[s : s + step, None]).squeeze(-1) - lse
            logz[s : s + step] = m.squeeze(-1) + lse
            if want_entropy:  # H = log sum e - sum(e * z) / sum e
                ent[s : s + step] = lse - torch.bmm(e[:, None, :], z[:, :, None]).view(-1) / total
        ctx.save_for_backward(hidden, weight, targets, logz, logits)
        ctx.temperature, ctx.has_bias, ctx.used = temperature, bias is not None, False
        ctx.mark_non_differentiable(*(t for t in (ent,) if t is not None))
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp, grad_ent):
        if ctx.used:
            raise RuntimeError("ChosenLogprob's backward reuses its saved logits: it cannot run twice")
        ctx.used = True
        hidden, weight, targets, logz, logits = ctx.saved_tensors
        N, V = logits.shape
        # d logp_t / d x = onehot(t) - softmax(x), times 1/T for the tempered logits.
        g = grad_logp.float() / ctx.temperature
        step = max(1, CHUNK_ELEMS // V)
        for s in range(0, N, step):
            x = logits[s : s + step]
            x.sub_(logz[s : s + step, None]).exp_().mul_(-g[s : s + step, None])
            x.scatter_add_(-1, targets[s : s + step, None], g[s : s + step, None])
        grad = logits.to(hidden.dtype)
        gh = grad @ weight if ctx.needs_input_grad[0] else None
        gw = grad.t() @ hidden if ctx.needs_input_grad[1] else None
        gb = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gh, gw, gb, None, None, None


def prompt_runs(batch: Batch, min_saving: float = 0.05, max_runs: int = 16) -> list[slice] | None:
    """Contiguous runs of rows with equal prompt length (a group's rows share their prompt), when
    running them separately skips at least `min_saving` of the batch's padded positions."""
    lengths = batch.attention_mask[:, : batch.prompt_width].sum(1).tolist()
    runs, start = [], 0
    for i in range(1, len(lengths) + 1):
        if i == len(lengths) or lengths[i] != lengths[start]:
            runs.append(slice(start, i))
            start = i
    if not 1 < len(runs) <= max_runs:
        return None
    width = max(lengths)
    saved = sum((sl.stop - sl.start) * (width - lengths[sl.start]) for sl in runs)
    return runs if saved >= min_saving * batch.input_ids.numel() else None


def token_logprobs(model, batch: Batch, temperature: float, entropy: str = "none"):
    """log pi(c_t | prompt, c_<t) / T-tempered for every completion token: [B, C] (and entropy [B, C]).

    entropy: "none"; "monitor" (no gradient, from the same logits: no second forward); "grad".
    The LM head runs only on the positions that predict completion tokens, which saves the
    vocabulary projection over the prompt. Groups whose prompts are shorter than the batch's
    widest run as separate forwards, trimmed to their own width, so the transformer does not
    compute on their left padding (results are the same up to float rounding).
    """
    runs = prompt_runs(batch)
    if runs is not None:
        C = batch.completion.size(1)
        outs = [_token_logprobs(model, batch.rows(sl), temperature, entropy) for sl in runs]
        pad = lambda t: torch.nn.functional.pad(t, (0, C - t.size(1)))  # noqa: E731
        logp = torch.cat([pad(lp) for lp, _ in outs])
        ent = torch.cat([pad(e) for _, e in outs]) if outs[0][1] is not None else None
        return logp, ent
    return _token_logprobs(model, batch, temperature, entropy)


def _token_logprobs(model, batch: Batch, temperature: float, entropy: str = "none"):
    P, C = batch.prompt_width, batch.completion.size(1)
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    hidden = decoder(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids
    ).last_hidden_state
    h = hidden[:, P - 1 : P + C - 1]
    if entropy != "grad" and isinstance(head, torch.nn.Linear):
        B = h.size(0)
        logp, ent = ChosenLogprob.apply(h.reshape(B * C, -1), head.weight, head.bias,
                                        batch.completion.reshape(-1), float(temperature), entropy == "monitor")
        return logp.view(B, C), (ent.view(B, C) if ent is not None else None)
    logits = head(h).float() / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.completion[..., None]).squeeze(-1)
    ent = None
    if entropy == "grad":
        ent = -(logp_all.exp() * logp_all).sum(-1)
    elif entropy == "monitor":
        with torch.no_grad():
            ent = -(logp_all.exp() * logp_all).sum(-1)
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
