"""Every trick that runs on TRL (`grpo-lab tricks`: "runs on: ... trl") changes what TRL trains:
a short run of TRL's own GRPOTrainer on the test model, with the GRPOConfig the executor builds
from the project's mapping (spec/trl_map.grpo_config_keys, trl_executor.grpo_args), carries the
trick's declared switch and ends with a different loss or a different update than the baseline's
run from the same weights, seed and problems (relative difference above 1e-6, not merely !=).
Both runs get the trick's `needs`, the settings under which it can act (as the trick contract
does for grpo-lab's trainer). Needs trl==1.16.0 (the bench extra); skipped without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("trl", exc_type=ImportError)

from trl import GRPOTrainer  # noqa: E402

from grpo_lab.cli.train import runs_on  # noqa: E402
from grpo_lab.spec.trl_map import grpo_config_keys, updates_per_step  # noqa: E402
from grpo_lab.spec.tricks import load_catalog  # noqa: E402
from grpo_lab.trainer.setup import build_policy  # noqa: E402
from grpo_lab.trainer.trl_executor import grpo_args, processing_class  # noqa: E402
from grpo_lab.trainer.trl_reward import drawn_problems, reward_funcs  # noqa: E402
from grpo_lab.util.dicts import deep_merge  # noqa: E402
from tests.conftest import tiny_cfg  # noqa: E402

CATALOG = load_catalog()
ON_TRL = sorted(n for n, t in CATALOG.items() if "trl" in runs_on(t))
# group size 8 (group_size_4 changes it), 3 new tokens (the tiny model's answers are 2-3 tokens: some
# truncate, so truncation_mask acts), a KL term worth moving the reference for, no checkpoints
BASE = {"trainer": "trl", "steps": 2, "checkpoint_every": 1000, "kl": {"beta": 0.1},
        "sampling": {"prompts_per_step": 4, "group_size": 8, "max_new_tokens": 3}}
REL = 1e-6


def _steps(tricks: list[str], needs: dict) -> int:
    """Grpo-lab steps that reach one optimizer update past the trick's first reference sync."""
    keys = grpo_config_keys(tiny_cfg(**deep_merge(BASE, needs), tricks=tricks))
    return max(BASE["steps"], (keys.get("ref_model_sync_steps") or 0) // updates_per_step(keys) + 2)


def train(tricks: list[str], needs: dict, steps: int, out) -> tuple[list[float], torch.Tensor]:
    """(TRL's logged loss per update, the weights' change) of a run of `tricks` under `needs`."""
    cfg = tiny_cfg(**deep_merge(deep_merge(BASE, needs), {"steps": steps}), tricks=tricks)
    keys = grpo_config_keys(cfg)
    device, card, tasks, policy, codec = build_policy(cfg)  # seeds torch and random as a run does
    problems = drawn_problems(cfg, tasks)
    funcs, _ = reward_funcs(cfg, tasks, problems, keys.get("mask_truncated_completions", False), codec)
    from datasets import Dataset

    data = Dataset.from_list([{"prompt": codec.format_prompt(p.prompt), "uid": p.uid} for p in problems])
    args = grpo_args(cfg, keys, out, device)
    for key, value in (CATALOG[tricks[0]].equivalents.trl_keys if tricks else {}).items():
        assert getattr(args, key) == value, f"{tricks[0]}: TRL's {key} is {getattr(args, key)!r}, not {value!r}"
    trainer = GRPOTrainer(model=policy, reward_funcs=funcs, args=args, train_dataset=data,
                          processing_class=processing_class(card, codec))
    # accelerate's free_memory runs gc.collect at each train(): 1.3 s of a 1.5 s run in a test process
    trainer.accelerator.free_memory = lambda *objects: objects
    start = torch.cat([p.detach().flatten().clone() for p in trainer.model.parameters()])
    trainer.train()
    moved = torch.cat([p.detach().flatten() for p in trainer.model.parameters()]) - start
    losses = [float(h["loss"]) for h in trainer.state.log_history if "loss" in h]
    return losses, moved


_BASELINES: dict[tuple[str, int], tuple[list[float], torch.Tensor]] = {}


def _baseline(needs: dict, steps: int, root: Path) -> tuple[list[float], torch.Tensor]:
    """One baseline run per (needs, steps), shared by every trick that needs the same."""
    key = (json.dumps(needs, sort_keys=True), steps)
    if key not in _BASELINES:
        _BASELINES[key] = train([], needs, steps, root / f"baseline-{len(_BASELINES)}")
    return _BASELINES[key]


def relative_gaps(ours: tuple[list[float], torch.Tensor], base: tuple[list[float], torch.Tensor]) -> dict[str, float]:
    """How far the trick's run is from the baseline's: the largest relative gap between the losses
    TRL logged update by update (a different count of updates is a gap of 1), and the gap between
    the two runs' weight updates relative to the baseline's."""
    (loss, moved), (base_loss, base_moved) = ours, base
    if len(loss) != len(base_loss):
        loss_gap = 1.0
    else:
        loss_gap = max((abs(a - b) / max(abs(a), abs(b), 1e-12) for a, b in zip(loss, base_loss)), default=0.0)
    return {"loss": loss_gap, "update": float((moved - base_moved).norm() / base_moved.norm())}


def test_every_trick_that_runs_on_trl_is_probed():
    assert len(ON_TRL) >= 20 and "clip_higher" in ON_TRL and "fp32_lm_head" not in ON_TRL


@pytest.mark.parametrize("name", ON_TRL)
def test_a_tricks_trl_switch_changes_trls_loss_or_update(name, tmp_path_factory):
    needs = CATALOG[name].needs
    steps = _steps([name], needs)
    base = _baseline(needs, steps, tmp_path_factory.getbasetemp())
    gaps = relative_gaps(train([name], needs, steps, tmp_path_factory.mktemp(name)), base)
    assert max(gaps.values()) > REL, f"{name}: TRL trained within float rounding of the baseline: {gaps}"


def test_the_same_run_twice_is_within_the_threshold(tmp_path):
    """What makes the threshold mean something: TRL's run from the same weights and seed repeats."""
    first = train([], {}, BASE["steps"], tmp_path / "a")
    assert max(relative_gaps(train([], {}, BASE["steps"], tmp_path / "b"), first).values()) <= REL
