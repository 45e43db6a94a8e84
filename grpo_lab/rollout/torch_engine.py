"""Batched sampling in plain torch with a preallocated KV cache (CPU and CUDA).

For Llama-family decoders (llama, qwen2, mistral: pre-norm, rotary, optional GQA) the engine
runs its own decode loop over raw weight tensors: q/k/v and gate/up fused into one matmul each
(built once per weight version, not per call, stored [in, out] with the RMSNorm weights folded
in), one static KV cache holding K and V side by side so a step writes both with one copy,
rotary embedding applied to q and k together in place as one complex multiply, the residual
adds folded into the output matmuls (addmm), one fused attention kernel per layer
over the valid prefix of the cache only, and finished rows dropped from the batch. About 13
kernels per layer and step. Other architectures fall back to the model's own forward with its
dynamic cache; both paths return the same Rollout.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grpo_lab.rollout.base import Rollout

FAST_TYPES = {"llama", "qwen2", "mistral"}


def interleave_pairs(d: int) -> torch.Tensor:
    """Row order that puts each rotary pair (i, i + d/2) of a head side by side: 0, d/2, 1, d/2+1, ..."""
    half = torch.arange(d // 2)
    return torch.stack((half, half + d // 2), dim=-1).flatten()


def rotary_factors(rotary_emb, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """The model's own cos/sin tables (any rope scaling included) as unit complex numbers cos + i sin:
    pos [B, T] -> [B, T, 1, D/2] (broadcast over heads)."""
    cos, sin = rotary_emb(x, pos)
    half = cos.size(-1) // 2
    return torch.complex(cos[..., :half].float(), sin[..., :half].float()).unsqueeze(-2)


def rope_(x: torch.Tensor, factors: torch.Tensor) -> None:
    """In place: x [..., heads, D] with rotary pairs interleaved (see FusedWeights) <- each pair
    (a, b) times factors: (a + ib)(cos + i sin) = Llama's x cos + rotate_half(x) sin, one kernel."""
    pairs = x.unflatten(-1, (-1, 2))
    if x.dtype in (torch.float32, torch.float64):
        torch.view_as_complex(pairs).mul_(factors)
    else:  # bf16/fp16 have no complex type here: rotate in fp32 and write back
        pairs.copy_(torch.view_as_real(torch.view_as_complex(pairs.float().contiguous()) * factors))


def sample_tokens(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator):
    """logits [B, V] -> (tokens [B], log-probs [B] under softmax(logits / T), before top-p).

    Inverse-CDF sampling (one uniform per row, a cumsum and a search): torch.multinomial draws
    V exponentials per row, which costs more than the LM head on a large vocabulary on CPU.
    """
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    probs = logp.exp()
    if top_p < 1.0:
        sorted_p, idx = probs.sort(dim=-1, descending=True)
        drop = sorted_p.cumsum(-1) - sorted_p > top_p
        probs = probs.scatter(-1, idx, sorted_p.masked_fill(drop, 0.0))
    cdf = probs.cumsum(-1)
    u = torch.rand(probs.size(0), 1, generator=gen, device=probs.device) * cdf[:, -1:]
    tokens = torch.searchsorted(cdf, u).squeeze(-1).clamp(max=probs.size(-1) - 1)
    return tokens, logp.gather(-1, tokens[:, None]).squeeze(-1)


def left_pad(seqs: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s) :] = True
    return ids.to(device), mask.to(device)


