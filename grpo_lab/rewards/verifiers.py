"""The field's math verifier, math-verify (Hugging Face), for answers in the natural register.

The built-in extractor (``extract.py``) compares exact values (rationals, polynomials, lists and
sets of them), which is what the compact register and GSM8K need. Natural-register answers come as
LaTeX, ``\\boxed{}``, fractions, roots, sets, intervals and expressions; math-verify parses both
sides to sympy and compares them. It is given one marked final answer (the content of a tag or
box, chosen by the task after its hedge checks, ``rewards/strict.py``), never the whole
completion: math-verify reads the last answer-like span of a text, which would let unmarked or
hedged text earn credit. math-verify bounds parsing and comparison with SIGALRM, which only the
main thread may set: elsewhere it runs unbounded rather than failing every answer.
"""

from __future__ import annotations

import threading
from functools import lru_cache

TIMEOUT_S = 5  # math-verify's own default per parse and per comparison


def available() -> bool:
    try:
        import math_verify  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def require() -> None:
    if not available():
        raise ValueError("reward.verifier math-verify needs the math-verify package: pip install 'grpo-lab[verifiers]'")


def _timeout() -> int | None:
    return TIMEOUT_S if threading.current_thread() is threading.main_thread() else None


@lru_cache(maxsize=4096)
def _gold(target: str):
    from math_verify import parse

    return parse(f"${target}$", parsing_timeout=_timeout()) or parse(target, parsing_timeout=_timeout())


def math_equal(target: str, marked: str) -> tuple[bool, str | None]:
    """(is the marked answer equal to ``target``, the parsed answer's text or None); the answer
    is parsed as LaTeX math first, then as plain text."""
    from math_verify import parse, verify

    try:
        answer = parse(f"${marked}$", parsing_timeout=_timeout())
        if not answer:
            answer = parse(marked, parsing_timeout=_timeout())
        if not answer:
            return False, None
        return bool(verify(_gold(str(target)), answer, timeout_seconds=_timeout())), str(answer[-1])
    except Exception:  # a parser failure on model text is a wrong answer, not a crashed run
        return False, None
