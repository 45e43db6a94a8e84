"""Held-out evaluation: pass@1 and the unbiased pass@k of the Codex paper."""

from __future__ import annotations

from math import comb

import torch


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n - c, k) / C(n, k) (Chen et al. 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


@torch.no_grad()
def evaluate(engine, codec, tasks: dict, problems: dict, cfg, max_new_tokens: int,
             seed: int) -> tuple[dict, list, list]:
    """Sample cfg.samples completions per test problem; a sample is correct when its reward is 1.

    Returns (metrics, examples, per_problem): examples are a few (prompt, completions, rewards)
    rows; per_problem is one row per test problem (task, uid, samples, passes, reward_mean), what
    the analysis pairs arms on (every run of a task draws the same test problems).
    """
    metrics: dict[str, float] = {}
    examples: list[dict] = []
    per_problem: list[dict] = []
    totals: dict[str, list[float]] = {}
    for name, probs in problems.items():
        task = tasks[name]
        prompts = [codec.encode(codec.format_prompt(p.prompt, p.task)) for p in probs]
        ro = engine.generate(prompts, cfg.samples, cfg.temperature, 1.0, max_new_tokens, seed=seed)
        texts = ro.texts(codec)
        scores = task.score([probs[g] for g in ro.group], texts)
        rewards = torch.tensor([s.reward for s in scores]).view(len(probs), cfg.samples)
        correct = (rewards >= 1.0 - 1e-9).sum(dim=1).tolist()
        per_problem += [{"task": name, "uid": p.uid, "samples": cfg.samples, "passes": c, "reward_mean": r}
                        for p, c, r in zip(probs, correct, rewards.mean(dim=1).tolist())]
        per_task = {f"pass@{k}": sum(pass_at_k(cfg.samples, c, k) for c in correct) / len(probs)
                    for k in cfg.k if k <= cfg.samples}
        per_task["reward_mean"] = rewards.mean().item()
        per_task["format_ok"] = sum(s.format_ok for s in scores) / len(scores)
        for key, value in per_task.items():
            metrics[f"eval/{name}/{key}"] = value
            totals.setdefault(key, []).append(value)
        for i in range(min(cfg.log_completions, len(probs))):
            rows = range(i * cfg.samples, (i + 1) * cfg.samples)
            examples.append({"task": name, "prompt": probs[i].prompt, "completions": [texts[r] for r in rows],
                             "rewards": [scores[r].reward for r in rows]})
    for key, values in totals.items():
        metrics[f"eval/{key}"] = sum(values) / len(values)
    return metrics, examples, per_problem