class FusedWeights:
    """The decoder's weights as the fast loop uses them: per layer a tuple
    (eps, qkv, qkv_bias, o, o_bias, gate_up, gate_up_bias, down, down_bias), plus shapes.

    Matrices are stored [in, out] (x @ w: 5-20% faster than x @ w.T at decode shapes on CPU), with
    the RMSNorm weight before qkv and gate_up folded into their input rows (normed_linear), and
    qkv's q and k rows reordered for rope_ (K in the engine's cache is in that order).
    """

    def __init__(self, model):
        dec = model.get_decoder()
        cfg = model.config
        attn0 = dec.layers[0].self_attn
        self.heads = cfg.num_attention_heads
        self.kv_heads = getattr(cfg, "num_key_value_heads", None) or self.heads
        self.head_dim = getattr(attn0, "head_dim", None) or cfg.hidden_size // self.heads
        self.hidden = cfg.hidden_size
        self.scale = getattr(attn0, "scaling", None) or self.head_dim ** -0.5
        act = getattr(cfg, "hidden_act", None)
        self.act = F.silu if act in ("silu", "swish") else dec.layers[0].mlp.act_fn
        self.embed = dec.embed_tokens.weight
        self.norm = dec.norm.weight
        self.norm_eps = getattr(dec.norm, "variance_epsilon", getattr(dec.norm, "eps", 1e-6))
        head = model.get_output_embeddings()
        # A head that computes in another dtype than its weights' (models/precision.py) hands them over upcast.
        self.head, self.head_bias = head.compute_weights() if hasattr(head, "compute_weights") else (head.weight, head.bias)
        self.inter = dec.layers[0].mlp.gate_proj.out_features
        self.layers = []
        for layer in dec.layers:
            a, mlp = layer.self_attn, layer.mlp
            projs = (a.q_proj, a.k_proj, a.v_proj)
            # q and k rows of every head with their rotary pairs interleaved, so rope_ is one complex
            # multiply; q.k is unchanged by permuting both alike (v is not rotated, not permuted).
            qk_rows = torch.cat([interleave_pairs(self.head_dim) + h * self.head_dim
                                 for h in range(self.heads + self.kv_heads)])
            rows = torch.cat([qk_rows, torch.arange(len(qk_rows), len(qk_rows) + self.kv_heads * self.head_dim)])
            bias = torch.cat([p.bias for p in projs])[rows] if a.q_proj.bias is not None else None  # qwen2
            gu_bias = mlp.gate_proj.bias
            if gu_bias is not None:
                gu_bias = torch.cat([mlp.gate_proj.bias, mlp.up_proj.bias])
            ln1, ln2 = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
            self.layers.append((
                getattr(layer.input_layernorm, "variance_epsilon", 1e-6),
                (torch.cat([p.weight for p in projs])[rows] * ln1).t().contiguous(), bias,
                a.o_proj.weight.t().contiguous(), a.o_proj.bias,
                (torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]) * ln2).t().contiguous(), gu_bias,
                mlp.down_proj.weight.t().contiguous(), mlp.down_proj.bias,
            ))


def weights_key(model) -> tuple:
    """Changes whenever a parameter is replaced or modified in place (optimizer step, load)."""
    return tuple((p.data_ptr(), p._version) for p in model.parameters())


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """x @ w (+ b) with w stored [in, out]: x [..., in]."""
    out = torch.matmul(x, w)
    return out if b is None else out.add_(b)


