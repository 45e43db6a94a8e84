"""Score a rollout: main reward, shape rewards, format flags, and the per-token loss mask.

This is the "score" phase of the step; it runs after generation and never inside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo_lab.rewards.shaping import length_shaping
from grpo_lab.rollout.base import Rollout
from grpo_lab.trainer.batch import code_token_mask


@dataclass
class Scored:
    main: torch.Tensor  # [N, G] task reward (plus in-main shaping)
    shape: torch.Tensor  # [N, G] shaping added after normalisation
    raw: torch.Tensor  # [N, G] the task reward alone
    format_ok: torch.Tensor  # [N, G] bool
    answers: list  # N lists of G normalised answers (None when none was found)
    texts: list[str]  # B decoded completions


def score_rollout(tasks: dict, problems: list, rollout: Rollout, codec, cfg, progress: float) -> Scored:
    N = len(problems)
    G = len(rollout.group) // N
    texts = rollout.texts(codec)
    scores = [None] * len(texts)
    for name, task in tasks.items():  # one batched call per task (the code sandbox runs once)
        rows = [r for r, g in enumerate(rollout.group) if problems[g].task == name]
        if rows:
            for r, s in zip(rows, task.score([problems[rollout.group[r]] for r in rows], [texts[r] for r in rows])):
                scores[r] = s
    raw = torch.tensor([s.reward for s in scores], dtype=torch.float32).view(N, G)
    fmt = torch.tensor([s.format_ok for s in scores]).view(N, G)
    shape = sum(shape_terms(cfg, texts, rollout.completion_ids, fmt, progress).values(), torch.zeros(N, G))
    main = raw.clone()
    if cfg.reward.shape_mode == "in_main":
        main, shape = main + shape, torch.zeros_like(shape)
    answers = [[scores[g * G + j].answer for j in range(G)] for g in range(N)]
    return Scored(main, shape, raw, fmt, answers, texts)


def shape_terms(cfg, texts: list[str], completion_ids: list[list[int]], format_ok: torch.Tensor,
                progress: float) -> dict[str, torch.Tensor]:
    """Each shaping term the config turns on, shaped like format_ok ([N, G]). score_rollout sums
    them; preflight looks at each one apart, to see which term carries the reward's variance."""
    terms: dict[str, torch.Tensor] = {}
    if cfg.reward.format == "bonus":
        terms["format_bonus"] = cfg.reward.format_bonus * format_ok.float()
    if cfg.reward.length.kind != "none":
        pen = [length_shaping(cfg.reward.length, t, len(c), cfg.sampling.max_new_tokens, progress)
               for t, c in zip(texts, completion_ids)]
        terms[f"length_{cfg.reward.length.kind}"] = torch.tensor(pen).view(format_ok.shape)
    return terms


def loss_mask(batch, scored: Scored, rollout: Rollout, codec, cfg) -> torch.Tensor:
    """[B, C] mask of trained tokens: completion tokens, minus format-masked and truncated samples,
    minus non-code tokens when the loss mask is 'code_only'."""
    mask = batch.completion_mask.clone()
    if cfg.reward.format == "mask":
        mask *= scored.format_ok.view(-1, 1).to(mask)
    if cfg.reward.mask_truncated:
        truncated = torch.tensor([s == "length" for s in rollout.stop], device=mask.device)
        mask *= (~truncated).view(-1, 1).to(mask)
    if cfg.loss.mask == "code_only":
        C = mask.size(1)
        code = [code_token_mask(codec, c, codec.eos_id) + [0.0] * (C - len(c)) for c in rollout.completion_ids]
        mask *= torch.tensor(code, device=mask.device)
    return mask


def unique_answer_ratio(answers: list) -> float:
    """Mean over groups of (distinct answers / G); a missing answer counts as its own kind."""
    ratios = [len({repr(a) for a in group}) / len(group) for group in answers]
    return sum(ratios) / max(len(ratios), 1)
