"""Perimeters of squares and rectangles: a task written against grpo_lab.tasks.base.Task only."""

from __future__ import annotations

import hashlib
import random

from grpo_lab.tasks.base import Problem, Score


def _split_of(key: str) -> str:
    """20% of all problems are test problems, decided by their content: splits never overlap."""
    return "test" if hashlib.sha256(key.encode()).digest()[0] < 51 else "train"


class GeoTask:
    """Perimeter of a square (level 0) or a rectangle (level 1); reward 1 for the exact number."""

    name = "geo"

    def __init__(self, register: str = "compact", levels: int = 2, difficulty: int | None = None):
        self.register, self.levels, self.difficulty = register, levels, difficulty

    def _draft(self, rng: random.Random, level: int) -> tuple[str, str, str]:
        a, b = rng.randint(1, 30), rng.randint(1, 30)
        key, value = (f"sq{a}", 4 * a) if level == 0 else (f"re{a}x{b}", 2 * (a + b))
        if self.register == "compact":
            return key, f"{key}p=", str(value)
        shape = f"a square with side {a}" if level == 0 else f"a {a} by {b} rectangle"
        return key, f"What is the perimeter of {shape}? Answer inside <answer></answer>.", f"<answer>{value}</answer>"

    def problems(self, split: str, n: int, seed: int, difficulty: int | None = None) -> list[Problem]:
        rng = random.Random(f"geo/{self.register}/{split}/{seed}/{difficulty}")
        out = []
        while len(out) < n:
            level = difficulty if difficulty is not None else self.difficulty
            level = rng.randrange(self.levels) if level is None else level
            key, prompt, solution = self._draft(rng, level)
            if _split_of(key) == split:
                answer = solution.removeprefix("<answer>").removesuffix("</answer>")
                out.append(Problem(f"geo/{self.register}/{split}/{key}", "geo", prompt, answer, solution, level))
        return out

    def score(self, problems: list[Problem], completions: list[str]) -> list[Score]:
        scores = []
        for problem, completion in zip(problems, completions, strict=True):
            text = completion.strip()
            if self.register == "natural" and "<answer>" in text:
                text = text.split("<answer>")[-1].split("</answer>")[0].strip()
            correct = float(text == problem.target)
            scores.append(Score(correct, text.isdigit(), text or None, {"correct": correct}))
        return scores