def normed_linear(x: torch.Tensor, eps: float, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """rms_norm(x, g) @ W (+ b) with g folded into w = diag(g) W: x / sqrt(mean(x^2) + eps) @ w."""
    scale = torch.linalg.vector_norm(x, dim=-1, keepdim=True).pow_(2).div_(x.size(-1)).add_(eps).rsqrt_()
    return linear(x * scale, w, b)


def residual_linear(x: torch.Tensor, h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """x + h @ w (+ b), w stored [in, out], in one kernel where possible; x, h: [N, *]."""
    out = torch.addmm(x, h, w)
    return out if b is None else out.add_(b)


class TorchEngine:
    name = "torch"

    def __init__(self, model, eos_id: int, pad_id: int):
        self.model, self.eos_id, self.pad_id = model, eos_id, pad_id
        self._weights, self._key = None, None
        cfg = model.config
        layer = self._layers()[0]
        self.fast = (cfg.model_type in FAST_TYPES and not hasattr(layer.self_attn, "q_norm")
                     and all(hasattr(layer.mlp, n) for n in ("gate_proj", "up_proj", "down_proj")))

    def sync_weights(self, model) -> None:
        self.model = model  # same process, same tensors: nothing to copy
        self._weights = None  # but the fused copies are rebuilt from the new values

    def _layers(self):
        return self.model.get_decoder().layers

    def fused(self) -> FusedWeights:
        """The fused weights, rebuilt when any parameter changed since they were built."""
        key = weights_key(self.model)
        if self._weights is None or key != self._key:
            with torch.inference_mode():
                self._weights = FusedWeights(self.model)
            self._key = key
        return self._weights

    def generate(self, prompts, n, temperature, top_p, max_new_tokens, seed=None) -> Rollout:
        device = next(self.model.parameters()).device
        gen = torch.Generator(device=device)
        gen.manual_seed(seed if seed is not None else torch.seed() % 2**31)
        rows = [p for p in prompts for _ in range(n)]
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                if self.fast:  # prefill each prompt once, then share its KV cache across the group
                    ids, mask = left_pad(prompts, self.pad_id, device)
                    out, lps, stops = self._fast_loop(ids, mask, n, temperature, top_p, max_new_tokens, gen)
                else:
                    ids, mask = left_pad(rows, self.pad_id, device)
                    out, lps, stops = self._hf_loop(ids, mask, temperature, top_p, max_new_tokens, gen)
        finally:
            self.model.train(was_training)
        group = [i for i in range(len(prompts)) for _ in range(n)]
        return Rollout(rows, out, lps, stops, group)

    def _fast_loop(self, ids, mask, n, temperature, top_p, max_new, gen):
        w = self.fused()
        dec = self.model.get_decoder()
        dev = ids.device
        U, P = ids.shape
        B = U * n
        L, Hkv, D = len(w.layers), w.kv_heads, w.head_dim
        C = 2 * Hkv * D  # one cache row: K then V of every kv head
        S = P + max_new
        dtype = w.embed.dtype  # the body's: the head may compute in fp32 (trainer/head.py)
        # kv[l, b, s] = (K | V) of layer l, row b, column s; column s < P is the prompt.
        kv = torch.empty(L, B, S, C, dtype=dtype, device=dev)
        pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
        x = self._prefill(w, dec, ids, mask, pos, kv, n)
        logits = F.linear(F.rms_norm(x[:, -1], (w.hidden,), w.norm, w.norm_eps).to(w.head.dtype), w.head, w.head_bias)
        logits = logits.repeat_interleave(n, dim=0)
        # Rotary factors for every decode step of every row, built once: [B, max_new, 1, D/2].
        dpos = pos[:, -1:].repeat_interleave(n, dim=0) + 1 + torch.arange(max_new, device=dev)
        rot = rotary_factors(dec.rotary_emb, x, dpos)
        # Additive mask over cache columns: -inf on left padding; None when no row is padded.
        bias = None
        if not bool(mask.all()):
            bias = torch.zeros(B, S, dtype=dtype, device=dev)
            bias[:, :P].masked_fill_(~mask.repeat_interleave(n, dim=0), float("-inf"))
        alive = None  # None while every row is alive: plain column writes instead of index_put
        toks = torch.full((B, max_new), -1, dtype=torch.long, device=dev)
        lps = torch.zeros(B, max_new, device=dev)
        for t in range(max_new):
            tok, lp = sample_tokens(logits, temperature, top_p, gen)
            if alive is None:
                toks[:, t], lps[:, t] = tok, lp
            else:
                toks[alive, t], lps[alive, t] = tok, lp
            if t == max_new - 1:
                break
            done = tok == self.eos_id
            if bool(done.any()):  # drop finished rows from every per-row tensor
                if bool(done.all()):
                    break
                keep = (~done).nonzero().squeeze(-1)
                alive = keep if alive is None else alive[keep]
                tok, kv, rot = tok[keep], kv[:, keep], rot[keep]
                bias = bias[keep] if bias is not None else None
            col = P + t
            x = self._decode(w, tok, kv, col, rot[:, t], None if bias is None else bias[:, : col + 1])
            logits = F.linear(F.rms_norm(x, (w.hidden,), w.norm, w.norm_eps).to(w.head.dtype), w.head, w.head_bias)
        return self._unpack(toks, lps)

    def _prefill(self, w: FusedWeights, dec, ids, mask, pos, kv, n):
        """All layers over the U prompts [U, P]; K/V written to the cache of all U * n rows."""
        U, P = ids.shape
        H, Hkv, D = w.heads, w.kv_heads, w.head_dim
        x = F.embedding(ids, w.embed)
        rot = rotary_factors(dec.rotary_emb, x, pos)
        causal = torch.ones(P, P, dtype=torch.bool, device=ids.device).tril()
        # Padded query rows attend to themselves so the softmax is never over an empty set.
        attn_mask = ((causal & mask[:, None, :]) | torch.eye(P, dtype=torch.bool, device=ids.device))[:, None]
        grouped = kv.view(kv.size(0), U, n, *kv.shape[2:])
        for i, (eps, wqkv, bqkv, wo, bo, wgu, bgu, wd, bd) in enumerate(w.layers):
            y = normed_linear(x, eps, wqkv, bqkv)  # [U, P, (H + 2Hkv) D]
            rope_(y[..., : (H + Hkv) * D].unflatten(-1, (H + Hkv, D)), rot)
            grouped[i, :, :, :P] = y[:, None, :, H * D :]
            q = y[..., : H * D].unflatten(-1, (H, D)).transpose(1, 2).contiguous()
            k = y[..., H * D : (H + Hkv) * D].unflatten(-1, (Hkv, D)).transpose(1, 2)
            v = y[..., (H + Hkv) * D :].unflatten(-1, (Hkv, D)).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=w.scale, enable_gqa=H != Hkv)
            x = x + linear(o.transpose(1, 2).reshape(U, P, H * D), wo, bo)
            gu = normed_linear(x, eps, wgu, bgu)
            x = x + linear(w.act(gu[..., : w.inter]) * gu[..., w.inter :], wd, bd)
        return x

    def _decode(self, w: FusedWeights, tok, kv, col, rot, bias):
        """One token per row through all layers; K/V of column `col` written to the cache.

        tok [B]; rot [B, 1, D/2] rotary factors; bias [B, col + 1] additive mask or None -> hidden [B, hidden].
        """
        B = tok.size(0)
        H, Hkv, D = w.heads, w.kv_heads, w.head_dim
        g, I, end = H // Hkv, w.inter, col + 1
        mask = None if bias is None else bias[:, None, None, :]
        x = F.embedding(tok, w.embed)
        for i, (eps, wqkv, bqkv, wo, bo, wgu, bgu, wd, bd) in enumerate(w.layers):
            y = normed_linear(x, eps, wqkv, bqkv)  # [B, (H + 2Hkv) D]
            rope_(y[:, : (H + Hkv) * D].view(B, H + Hkv, D), rot)
            kv[i, :, col] = y[:, H * D :]
            cache = kv[i, :, :end]
            k = cache[..., : Hkv * D].unflatten(-1, (Hkv, D)).transpose(1, 2)  # [B, Hkv, end, D]
            v = cache[..., Hkv * D :].unflatten(-1, (Hkv, D)).transpose(1, 2)
            # The g query heads sharing a kv head act as g query positions (no causal mask here),
            # so grouped-query attention needs no repeated K/V. A contiguous q takes the attention
            # kernel's fast path (twice as fast as a strided view of y on CPU).
            q = y[:, : H * D].reshape(B, Hkv, g, D).contiguous()
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=w.scale)
            x = residual_linear(x, o.reshape(B, H * D), wo, bo)
            gu = normed_linear(x, eps, wgu, bgu)
            x = residual_linear(x, w.act(gu[:, :I]) * gu[:, I:], wd, bd)
        return x

    def _unpack(self, toks: torch.Tensor, lps: torch.Tensor):
        """[B, max_new] tensors (-1 after the end) -> per-row lists cut after EOS, stop reasons."""
        out, logps, stops = [], [], []
        for row, lp in zip(toks.tolist(), lps.tolist()):
            n = row.index(-1) if -1 in row else len(row)
            if self.eos_id in row[:n]:
                n = row.index(self.eos_id) + 1
            out.append(row[:n])
            logps.append(lp[:n])
            stops.append("eos" if n and row[n - 1] == self.eos_id else "length")
        return out, logps, stops

    def _hf_loop(self, ids, mask, temperature, top_p, max_new, gen):
        """Fallback for architectures the fast loop does not know: the model's own KV cache."""
        B = ids.size(0)
        am = mask.long()
        pos = (am.cumsum(-1) - 1).clamp(min=0)
        res = self.model(input_ids=ids, attention_mask=am, position_ids=pos, use_cache=True)
        past, logits = res.past_key_values, res.logits[:, -1]
        out, lps, stops = [[] for _ in range(B)], [[] for _ in range(B)], ["length"] * B
        finished = torch.zeros(B, dtype=torch.bool, device=ids.device)
        for t in range(max_new):
            tok, lp = sample_tokens(logits, temperature, top_p, gen)
            for r in (~finished).nonzero().squeeze(-1).tolist():
                out[r].append(int(tok[r]))
                lps[r].append(float(lp[r]))
                if int(tok[r]) == self.eos_id:
                    stops[r] = "eos"
            finished |= tok == self.eos_id
            if bool(finished.all()) or t == max_new - 1:
                break
            am = torch.cat([am, torch.ones(B, 1, dtype=am.dtype, device=am.device)], dim=1)
            pos = pos[:, -1:] + 1
            res = self.model(input_ids=tok[:, None], attention_mask=am, position_ids=pos,
                             past_key_values=past, use_cache=True)
            past, logits = res.past_key_values, res.logits[:, -1]
        return out, lps, stops
