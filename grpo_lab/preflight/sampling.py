"""Sample fixed prompts' groups from a config's base model and score them as the trainer does.

Only the model, codec, tasks and engine are built (no optimizer, no reference copy), so a preflight
costs the memory of sampling alone. Prompts and seeds are fixed: two preflights of one config see
the same samples, and compared configs are compared on the same prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo_lab.rollout import make_engine
from grpo_lab.rollout.base import Rollout
from grpo_lab.spec.config import RunConfig
from grpo_lab.trainer.scoring import merge_rounds
from grpo_lab.trainer.schedules import temperature_at
from grpo_lab.trainer.scoring import Scored, score_rollout, shape_terms
from grpo_lab.trainer.setup import build_policy

PREFLIGHT_SEED = 7_919  # prompts and sampling seeds; fixed so preflights are comparable
DIVERSITY_SEED = PREFLIGHT_SEED + 1  # other prompts than the reward-signal ones


@dataclass
class Sampler:
    cfg: RunConfig
    tasks: dict
    codec: object
    engine: object

    @property
    def temperature(self) -> float:
        """The run's temperature at step 0 (its schedule's first value, if it has one)."""
        return temperature_at(0, self.cfg.steps, self.cfg.sampling)


@dataclass
class Sampled:
    problems: list
    rollout: Rollout
    scored: Scored
    terms: dict[str, torch.Tensor]  # each shaping term apart, [N, G]


def build(cfg: RunConfig) -> Sampler:
    """The sampling half of trainer.setup: same device, threads, register, tasks, model, engine."""
    _, _, tasks, policy, codec = build_policy(cfg)
    return Sampler(cfg, tasks, codec, make_engine(cfg.engine, policy, codec, cfg))


def fixed_problems(s: Sampler, n: int, seed: int) -> list:
    """`n` training problems, split evenly over the run's tasks, a pure function of the seed."""
    names = list(s.tasks)
    counts = [n // len(names) + (i < n % len(names)) for i in range(len(names))]
    return [p for name, k in zip(names, counts) if k
            for p in s.tasks[name].problems("train", k, seed=seed, difficulty=s.cfg.difficulty)]


@torch.no_grad()
def sample(s: Sampler, problems: list, G: int, seed: int) -> Sampled:
    """G completions per problem at the run's step-0 settings, in batches of the run's own size
    (prompts_per_step, which the run fits in memory), scored at training progress 0."""
    sc = s.cfg.sampling
    parts = []
    for i in range(0, len(problems), sc.prompts_per_step):
        batch = problems[i:i + sc.prompts_per_step]
        prompts = [s.codec.encode(s.codec.format_prompt(p.prompt, p.task)) for p in batch]
        ro = s.engine.generate(prompts, G, s.temperature, sc.top_p, sc.max_new_tokens, seed=seed + i)
        parts.append((ro, score_rollout(s.tasks, batch, ro, s.codec, s.cfg, 0.0), range(len(batch)), G))
    rollout, scored = merge_rounds(parts)
    terms = shape_terms(s.cfg, scored.texts, rollout.completion_ids, scored.format_ok, 0.0)
    return Sampled(problems, rollout, scored, terms)
