"""The tiny model's warm start: a progress line at every probe, and one training per cache key
when several runs need it at once (the others wait on the lock and load the cache)."""

from __future__ import annotations

import threading

from grpo_lab.models import tiny
from grpo_lab.spec.model_cards import TinySpec
from grpo_lab.tasks.math import MathTask

SPEC = TinySpec(hidden=32, layers=1, heads=2, intermediate=64, seed=0, sft_max_steps=50, sft_batch=16,
                sft_lr=0.005, sft_target=0.99, sft_check_every=25)


def test_the_warm_start_says_where_it_is_and_trains_once_for_concurrent_callers(tmp_path, monkeypatch):
    tasks = [MathTask("compact")]
    calls, lines = [], []
    real = tiny.warm_start

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(tiny, "warm_start", counted)
    loaded = []
    workers = [threading.Thread(target=lambda: loaded.append(tiny.load_tiny(SPEC, tasks, tmp_path, lines.append)[0]))
               for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(calls) == 1  # the second caller waited for the first and loaded its cache
    assert len(loaded) == 2 and all(tied(m) for m in loaded)
    probes = [line for line in lines if "probe pass@1" in line]
    assert [p.split("step ")[1].split(" ")[0] for p in probes] == ["25", "50"]
    assert "of at most 50" in probes[0] and "(stops at 0.99)" in probes[0]
    model, _ = tiny.load_tiny(SPEC, tasks, tmp_path, lines.append)  # cached: no new training
    assert len(calls) == 1 and tied(model)


def tied(model) -> bool:
    return model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr() != 0


def test_threads_loading_at_once_leave_later_loads_tied(tmp_path):
    """transformers patches PreTrainedModel.tie_weights out for the length of a load; concurrent
    loads must not leave it patched out for the rest of the process."""
    from transformers import PreTrainedModel

    tasks = [MathTask("compact")]
    tiny.load_tiny(SPEC, tasks, tmp_path, lambda line: None)
    original = PreTrainedModel.tie_weights
    for _ in range(3):
        workers = [threading.Thread(target=tiny.load_tiny, args=(SPEC, tasks, tmp_path, lambda line: None))
                   for _ in range(6)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert PreTrainedModel.tie_weights is original
    assert tied(tiny.load_tiny(SPEC, tasks, tmp_path, lambda line: None)[0])
