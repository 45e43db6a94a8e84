"""Final-answer extraction for math-style completions.

Models state answers in many shapes (``<answer>`` tags, ``\\boxed{}``, GSM8K's ``#### N``,
or just a number at the end of their reasoning). Rewards must not depend on which shape a
model picked, so every extractor returns a raw string and numbers are compared only after
:func:`normalize_number` has mapped equal values to one spelling ("1,000" == "1000.0").
"""

from __future__ import annotations

import re
from fractions import Fraction

_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_OPEN_TAG_RE = re.compile(r"<answer>", re.IGNORECASE)
_HASH_RE = re.compile(r"####\s*([^\n]*)")
# A minus counts as a sign only where it cannot be a binary operator ("10-3" -> 3, "=-3" -> -3).
# Comma groups must be exactly three digits so "1,2,3" stays three numbers.
_NUMBER_RE = re.compile(r"(?:(?<![\w)\].])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\w.])-?\.\d+")
_FRAC_RE = re.compile(r"^\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}$")
_WORD_RE = re.compile(r"[A-Za-z]+")


def extract_tagged(text: str) -> str | None:
    """Content of the last ``<answer>...</answer>``; an unclosed final tag runs to the end.

    The last tag wins because models often restate a draft answer before the final one;
    unclosed tags are accepted because generation may stop at the length limit.
    """
    found = _TAG_RE.findall(text)
    if found:
        return found[-1].strip()
    starts = list(_OPEN_TAG_RE.finditer(text))
    return text[starts[-1].end() :].strip() if starts else None


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), honouring nested braces.

    A regex cannot match balanced braces, and ``\\boxed{\\frac{1}{2}}`` is common, so scan.
    """
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    if not starts:
        return None
    depth, i = 1, starts[-1]
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j].strip()
    return None


def extract_hash(text: str) -> str | None:
    """Text after the last GSM8K-style ``#### `` marker, up to the end of its line."""
    found = _HASH_RE.findall(text)
    return found[-1].strip() if found else None


def last_number(text: str) -> str | None:
    """The last number-looking substring, raw (commas and sign kept)."""
    found = _NUMBER_RE.findall(text)
    return found[-1] if found else None


def last_word(text: str) -> str | None:
    """The last run of ASCII letters; a fallback for word answers given without tags."""
    found = _WORD_RE.findall(text)
    return found[-1] if found else None


def normalize_number(text: str | None) -> str | None:
    """Canonical spelling of a number, or None if ``text`` is not exactly one number.

    Integers print without a decimal point ("3.0" -> "3", "-0" -> "0", "1,000" -> "1000"),
    terminating decimals print minimal digits ("0.50" -> "0.5"), other rationals as "p/q",
    so two answers are equal exactly when their normalised strings are equal.
    Currency signs, a trailing "%" or "." and LaTeX ``\\frac{a}{b}`` are tolerated.
    """
    if text is None:
        return None
    s = text.strip().replace(",", "").replace("\\$", "").replace("$", "")
    s = s.rstrip(".").removesuffix("%").removesuffix("\\%")
    frac = _FRAC_RE.match(s)
    if frac:
        s = f"{frac.group(1)}/{frac.group(2)}"
    try:
        value = Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    return _format_fraction(value)


def _format_fraction(value: Fraction) -> str:
    """Integers plainly, terminating decimals exactly, everything else as p/q."""
    if value.denominator == 1:
        return str(value.numerator)
    den = value.denominator
    twos = fives = 0
    while den % 2 == 0:
        den, twos = den // 2, twos + 1
    while den % 5 == 0:
        den, fives = den // 5, fives + 1
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    scaled = abs(value.numerator) * (10**places // value.denominator)
    digits = str(scaled).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def extract_answer(text: str) -> str | None:
    """The raw final answer: ``<answer>`` tags, then ``\\boxed{}``, then ``####``, then the
    last number in the text. Returns None when the text holds no candidate at all."""
    for extractor in (extract_tagged, extract_boxed, extract_hash):
        found = extractor(text)
        if found is not None:
            return found
    return last_number(text)


def extract_number(text: str) -> str | None:
    """The normalised final number of a completion, or None.

    When the explicit answer is not a bare number ("<answer>8 apples</answer>"), its last
    number is used, so wording around the number inside the tags is not punished.
    """
    raw = extract_answer(text)
    if raw is None:
        return None
    exact = normalize_number(raw)
    return exact if exact is not None else normalize_number(last_number(raw))
