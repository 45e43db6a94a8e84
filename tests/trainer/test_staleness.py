"""Asynchronous off-policy training (sampling.staleness k): which batch each step samples and
trains on, without a model: sample_groups is replaced by a recorder."""

from collections import deque
from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from grpo_lab.spec.config import RunConfig
from grpo_lab.trainer import grpo


@pytest.mark.parametrize("k", [0, 2])
def test_each_step_trains_on_the_batch_sampled_for_it_k_updates_earlier(k, monkeypatch):
    schedule = [[0.0, 1.0], [0.5, 0.7]]
    cfg = RunConfig(model="tiny", task="math", steps=5, sampling={"staleness": k, "temperature_schedule": schedule})
    run = SimpleNamespace(cfg=cfg, pending=deque())
    sampled = []  # (step sampled for, step sampling it)
    now = {"step": None}

    def fake_sample(run, s, G, T, progress, timer):
        sampled.append((s, now["step"]))
        assert T == grpo.temperature_at(s, cfg.steps, cfg.sampling) and progress == s / 4  # the batch's own step
        return f"groups of step {s}"

    monkeypatch.setattr(grpo, "sample_groups", fake_sample)
    trained = []
    for step in range(cfg.steps):
        now["step"] = step
        groups, T, staleness = grpo.next_batch(run, step, 8, lambda phase: nullcontext())
        trained.append((groups, staleness))
    assert [g for g, _ in trained] == [f"groups of step {s}" for s in range(5)]  # every step its own batch, once
    assert [s for _, s in trained] == [min(step, k) for step in range(5)]
    # step 0 samples the batches of steps 0..k with the initial policy, then one a step, none past the last step
    assert sampled == [(s, max(0, s - k)) for s in range(5)] and not run.pending
