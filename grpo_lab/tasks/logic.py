"""Small deduction puzzles with a checkable one-word answer, in two families.

Ordering: a chain of comparisons, then ask for the maximum or minimum. Compact
"b<c;a<b;max=" -> "c"; natural "Bob is taller than Ann. ... Who is the tallest?".
Boolean: an expression over T/F with ! (not), & (and), | (or) and the usual precedence
(! then & then |). Compact "!T&F|T=" -> "T"; natural "not True and False or True".
Levels grow the chain (2, 3, 4 people or letters) and the expression (2, 3, 4 operands).

Data files hold ``question`` and ``answer``; answers are compared after normalisation
(case, surrounding punctuation, and true/false/yes/no spellings of booleans).

Grading is strict (``rewards/strict.py``): in the natural register only an answer inside
``<answer>`` tags or a ``\\boxed{}`` counts (the last word of untagged text does not), every distinct
marked answer must be the target, and none may name more candidates than the target does
(``Ann or Bob``, ``Ann, Bob``). The compact register reads the whole completion, exactly.
"""

from __future__ import annotations

import random
import re

from grpo_lab.rewards import strict
from grpo_lab.rewards.extract import clean, marked_answers
from grpo_lab.rewards.format import has_answer_tags, has_boxed
from grpo_lab.tasks._common import BaseTask, Draft, content_id
from grpo_lab.tasks.base import Problem, Score

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_PEOPLE = ("Ann", "Bob", "Cat", "Dan", "Eve", "Fay", "Gus", "Hal", "Ida", "Jon")
_INSTRUCTION = "Give the final answer inside <answer></answer> tags."
_TRUE = {"t", "true", "yes"}
_FALSE = {"f", "false", "no"}


def normalize_answer(text: str | None) -> str | None:
    """Lower-case word answer with booleans mapped to "true"/"false"; None if empty. A wrapper of
    the whole answer (``\\text{Bob}``, ``**Bob**``) is markup, not part of the word."""
    if text is None:
        return None
    word = clean(text).strip(".,!?;:\"'`*").strip().lower()
    if word in _TRUE:
        return "true"
    if word in _FALSE:
        return "false"
    return word or None


def _chain(rng: random.Random, symbols: list[str]) -> tuple[list[tuple[str, str]], str, str]:
    """Random order of ``symbols`` as shuffled (smaller, larger) pairs, plus its min and max."""
    order = rng.sample(symbols, len(symbols))
    pairs = [(order[i], order[i + 1]) for i in range(len(order) - 1)]
    rng.shuffle(pairs)
    return pairs, order[0], order[-1]


def _ordering(rng: random.Random, level: int, compact: bool) -> tuple[str, str, str]:
    """(puzzle text, answer, worked solution) for a comparison chain of level + 2 items."""
    symbols = rng.sample(_LETTERS if compact else _PEOPLE, level + 2)
    pairs, low, high = _chain(rng, symbols)
    want_max = rng.random() < 0.5
    answer = high if want_max else low
    flips = [rng.random() < 0.5 for _ in pairs]
    if compact:
        facts = [f"{b}>{a}" if flip else f"{a}<{b}" for (a, b), flip in zip(pairs, flips)]
        return ";".join(facts) + (";max" if want_max else ";min"), answer, answer
    facts = [f"{b} is taller than {a}." if flip else f"{a} is shorter than {b}."
             for (a, b), flip in zip(pairs, flips)]
    question = "Who is the tallest?" if want_max else "Who is the shortest?"
    return " ".join(facts) + " " + question, answer, f"<answer>{answer}</answer>"


def _boolean_value(expression: str) -> bool:
    """Value of a compact boolean expression, e.g. "!T&F|T", with ! > & > | precedence."""
    return any(
        all((lit[-1] == "T") != (lit.count("!") % 2 == 1) for lit in term.split("&"))
        for term in expression.split("|")
    )


def _boolean(rng: random.Random, level: int, compact: bool) -> tuple[str, str, str]:
    """(expression text, answer, worked solution) over level + 2 operands."""
    literals = [("!" if rng.random() < 0.3 else "") + rng.choice("TF") for _ in range(level + 2)]
    expression = literals[0]
    for literal in literals[1:]:
        expression += rng.choice("&|") + literal
    value = "T" if _boolean_value(expression) else "F"
    if compact:
        return expression, value, value
    words = {"!": "not ", "T": "True", "F": "False", "&": " and ", "|": " or "}
    spoken = "".join(words[c] for c in expression)
    answer = "True" if value == "T" else "False"
    text = f"Evaluate the Python expression: {spoken}. Is it True or False?"
    return text, answer, f"<answer>{answer}</answer>"


def _answer_kind(target: str) -> str:
    """What a compact answer must look like: a T/F flag, one lower-case letter, or a word."""
    if target in ("T", "F"):
        return "flag"
    return "letter" if re.fullmatch(r"[a-z]", target) else "word"


def _compact_format_ok(completion: str, target: str) -> bool:
    kind, text = _answer_kind(target), completion.strip()
    if kind == "flag":
        return text in ("T", "F")
    if kind == "letter":
        return re.fullmatch(r"[a-z]", text) is not None
    return bool(text) and not any(c.isspace() for c in text)


class LogicTask(BaseTask):
    """Ordering and boolean puzzles with a binary exact-answer reward."""

    name = "logic"
    grading_version = 2  # strict grading (rewards/strict.py): hedges and unmarked answers earn 0

    def _draft(self, rng: random.Random, level: int) -> Draft:
        compact = self.register == "compact"
        make = _ordering if rng.random() < 0.5 else _boolean
        text, answer, solution = make(rng, level, compact)
        if compact:
            return Draft(text, f"{text}=", answer, solution, level)
        prompt = f"{text} {_INSTRUCTION}"
        return Draft(content_id(prompt), prompt, answer, solution, level)

    def _record_draft(self, record: dict) -> Draft:
        question, answer = str(record["question"]).strip(), str(record["answer"]).strip()
        if self.register == "compact":
            prompt, solution = question, answer
        else:
            prompt, solution = f"{question}\n{_INSTRUCTION}", f"<answer>{answer}</answer>"
        return Draft(content_id(question), prompt, answer, solution, int(record.get("difficulty", 0)))

    def score(self, problems: list[Problem], completions: list[str]) -> list[Score]:
        """Compact answers must match exactly; natural ones, marked, after normalisation."""
        scores = []
        for problem, completion in zip(problems, completions, strict=True):
            target = str(problem.target)
            if self.register == "compact":
                answer = completion.strip() or None
                correct = float(answer == target)
                format_ok = _compact_format_ok(completion, target)
            else:
                want = normalize_answer(target)
                correct, answer = strict.grade(marked_answers(completion, hash_marks=False), target,
                                               lambda mark: (normalize_answer(mark) == want, normalize_answer(mark)))
                format_ok = has_answer_tags(completion) or has_boxed(completion)
            scores.append(Score(correct, format_ok, answer, {"correct": correct, "format": float(format_ok)}))
        return scores
