"""Program synthesis scored by hidden tests in the sandbox; reward = fraction passed.

Compact: infer a Python expression in x from f(0), f(1), f(2), e.g.
"f(0)=1;f(1)=4;f(2)=7;f(x)=" -> "3*x+1", tested at x = 0..4 as ``f = lambda x: <expr>``.
Showing f(0) first makes the constant term a copy and the slope a difference, a pattern a
tiny model can generalise. Levels: 0 x+c, x-c, c-x, c*x; 1 a*x+b, a*x-b; 2 quadratics
(x*x+b, x*x+x+b, x*x+a*x, a*x*x, x*x-b). All are polynomials of degree <= 2, so the three
shown values determine the answer, and partial credit is natural: the line through the
first two points passes 2 of 5 tests on a quadratic, a right constant term passes 1.

Natural: MBPP-style "Write a Python function ..." (see ``_code_families``); the answer is
the code in a fenced python block (without a fence the whole text is run).
Data files use MBPP's format: ``text``, ``test_list``, optional ``code`` (the solution)
and ``test_setup_code``; see ``_common`` for how records are split.
"""

from __future__ import annotations

import random

from grpo_lab.rewards.format import (
    called_names,
    defined_names,
    fenced_code,
    normalize_code,
    parses_as_expression,
)
from grpo_lab.rewards.sandbox import (
    BadTestError,
    Sandbox,
    compile_test,
    isolation,
    sandbox_for,
)
from grpo_lab.tasks import _code_families
from grpo_lab.tasks._common import BaseTask, Draft, content_id
from grpo_lab.tasks.base import Problem, Score

SHOWN_X = (0, 1, 2)
TESTED_X = (0, 1, 2, 3, 4)
# Seconds per program (all its tests together) and memory per sandbox child.
COMPACT_TIMEOUT_S = 1.0
NATURAL_TIMEOUT_S = 2.0
MEMORY_MB = 256
_INSTRUCTION = "Reply with the function in a ```python code block."


def _compact_expression(rng: random.Random, level: int) -> str:
    """A polynomial from the level's families, spelled the way the solution should be.

    Offsets go up to 99 (version 2): with single digits, levels 0 and 1 held 35 and 144 distinct
    problems, so a 200-problem test set was 34 problems repeated and GRPO memorised the train split
    (train reward 0.8, test flat) instead of learning to read the examples."""
    a, b = rng.randint(2, 9), rng.randint(1, 99)
    if level == 0:
        return rng.choice((f"x+{b}", f"x-{b}", f"{b}-x", f"{a}*x"))
    if level == 1:
        return rng.choice((f"{a}*x+{b}", f"{a}*x-{b}"))
    b0 = rng.randint(0, 9)
    plain = "x*x" if b0 == 0 else f"x*x+{b0}"
    with_x = "x*x+x" if b0 == 0 else f"x*x+x+{b0}"
    return rng.choice((plain, with_x, f"x*x+{a}*x", f"{a}*x*x", f"x*x-{b}"))


def compact_draft(rng: random.Random, level: int) -> Draft:
    """Input/output examples of a hidden polynomial; the completion is the expression."""
    return expression_draft(_compact_expression(rng, level), level)


def expression_draft(expression: str, level: int) -> Draft:
    f = eval(f"lambda x: {expression}")  # trusted: built just above from digits and x
    prompt = "".join(f"f({x})={f(x)};" for x in SHOWN_X) + "f(x)="
    tests = [f"f({x})=={f(x)}" for x in TESTED_X]
    return Draft(expression, prompt, tests, expression, level)


def _natural_prompt(description: str, tests: list[str]) -> str:
    return f"{description}\nYour code should pass this test:\n{tests[0]}\n{_INSTRUCTION}"


