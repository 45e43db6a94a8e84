"""Arithmetic: bare expressions for tiny character models, word problems for instruct LLMs.

Compact levels (prompt -> solution): 0 "3+4=" -> "7"; 1 "3-4+2=" -> "1"; 2 "3+4-2+5=" -> "10"
or "3*4+2=" -> "14". Every number in a prompt is one digit because a ~1M-parameter char
model learns sums of one-digit numbers quickly but barely learns two-digit addition.
Natural levels: 0 "What is a + b?" (a, b <= 10); 1 one-step word problems; 2 two-step word
problems; the answer goes inside <answer></answer> tags.

Grading is strict (``rewards/strict.py``). In the natural register only a marked answer counts:
``<answer>`` tags, ``\\boxed{}`` or GSM8K's ``#### N``; text outside the marks earns nothing. Every
distinct marked answer must equal the target, and none may name more candidates than the target
does (``3 or 4``, ``\\pm 4``, ``3, 4`` or ``\\{4\\}`` for the target 4 score 0; so do
``\\boxed{3} ... \\boxed{4}``). The compact register reads the whole completion as the answer.
Answers are compared by value (``rewards/extract.py``): ``2+2`` is 4, ``1 + x`` is ``x+1``, ``1, 2``
is the set ``\\{1, 2\\}``, "8 apples" is 8.

Data files use GSM8K's format: ``question`` and ``answer`` whose last line is ``#### N``
(a bare answer is accepted too: a number, an expression, a list or set of them); see ``_common``
for how records are split. With ``verifier="math-verify"`` a natural-register answer the value
comparison does not accept is checked by math-verify (LaTeX, roots, intervals, expressions;
``rewards/verifiers.py``), and data answers may be any LaTeX.
"""

from __future__ import annotations

import random
import re
from functools import lru_cache

from grpo_lab.rewards import strict, verifiers
from grpo_lab.rewards.extract import extract_hash, marked_answers, normalize_number, show, value_of, values_equal
from grpo_lab.rewards.format import has_answer_tags, has_boxed, is_integer
from grpo_lab.tasks._common import BaseTask, Draft, content_id
from grpo_lab.tasks.base import Problem, Score

_INSTRUCTION = "Give the final answer as a number inside <answer></answer> tags."
_NAMES = ("Tom", "Mia", "Sam", "Ana", "Leo", "Zoe", "Ben", "Ivy")
_ITEMS = ("apples", "pencils", "marbles", "books", "cookies", "stickers")
_CALCULATOR_RE = re.compile(r"<<[^>]*>>")  # GSM8K's calculator annotations
_target_value = lru_cache(maxsize=4096)(value_of)  # targets are the task's own strings, read once each


def _signed_terms(rng: random.Random, count: int) -> str:
    """``count`` one-digit terms joined by random + and - signs, e.g. "3-4+2"."""
    text = str(rng.randint(0, 9))
    for _ in range(count - 1):
        text += rng.choice("+-") + str(rng.randint(0, 9))
    return text


def _evaluate(expression: str) -> int:
    """Value of a + - * expression over integers (our own generated text, never user input)."""
    total = 0
    for sign, term in re.findall(r"([+-]?)([\d*]+)", expression):
        product = 1
        for factor in term.split("*"):
            product *= int(factor)
        total += -product if sign == "-" else product
    return total


def compact_draft(rng: random.Random, level: int) -> Draft:
    """A one-digit arithmetic expression; the completion is its value."""
    if level == 0:
        expression = f"{rng.randint(0, 9)}+{rng.randint(0, 9)}"
    elif level == 1:
        expression = _signed_terms(rng, 3)
    elif rng.random() < 0.5:
        expression = _signed_terms(rng, 4)
    else:
        expression = f"{rng.randint(2, 5)}*{rng.randint(2, 5)}{rng.choice('+-')}{rng.randint(0, 9)}"
    value = str(_evaluate(expression))
    return Draft(expression, f"{expression}=", value, value, level)


def _one_step(rng: random.Random, name: str, item: str) -> tuple[str, str, int]:
    kind = rng.choice(("more", "away", "bags"))
    if kind == "more":
        a, b = rng.randint(2, 20), rng.randint(2, 20)
        text = f"{name} has {a} {item} and gets {b} more. How many {item} does {name} have now?"
        return text, f"{a} + {b} = {a + b}", a + b
    if kind == "away":
        a = rng.randint(5, 20)
        b = rng.randint(1, a - 1)
        text = f"{name} has {a} {item} and gives {b} away. How many {item} are left?"
        return text, f"{a} - {b} = {a - b}", a - b
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    text = f"There are {a} bags with {b} {item} in each bag. How many {item} are there in total?"
    return text, f"{a} * {b} = {a * b}", a * b


def _two_step(rng: random.Random, name: str, item: str) -> tuple[str, str, int]:
    kind = rng.choice(("buy_give", "packs", "share"))
    if kind == "buy_give":
        a, b = rng.randint(2, 15), rng.randint(2, 15)
        c = rng.randint(1, a + b - 1)
        text = (f"{name} has {a} {item}, buys {b} more, then gives {c} to a friend. "
                f"How many {item} does {name} have now?")
        return text, f"{a} + {b} = {a + b}, {a + b} - {c} = {a + b - c}", a + b - c
    if kind == "packs":
        a, b, c = rng.randint(2, 6), rng.randint(2, 9), rng.randint(1, 10)
        text = (f"{name} buys {a} packs of {item} with {b} in each pack and already had {c}. "
                f"How many {item} does {name} have in total?")
        return text, f"{a} * {b} = {a * b}, {a * b} + {c} = {a * b + c}", a * b + c
    a, b, c = rng.randint(2, 9), rng.randint(2, 5), rng.randint(1, 9)
    text = (f"{name} puts {a * b} {item} into {b} boxes, the same number in each box, then adds "
            f"{c} more to one box. How many {item} are in that box now?")
    return text, f"{a * b} / {b} = {a}, {a} + {c} = {a + c}", a + c


