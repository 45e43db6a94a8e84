"""One model construction or load at a time in a process.

transformers swaps class attributes for the length of a load (PreTrainedModel.tie_weights and
the torch init functions are patched out and put back). Two threads loading at once can each
save the other's patch as "the original": tie_weights then stays patched out for the rest of
the process, and every later model with tied embeddings keeps an lm_head on the meta device.
"""

from __future__ import annotations

import threading

LOAD_LOCK = threading.RLock()


def from_pretrained(loader, *args, **kwargs):
    """loader.from_pretrained(*args, **kwargs) under LOAD_LOCK."""
    with LOAD_LOCK:
        return loader.from_pretrained(*args, **kwargs)