def natural_draft(rng: random.Random, level: int) -> Draft:
    """A function-writing problem from the built-in families of this level."""
    family = rng.choice([f for f in _code_families.FAMILIES if f.level == level])
    c = rng.choice(family.consts)
    name = family.name.format(c=c)
    description = f"Write a Python function `{name}({family.args})` that {family.desc.format(c=c)}."
    tests = list(_code_families.tests(family, c))
    solution = f"```python\n{_code_families.source(family, c)}```"
    return Draft(f"{family.fid}:{c}", _natural_prompt(description, tests), tests, solution, level)


def _program(register: str, completion: str, tests: list[str]) -> tuple[str | None, bool, str]:
    """(code to run or None, format_ok, normalised answer) for one completion."""
    if register == "compact":
        if not parses_as_expression(completion):
            return None, False, completion.strip()
        # Newlines inside the parentheses keep a trailing comment from eating the ")".
        return f"f = lambda x: (\n{completion.strip()}\n)", True, normalize_code(completion)
    block = fenced_code(completion)
    code = block if block is not None else completion
    format_ok = block is not None and bool(defined_names(block) & called_names(tests))
    return code, format_ok, normalize_code(code)


class CodeTask(BaseTask):
    """Expression (compact) or function (natural) synthesis with test-fraction reward.

    ``sandbox`` is how programs are isolated (``bwrap``, or ``unsafe-local`` for trusted
    code); it is checked here, so a machine without bubblewrap fails before any training."""

    name = "code"
    generator_version = 2  # compact offsets widened to 1..99
    record_fields = {"prompt": "text", "tests": "test_list", "solution": "code", "difficulty": "difficulty"}
    needs = ("prompt", "tests")

    def __init__(self, register: str = "compact", sandbox: str = "bwrap", **kw):
        isolation.check(sandbox)
        self.sandbox = sandbox
        super().__init__(register, **kw)

    def _sandbox(self) -> Sandbox:
        return sandbox_for(self.sandbox, MEMORY_MB)

    def _draft(self, rng: random.Random, level: int) -> Draft:
        return (compact_draft if self.register == "compact" else natural_draft)(rng, level)

    def _record_draft(self, record: dict) -> Draft:
        text = str(record["text"]).strip()
        setup = str(record.get("test_setup_code") or "").strip()
        # Setup code (imports, fixtures) travels with each test; Problem has no slot for it.
        tests = [f"{setup}\n{t}" if setup else str(t) for t in record["test_list"]]
        if not tests:
            raise ValueError(f"code record without tests: {text[:80]!r}")
        for test in tests:  # a test the grader cannot judge safely fails here, not mid-run
            try:
                compile_test(test)
            except BadTestError as e:
                raise BadTestError(f"record {text[:60]!r}, test {test!r}: {e}") from None
        code = str(record.get("code") or "").strip()
        if self.register == "compact":
            prompt, solution = text, code
        else:
            prompt = _natural_prompt(text, [str(t) for t in record["test_list"]])
            solution = f"```python\n{code}\n```" if code else ""
        return Draft(content_id(text), prompt, tests, solution, int(record.get("difficulty", 0)))

    def score(self, problems: list[Problem], completions: list[str]) -> list[Score]:
        """All runnable completions go to the sandbox in one call; unparsable compact
        expressions score 0 without running."""
        pairs = zip(problems, completions, strict=True)
        prepared = [_program(self.register, c, list(p.target)) for p, c in pairs]
        runnable = [i for i, (code, _, _) in enumerate(prepared) if code is not None]
        programs = [(prepared[i][0], [compile_test(t) for t in problems[i].target]) for i in runnable]
        timeout = COMPACT_TIMEOUT_S if self.register == "compact" else NATURAL_TIMEOUT_S
        passed = self._sandbox().run(programs, timeout) if programs else []
        rates = {i: sum(p) / len(p) if p else 0.0 for i, p in zip(runnable, passed)}
        scores = []
        for i, (_, format_ok, answer) in enumerate(prepared):
            rate = rates.get(i, 0.0)
            components = {"pass_rate": rate, "correct": float(rate == 1.0), "format": float(format_ok)}
            scores.append(Score(rate, format_ok, answer, components))
        return scores
