"""What TRL's GRPOTrainer trains on and how it is scored, taken from grpo-lab's own code.

The prompts are the problems grpo-lab's curriculum draws for the run's seed, step by step, in the
order grpo-lab's trainer would draw them (TRL reads them in order: shuffle_dataset is off); the
reward is the task's score (trainer/scoring.task_scores), so a TRL run and a grpo-lab run of one
config see the same problems and the same rewards for the same completions.
"""

from __future__ import annotations

import torch

from grpo_lab.trainer.curriculum import Curriculum
from grpo_lab.trainer.scoring import task_scores, unique_answer_ratio


def drawn_problems(cfg, tasks: dict) -> list:
    """Every step's prompts_per_step problems, steps in order: what grpo-lab's curriculum draws.
    The uniform curriculum's draws depend on the seed only (trl_map refuses the adaptive ones)."""
    pool = min(max(cfg.steps * cfg.sampling.prompts_per_step, 256), 4096)  # as trainer/setup.py sizes it
    curriculum = Curriculum(list(tasks.values()), cfg.curriculum, cfg.steps, cfg.seed, cfg.difficulty, pool)
    return [p for step in range(cfg.steps) for p in curriculum.sample(step, cfg.sampling.prompts_per_step)]


class TaskReward:
    """A TRL reward function (its signature: prompts, completions, dataset columns as keywords)
    that scores with grpo-lab's tasks, and keeps the counts grpo-lab's summary reports.

    TRL calls it once per generation batch: prompts_per_step groups of G consecutive rows
    (its RepeatSampler repeats each prompt G times in a row), which `stats` relies on."""

    __name__ = "task"  # TRL logs rewards/<__name__>/mean

    def __init__(self, tasks: dict, problems: list, group_size: int, mask_truncated: bool, eos_id: int):
        self.tasks = {t.name: t for t in tasks.values()}
        self.by_uid = {p.uid: p for p in problems}
        self.G, self.mask_truncated, self.eos_id = group_size, mask_truncated, eos_id
        self.counters = {"tokens_generated": 0, "effective_samples": 0}
        self.last: dict[str, float] = {}  # the last batch's metrics, for the step's metrics line

    def __call__(self, prompts, completions, uid, completion_ids=None, **_) -> list[float]:
        problems = [self.by_uid[u] for u in uid]
        scores = [None] * len(problems)
        for name, task in self.tasks.items():  # one batched call per task, as grpo-lab's scoring does
            rows = [i for i, p in enumerate(problems) if p.task == name]
            if rows:
                for i, s in zip(rows, task_scores(task, [problems[i] for i in rows], [completions[i] for i in rows])):
                    scores[i] = s
        rewards = [s.reward for s in scores]
        self.stats(rewards, [s.answer for s in scores], completion_ids)
        return rewards

    def stats(self, rewards: list[float], answers: list, completion_ids) -> None:
        """The batch's group metrics and counts. An effective sample is one whose advantage is
        non-zero (its reward differs from its group's mean) and that the loss keeps."""
        r = torch.tensor(rewards).view(-1, self.G)
        lengths = [len(c) for c in completion_ids] if completion_ids is not None else [0] * len(rewards)
        truncated = torch.tensor([self.eos_id not in c for c in completion_ids] if completion_ids is not None
                                 else [False] * len(rewards)).view(-1, self.G)
        moved = (r != r.mean(dim=1, keepdim=True)) & ~(truncated & self.mask_truncated)
        effective = int(moved.sum())
        self.counters["tokens_generated"] += sum(lengths)
        self.counters["effective_samples"] += effective
        self.last = {
            "reward/group_std": r.std(dim=1).mean().item(),
            "diversity/unique_answer_ratio": unique_answer_ratio(
                [answers[g * self.G:(g + 1) * self.G] for g in range(r.size(0))]),
            "samples/effective": effective,
            "samples/total": len(rewards),
            "tokens/generated": sum(lengths),
        }
