"""Reward functions loaded from this file by path ('tests/plugins/rewards_file.py:name'), as a team's own."""

import math


def brevity(prompts, completions, **columns):
    """1.0 for completions of at most 2 characters, else 0.0."""
    return [float(len(c.strip()) <= 2) for c in completions]


def only_math(prompts, completions, task, **columns):
    """Applies to math problems only: None elsewhere."""
    return [float(c.strip().isdigit()) if t == "math" else None for c, t in zip(completions, task)]


def one_short(prompts, completions, **columns):
    return [0.0] * (len(completions) - 1)


def one_short_in_big_batches(prompts, completions, **columns):
    """Breaks only on batches larger than the plan's sample call: the run's own check catches it."""
    return [0.0] * (len(completions) - (len(completions) > 4))


def not_a_number(prompts, completions, **columns):
    return ["high"] * len(completions)


def nan_reward(prompts, completions, **columns):
    return [math.nan] * len(completions)


def no_columns(prompts, completions):
    return [0.0] * len(completions)


def one_argument(completions, **columns):
    return [0.0] * len(completions)


def by_gold(prompts, completions, gold_text, **columns):
    """Reads a data file's own field: 1.0 when the completion repeats it."""
    return [float(c.strip() == str(g)) for c, g in zip(completions, gold_text)]


def zero(prompts, completions, **columns):
    """Never rewards anything: GRPO has no signal."""
    return [0.0] * len(completions)
