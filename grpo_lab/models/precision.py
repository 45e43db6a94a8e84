"""The LM head's precision: its logits in the weights' dtype, or in fp32 from bf16/fp16 weights.

The fused log-prob (trainer/head.py) and the torch engine read a head's `compute_dtype`, so the
sampler and the trainer compute the same fp32 logits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def compute_weights(weight, bias, compute: torch.dtype | None):
    """(W, b) in the dtype the logits are computed in: their own, or `compute` (Float32Head's)."""
    if compute is None:
        return weight, bias
    return weight.to(compute), None if bias is None else bias.to(compute)


class Float32Head(torch.nn.Module):
    """An LM head computing its logits in fp32 from the weights kept in the model's dtype: z = h W^T + b
    with h, W, b upcast (h: [..., d] -> z: [..., V] in fp32). bf16 logits carry 8 mantissa bits (a
    logit of 10 is off by up to 0.03), a sampler/trainer mismatch of their own (ScaleRL, MiniMax-M1).
    It holds the wrapped head's parameters, so a tied embedding stays tied and checkpoints keep
    their keys; the fused log-prob (chosen_logprobs) and the torch engine read `compute_dtype`."""

    compute_dtype = torch.float32

    def __init__(self, head: torch.nn.Linear):
        super().__init__()
        self.weight, self.bias = head.weight, head.bias

    def compute_weights(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(W, b) upcast as forward uses them, for readers that apply the head themselves (the torch engine)."""
        return compute_weights(self.weight, self.bias, self.compute_dtype)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        weight, bias = self.compute_weights()
        return F.linear(hidden.to(self.compute_dtype), weight, bias)


HEAD_PRECISIONS = {  # head_precision -> the model's output embedding module -> the one to use
    "weights": lambda head: head,
    "float32": Float32Head,
}


def set_head_precision(model, precision: str) -> None:
    """The model's output embedding replaced by HEAD_PRECISIONS[precision] of it (run config head_precision)."""
    head = model.get_output_embeddings()
    wrapped = HEAD_PRECISIONS[precision](head)
    if wrapped is not head:  # a model keeps its own head untouched
        model.set_output_embeddings(wrapped)
