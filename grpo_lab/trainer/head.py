"""The LM head fused with the log-softmax at the sampled tokens, chunked over token rows.

    z = (h W^T + b) / T                       h: [N, d], W: [V, d], b: [V] or None
    logp[n] = z[n, c_n] - logsumexp_v z[n, v]  c: [N] the sampled tokens
    H[n] = logsumexp_v z[n, v] - sum_v softmax(z)[n, v] z[n, v]   (entropy, monitored only)

Materialising z for every completion token costs N x V floats (400 MB for 2,048 tokens of
SmolLM2's 49,152-token vocabulary) and half a dozen passes over it (scale, log-softmax, gather,
exp for the entropy, and as many again in backward). Here a chunk's logits live only inside its
loop iteration and backward recomputes them (one more head matmul) instead of keeping them:

    dL/dz = g (onehot(c) - softmax(z)),  dL/dh = dL/dz W / T,  dL/dW = (dL/dz)^T h / T,
    dL/db = sum_n dL/dz / T.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grpo_lab.models.precision import compute_weights

CHUNK_ELEMENTS = 1 << 22  # logits per chunk: 16 MB in fp32, small enough to stay in the allocator's heap


def chunk_rows(vocab: int) -> int:
    return max(1, CHUNK_ELEMENTS // vocab)


def acc_dtype(t: torch.Tensor) -> torch.dtype:
    """Softmax statistics in at least fp32, whatever the weights are in (bf16 on GPUs)."""
    return torch.promote_types(t.dtype, torch.float32)


def chunk_logits(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, T: float) -> torch.Tensor:
    return F.linear(h.to(weight.dtype), weight, bias).to(acc_dtype(weight)).div_(T)


class ChosenLogprob(torch.autograd.Function):
    """(h [N, d], W, b, c [N], T, entropy?, compute dtype) -> (logp [N], entropy [N] or [0], no gradient)."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature: float, want_entropy: bool, compute=None):
        N, step = hidden.size(0), chunk_rows(weight.size(0))
        w, b = compute_weights(weight, bias, compute)
        kw = {"device": hidden.device, "dtype": acc_dtype(w)}
        logp, lse, ent = torch.empty(N, **kw), torch.empty(N, **kw), torch.empty(N if want_entropy else 0, **kw)
        for s in range(0, N, step):
            z = chunk_logits(hidden[s : s + step], w, b, temperature)
            lse[s : s + step] = l = torch.logsumexp(z, dim=-1)
            logp[s : s + step] = z.gather(-1, targets[s : s + step, None]).squeeze(-1) - l
            if want_entropy:
                p = torch.exp(z - l[:, None])
                ent[s : s + step] = l - (p * z).sum(-1)
        ctx.save_for_backward(hidden, weight, bias, targets, lse)
        ctx.temperature, ctx.compute = temperature, compute
        ctx.mark_non_differentiable(ent)
        return logp, ent

    @staticmethod
    def backward(ctx, g, _g_ent):
        hidden, weight, bias, targets, lse = ctx.saved_tensors
        T, step = ctx.temperature, chunk_rows(weight.size(0))
        w, b = compute_weights(weight, bias, ctx.compute)
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        grad_h = torch.empty_like(hidden) if need_h else None
        acc = acc_dtype(w)
        grad_w = torch.zeros_like(weight, dtype=acc) if need_w else None
        grad_b = torch.zeros(weight.size(0), device=weight.device, dtype=acc) if need_b and bias is not None else None
        for s in range(0, hidden.size(0), step):
            h, gs = hidden[s : s + step], g[s : s + step, None].to(acc)
            dz = chunk_logits(h, w, b, T).sub_(lse[s : s + step, None]).exp_().mul_(-gs)
            dz.scatter_add_(-1, targets[s : s + step, None], gs).div_(T)
            dz = dz.to(w.dtype)
            if grad_h is not None:
                grad_h[s : s + step] = dz @ w
            if grad_w is not None:
                grad_w.addmm_(dz.t().to(acc), h.to(acc))
            if grad_b is not None:
                grad_b += dz.to(acc).sum(0)
        grad_w = grad_w.to(weight.dtype) if grad_w is not None else None
        grad_b = grad_b.to(bias.dtype) if grad_b is not None else None
        return grad_h, grad_w, grad_b, None, None, None, None


def chosen_logprobs(hidden, weight, bias, targets, temperature: float, entropy: bool = False,
                    compute: torch.dtype | None = None):
    """Log-probs [N] of `targets` under softmax((hidden W^T + b) / T), and entropies [N] if asked;
    the logits in `compute` dtype (None: the weights')."""
    logp, ent = ChosenLogprob.apply(hidden, weight, bias, targets, temperature, entropy, compute)
    return logp, (ent if entropy else None)
