"""Reward functions with TRL's signature: f(prompts, completions, **columns) -> list[float | None]."""


def exact_match(prompts, completions, answer, **columns):
    """1.0 when the completion is exactly the answer; None (not applicable) on other tasks' problems."""
    return [None if task != "geo" else float(c.strip() == str(a))
            for c, a, task in zip(completions, answer, columns["task"])]


def short(prompts, completions, **columns):
    """A shaping term: 1.0 for completions of at most 3 characters."""
    return [float(len(c.strip()) <= 3) for c in completions]