def natural_draft(rng: random.Random, level: int) -> Draft:
    """A word problem; the solution shows the arithmetic, then the tagged answer."""
    if level == 0:
        a, b = rng.randint(1, 10), rng.randint(1, 10)
        text, work, value = f"What is {a} + {b}?", f"{a} + {b} = {a + b}", a + b
    else:
        make = _one_step if level == 1 else _two_step
        text, work, value = make(rng, rng.choice(_NAMES), rng.choice(_ITEMS))
    prompt = f"{text} {_INSTRUCTION}"
    return Draft(content_id(prompt), prompt, str(value), f"{work}\n<answer>{value}</answer>", level)


class MathTask(BaseTask):
    """Arithmetic with a strict exact-value reward: one marked answer, equal to the target."""

    name = "math"
    grading_version = 2  # strict grading (rewards/strict.py): hedges and unmarked answers earn 0

    def __init__(self, register: str = "compact", verifier: str = "extract", sandbox: str = "bwrap", **kw):
        if verifier not in ("extract", "math-verify"):
            raise ValueError(f"unknown math verifier {verifier!r}; known: extract, math-verify")
        if verifier == "math-verify":
            verifiers.require(sandbox)
        self.verifier = verifier
        self.sandbox = sandbox  # where math-verify runs (rewards/scoring)
        super().__init__(register, **kw)

    def _draft(self, rng: random.Random, level: int) -> Draft:
        return (compact_draft if self.register == "compact" else natural_draft)(rng, level)

    def _record_draft(self, record: dict) -> Draft:
        question, answer = str(record["question"]).strip(), str(record["answer"])
        raw = (extract_hash(answer) if extract_hash(answer) is not None else answer).strip()
        target = normalize_number(raw)
        if target is None and raw and (self.verifier == "math-verify" or value_of(raw) is not None):
            target = raw  # an expression, list or LaTeX answer, compared by value or by math-verify
        if target is None:
            raise ValueError(f"math record has no numeric answer (nor an expression, list or set): {answer[-80:]!r}; "
                             f"write it as a value ('5', '-3/4', '[1, 2]'), after '#### ' in a worked solution, or "
                             f"set reward.verifier: math-verify for LaTeX answers")
        if self.register == "compact":
            prompt, solution = question, target
        else:
            prompt = f"{question}\n{_INSTRUCTION}"
            work = _CALCULATOR_RE.sub("", answer.split("####")[0]).strip()
            solution = f"{work}\n<answer>{target}</answer>".lstrip()
        return Draft(content_id(question), prompt, target, solution, int(record.get("difficulty", 0)))

    def score(self, problems: list[Problem], completions: list[str]) -> list[Score]:
        """Reward 1.0 iff the answer is strictly right (see the module doc); format is reported apart."""
        readings = [self._reading(completion) for completion in completions]
        asked = [(str(p.target), m) for p, (marks, _) in zip(problems, readings, strict=True)
                 if len(set(marks)) <= strict.MAX_MARKS  # more is refused unread: never a batch of guesses
                 for m in marks if not strict.names_more(m, str(p.target), strict.STRUCTURE)
                 and self._needs_verifier(str(p.target), m)]
        if asked:  # one batch of the scoring worker; the per-mark calls below are answered from its cache
            verifiers.math_equal_all([t for t, _ in asked], [m for _, m in asked], self.sandbox)
        scores = []
        for problem, (marks, format_ok) in zip(problems, readings):
            target = str(problem.target)
            correct, answer = strict.grade(marks, target, lambda mark: self._equal(target, mark))
            scores.append(Score(correct, format_ok, answer, {"correct": correct, "format": float(format_ok)}))
        return scores

    def _reading(self, completion: str) -> tuple[list[str], bool]:
        """(the completion's marked answers, its format flag)."""
        if self.register == "compact":
            return ([completion.strip()] if completion.strip() else []), is_integer(completion)
        return marked_answers(completion), has_answer_tags(completion) or has_boxed(completion)

    def _needs_verifier(self, target: str, mark: str) -> bool:
        """Is math-verify asked about this mark: the exact comparison did not settle it, and the
        mark is one readable value (math-verify would read one of several side by side)?"""
        return (self.verifier == "math-verify" and self.register == "natural"
                and not values_equal(value_of(mark), _target_value(target))
                and strict.readable_latex(mark, target) and strict.one_sided(mark))

    def _equal(self, target: str, mark: str) -> tuple[bool, str | None]:
        """(does one marked answer equal the target, its normalised spelling or None)."""
        value = value_of(mark)
        shown = show(value) if value is not None else None
        if values_equal(value, _target_value(target)):
            return True, shown
        if self._needs_verifier(target, mark):
            equal, parsed = verifiers.math_equal(target, mark, self.sandbox)
            return equal, parsed if equal else shown
        return False, shown
