"""Batched sampling in plain torch with a preallocated KV cache (CPU and CUDA).

For Llama-family decoders (llama, qwen2, mistral: pre-norm, rotary, optional GQA) the engine
runs its own decode loop over the model's modules: one static KV cache, one scaled-dot-product
attention call per layer, and finished rows dropped from the batch. This avoids most of the
per-token overhead of `generate()`. Other architectures fall back to the model's own forward
with its dynamic cache; both paths return the same Rollout.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from grpo_lab.rollout.base import Rollout

FAST_TYPES = {"llama", "qwen2", "mistral"}


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [B, H, T, D]; cos, sin: [B, T, D] -> x rotated by its positions."""
    return x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1)


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


def decode_attention(q, k, v, valid, scale):
    """One query token per row. q [B,H,1,D], k/v [B,Hkv,S,D], valid [B,S] -> [B,H,1,D].

    Grouped heads are folded into a head-group axis, so the KV cache is never repeated. With a
    single query the products are broadcast multiply-and-sum: at these shapes that is cheaper
    on CPU than batched matmuls over thousands of tiny matrices or the fused attention kernel.
    """
    B, H, _, D = q.shape
    hkv = k.size(1)
    qg = q.view(B, hkv, H // hkv, 1, D)
    scores = (qg * k[:, :, None]).sum(-1) * scale  # [B, Hkv, H/Hkv, S]
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    out = (scores.softmax(-1)[..., None] * v[:, :, None]).sum(-2)  # [B, Hkv, H/Hkv, D]
    return out.reshape(B, H, 1, D)


def left_pad(seqs: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.bool)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s) :] = True
    return ids.to(device), mask.to(device)


def fuse_weights(dec) -> list[dict]:
    """Per layer: q/k/v and gate/up projections concatenated into one matmul each.

    Built at the start of every generate() call, so it always reflects the current weights.
    """
    fused = []
    for layer in dec.layers:
        a, mlp = layer.self_attn, layer.mlp
        projs = (a.q_proj, a.k_proj, a.v_proj)
        bias = None
        if a.q_proj.bias is not None:  # qwen2 has q/k/v biases
            bias = torch.cat([p.bias for p in projs])
        fused.append({
            "ln1": layer.input_layernorm.weight, "ln2": layer.post_attention_layernorm.weight,
            "eps": getattr(layer.input_layernorm, "variance_epsilon", 1e-6),
            "qkv": torch.cat([p.weight for p in projs]), "qkv_b": bias,
            "split": [p.out_features for p in projs],
            "gate_up": torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]),
            "scale": getattr(a, "scaling", None) or a.head_dim ** -0.5,
        })
    return fused

