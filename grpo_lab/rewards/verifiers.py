"""The field's math verifier, math-verify (Hugging Face), for answers in the natural register.

The built-in extractor (``extract.py``) compares exact values (rationals, polynomials, lists and
sets of them), which is what the compact register and GSM8K need. Natural-register answers come as
LaTeX, ``\\boxed{}``, fractions, roots, sets, intervals and expressions; math-verify parses both
sides to sympy and compares them. It is given one marked final answer (the content of a tag or
box, chosen by the task after its hedge checks, ``rewards/strict.py``), never the whole
completion: math-verify reads the last answer-like span of a text, which would let unmarked or
hedged text earn credit. math-verify (and the sympy parsing under it) runs in the sandboxed scoring
worker (``rewards/scoring``), never in the trainer: its deadline bounds every parse and comparison.
"""

from __future__ import annotations

from grpo_lab.rewards.scoring import check as check_isolation, math_verify_equal


def available() -> bool:
    try:
        import math_verify  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def require(isolation: str = "bwrap") -> None:
    if not available():
        raise ValueError("reward.verifier math-verify needs the math-verify package: pip install 'grpo-lab[verifiers]'")
    check_isolation(isolation)


def math_equal_all(targets: list[str], marks: list[str], isolation: str = "bwrap") -> list[bool]:
    """Per (target, marked answer), are they equal: one batch of the scoring worker, whose cache
    then answers ``math_equal`` on the same pairs without another round trip."""
    return math_verify_equal([str(t) for t in targets], marks, isolation)


def math_equal(target: str, marked: str, isolation: str = "bwrap") -> tuple[bool, str | None]:
    """(is the marked answer equal to ``target``, the target's text when it is, else None); the
    answer is parsed as LaTeX math first, then as plain text, in the scoring worker."""
    equal = math_verify_equal([str(target)], [marked], isolation)[0]
    return equal, str(target) if equal else None
