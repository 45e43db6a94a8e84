"""The field's math verifier, math-verify (Hugging Face), for answers in the natural register.

The built-in extractor (``extract.py``) compares one normalised number, which is what the compact
register and GSM8K need. Natural-register answers come as LaTeX, ``\\boxed{}``, fractions, roots,
sets, intervals and expressions; math-verify parses both sides to sympy and compares them. The
answer inside ``<answer>`` tags is parsed first (the task's own format), then the whole text.
"""

from __future__ import annotations

from functools import lru_cache

from grpo_lab.rewards.extract import extract_tagged


def available() -> bool:
    try:
        import math_verify  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def require() -> None:
    if not available():
        raise ValueError("reward.verifier math-verify needs the math-verify package: pip install 'grpo-lab[verifiers]'")


@lru_cache(maxsize=4096)
def _gold(target: str):
    from math_verify import parse

    return parse(f"${target}$") or parse(target)


def math_equal(target: str, completion: str) -> tuple[bool, str | None]:
    """(is the completion's answer equal to ``target``, the parsed answer's text or None)."""
    from math_verify import parse, verify

    tagged = extract_tagged(completion)
    try:
        answer = parse(f"${tagged}$") if tagged is not None else []
        if not answer:
            answer = parse(completion)
        if not answer:
            return False, None
        return bool(verify(_gold(str(target)), answer)), str(answer[-1])
    except Exception:  # a parser failure on model text is a wrong answer, not a crashed run
        return False, None
