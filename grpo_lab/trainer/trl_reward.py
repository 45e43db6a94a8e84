"""What TRL's GRPOTrainer trains on and how it is scored, taken from grpo-lab's own code.

The prompts are the problems grpo-lab's curriculum draws for the run's seed, step by step, in the
order grpo-lab's trainer would draw them (TRL reads them in order: shuffle_dataset is off); the
rewards are the task's score (trainer/scoring.task_scores) and the configured reward functions,
called as grpo-lab calls them, so a TRL run and a grpo-lab run of one config see the same problems
and give the same rewards to the same completions.
"""

from __future__ import annotations

import torch

from grpo_lab.rewards import plugins
from grpo_lab.spec.sources import TASK_REWARD
from grpo_lab.trainer.curriculum import Curriculum
from grpo_lab.trainer.scoring import task_scores, unique_answer_ratio
from grpo_lab.trainer.setup import pool_size


def drawn_problems(cfg, tasks: dict) -> list:
    """Every step's prompts_per_step problems, steps in order: what grpo-lab's curriculum draws.
    The uniform curriculum's draws depend on the seed only (trl_map refuses the adaptive ones)."""
    curriculum = Curriculum(list(tasks.values()), cfg.curriculum, cfg.steps, cfg.seed, cfg.difficulty, pool_size(cfg))
    return [p for step in range(cfg.steps) for p in curriculum.sample(step, cfg.sampling.prompts_per_step)]


def score_batch(tasks: dict, problems: list, completions: list[str]) -> list:
    """Task scores of a batch, one batched call per task (as trainer/scoring.score_rollout makes)."""
    by_name = {t.name: t for t in tasks.values()}
    scores = [None] * len(problems)
    for name, task in by_name.items():
        rows = [i for i, p in enumerate(problems) if p.task == name]
        if rows:
            for i, s in zip(rows, task_scores(task, [problems[i] for i in rows], [completions[i] for i in rows])):
                scores[i] = s
    return scores


class TaskReward:
    """The task's own score as a TRL reward function (its signature: prompts, completions, the
    dataset's columns as keywords; the `uid` column names the problem)."""

    __name__ = TASK_REWARD  # TRL logs rewards/<__name__>/mean

    def __init__(self, tasks: dict, by_uid: dict):
        self.tasks, self.by_uid = tasks, by_uid
        self.last: tuple[list, list] = ([], [])  # (uids, scores) of the last batch, for BatchStats

    def __call__(self, prompts, completions, uid, **_) -> list[float]:
        scores = score_batch(self.tasks, [self.by_uid[u] for u in uid], completions)
        self.last = (list(uid), scores)
        return [s.reward for s in scores]


class PluginReward:
    """A configured reward function (reward.function(s); rewards/plugins.py) as a TRL reward
    function: called as grpo-lab calls it, with the problem's prompt and columns; None stays None
    (TRL's NaN, summed as 0 as grpo-lab does). TRL applies its weight (reward_weights)."""

    def __init__(self, rf, by_uid: dict):
        self.rf, self.by_uid, self.__name__ = rf, by_uid, rf.name

    def __call__(self, prompts, completions, uid, **_) -> list[float | None]:
        own_prompts, columns = plugins.batch_columns([self.by_uid[u] for u in uid])
        return plugins.call(self.rf, own_prompts, completions, columns)


class BatchStats:
    """What grpo-lab's summary and metrics line report about a generation batch, from the rewards
    TRL combined: prompts_per_step groups of G consecutive rows (TRL's RepeatSampler repeats each
    prompt G times in a row). An effective sample is one whose advantage is non-zero (its reward
    differs from its group's mean) and that the loss keeps."""

    def __init__(self, tasks: dict, by_uid: dict, task_reward: TaskReward | None, group_size: int,
                 mask_truncated: bool, codec):
        self.tasks, self.by_uid, self.task_reward = tasks, by_uid, task_reward
        self.G, self.mask_truncated, self.codec = group_size, mask_truncated, codec
        # tokens_forwarded: prompt and completion tokens of every row, what grpo-lab counts as trained per pass
        self.counters = {"tokens_generated": 0, "tokens_forwarded": 0, "effective_samples": 0}
        self.last: dict[str, float] = {}  # the last batch's metrics, for the step's metrics line

    def __call__(self, inputs: list[dict], completions: list[str], completion_ids: list, per_func, weights) -> None:
        uids = [row["uid"] for row in inputs]
        if self.task_reward is not None and self.task_reward.last[0] == uids:
            scores = self.task_reward.last[1]
        else:  # the answers, for the diversity metric, as grpo-lab scores every rollout with its task
            scores = score_batch(self.tasks, [self.by_uid[u] for u in uids], completions)
        r = (per_func.detach().cpu() * weights.cpu().unsqueeze(0)).nansum(dim=1).view(-1, self.G)
        lengths = [len(c) for c in completion_ids]
        forwarded = sum(lengths) + sum(len(self.codec.encode(row["prompt"])) for row in inputs)
        truncated = torch.tensor([self.codec.eos_id not in c for c in completion_ids]).view(-1, self.G)
        moved = (r != r.mean(dim=1, keepdim=True)) & ~(truncated & self.mask_truncated)
        effective = int(moved.sum())
        self.counters["tokens_generated"] += sum(lengths)
        self.counters["tokens_forwarded"] += forwarded
        self.counters["effective_samples"] += effective
        answers = [s.answer for s in scores]
        self.last = {
            "reward/group_std": r.std(dim=1).mean().item(),
            "diversity/unique_answer_ratio": unique_answer_ratio(
                [answers[g * self.G:(g + 1) * self.G] for g in range(r.size(0))]),
            "format/ok_frac": sum(s.format_ok for s in scores) / len(scores),
            "samples/effective": effective,
            "samples/total": len(completions),
            "tokens/generated": sum(lengths),
            "tokens/trained": forwarded,
        }


def reward_funcs(cfg, tasks: dict, problems: list, mask_truncated: bool, codec) -> tuple[list, BatchStats]:
    """TRL's reward_funcs for the run (the configured reward functions in order, the task's score
    where none is configured; spec/trl_map gives their weights) and the batch statistics."""
    by_uid = {p.uid: p for p in problems}
    configured = plugins.configured(cfg.reward)
    task = TaskReward(tasks, by_uid)
    funcs = [task if rf.fn is None else PluginReward(rf, by_uid) for rf in configured] or [task]
    stats = BatchStats(tasks, by_uid, task if task in funcs else None, cfg.sampling.group_size, mask_truncated, codec)
    return funcs, stats