class TorchEngine:
    name = "torch"

    def __init__(self, model, eos_id: int, pad_id: int):
        self.model, self.eos_id, self.pad_id = model, eos_id, pad_id
        cfg = model.config
        layer = self._layers()[0]
        self.fast = (cfg.model_type in FAST_TYPES and not hasattr(layer.self_attn, "q_norm")
                     and all(hasattr(layer.mlp, n) for n in ("gate_proj", "up_proj", "down_proj")))

    def sync_weights(self, model) -> None:
        self.model = model  # same process, same tensors: nothing to copy

    def _layers(self):
        return self.model.get_decoder().layers

    @torch.no_grad()
    def generate(self, prompts, n, temperature, top_p, max_new_tokens, seed=None) -> Rollout:
        device = next(self.model.parameters()).device
        gen = torch.Generator(device=device)
        gen.manual_seed(seed if seed is not None else torch.seed() % 2**31)
        rows = [p for p in prompts for _ in range(n)]
        was_training = self.model.training
        self.model.eval()
        try:
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
        dec = self.model.get_decoder()
        cfg = self.model.config
        self._fused = fuse_weights(dec)
        U, P = ids.shape
        B = U * n
        hkv = cfg.num_key_value_heads
        hd = getattr(dec.layers[0].self_attn, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
        kc = torch.empty(len(dec.layers), U, hkv, P + max_new, hd, dtype=dec.embed_tokens.weight.dtype, device=ids.device)
        vc = torch.empty_like(kc)
        pos = (mask.long().cumsum(-1) - 1).clamp(min=0)
        causal = torch.ones(P, P, dtype=torch.bool, device=ids.device).tril()
        # Padded query rows attend to themselves so the softmax is never over an empty set.
        attn_mask = (causal & mask[:, None, :]) | torch.eye(P, dtype=torch.bool, device=ids.device)
        h = self._forward(dec, ids, pos, kc, vc, 0, attn_mask[:, None])
        logits = self.model.lm_head(dec.norm(h[:, -1])).repeat_interleave(n, dim=0)
        kc, vc = kc.repeat_interleave(n, dim=1), vc.repeat_interleave(n, dim=1)
        valid = torch.zeros(B, P + max_new, dtype=torch.bool, device=ids.device)
        valid[:, :P] = mask.repeat_interleave(n, dim=0)
        next_pos = pos[:, -1].repeat_interleave(n) + 1
        alive = torch.arange(B, device=ids.device)
        toks = torch.full((B, max_new), -1, dtype=torch.long, device=ids.device)
        lps = torch.zeros(B, max_new, device=ids.device)
        for t in range(max_new):
            tok, lp = sample_tokens(logits, temperature, top_p, gen)
            toks[alive, t], lps[alive, t] = tok, lp
            done = tok == self.eos_id
            if t == max_new - 1 or bool(done.all()):
                break
            if done.any():  # drop finished rows from every cached tensor
                keep = (~done).nonzero().squeeze(-1)
                alive, tok, next_pos = alive[keep], tok[keep], next_pos[keep]
                kc, vc, valid = kc[:, keep], vc[:, keep], valid[keep]
            col = P + t
            valid[:, col] = True
            h = self._forward(dec, tok[:, None], next_pos[:, None], kc, vc, col, valid[:, : col + 1])
            logits = self.model.lm_head(dec.norm(h[:, -1]))
            next_pos = next_pos + 1
        return self._unpack(toks, lps)

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
        return out, lps, stops

    def _forward(self, dec, ids, pos, kc, vc, start, attn_mask):
        """Run all layers on `ids` at cache columns [start, start+T); writes K/V into the cache."""
        x = dec.embed_tokens(ids)
        cos, sin = dec.rotary_emb(x, pos)
        B, T, H = x.shape
        D, end = kc.size(-1), start + T
        for i, (layer, w) in enumerate(zip(dec.layers, self._fused)):
            h = F.rms_norm(x, (H,), w["ln1"], w["eps"])
            q, k, v = F.linear(h, w["qkv"], w["qkv_b"]).split(w["split"], dim=-1)
            q = rope(q.view(B, T, -1, D).transpose(1, 2), cos, sin)
            kc[i, :, :, start:end] = rope(k.view(B, T, -1, D).transpose(1, 2), cos, sin)
            vc[i, :, :, start:end] = v.view(B, T, -1, D).transpose(1, 2)
            if attn_mask.dim() == 2:  # decode: attn_mask is the [B, S] validity of cached keys
                o = decode_attention(q, kc[i, :, :, :end], vc[i, :, :, :end], attn_mask, w["scale"])
            else:
                o = F.scaled_dot_product_attention(q, kc[i, :, :, :end], vc[i, :, :, :end], attn_mask=attn_mask,
                                                   scale=w["scale"], enable_gqa=q.size(1) != kc.size(2))
            x = x + layer.self_attn.o_proj(o.transpose(1, 2).reshape(B, T, -1))
            g, u = F.linear(F.rms_norm(x, (H,), w["ln2"], w["eps"]), w["gate_up"]).chunk(2, dim=-1)
            x = x + layer.mlp.down_proj(layer.mlp.act_fn(g) * u)
        return x


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
