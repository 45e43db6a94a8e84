"""Final answers of math-style completions, and the ``extract`` verifier's comparison by value.

In the natural register an answer counts only where the completion marks it: inside
``<answer>`` tags, a ``\\boxed{}`` or after GSM8K's ``#### ``. :func:`marked_answers` returns every
marked answer, so a task can refuse a completion whose marks disagree (``\\boxed{3} or \\boxed{4}``)
instead of believing the last one. Unmarked text earns nothing: "the last number in the text" is
what a hedging model would learn to exploit.

:func:`same_value` compares a marked answer with a target by value: numbers exactly as rationals
("1,000" == "1000.0", "\\frac{3}{4}" == "0.75"), expressions as canonical polynomials (``2+2`` == 4,
``1 + x`` == ``x+1``; ``algebra.py``), and a list or set target item by item, in any order (``1, 2``
== ``\\{2, 1\\}``); a tuple or interval keeps its order and its brackets. A number among plain words
("8 apples", "The answer is 8.") is that number: words before it only from a short lead-in list,
words after it only units, never a qualifier ("max 8", "8 ish", "8 thousand"); see :func:`lone_number`.
Markup that wraps the whole answer is read through (:func:`clean`: ``**18**``, ``\\mathbf{18}``,
U+2212 minus); a number is a plain decimal of at most MAX_DIGITS characters, never ``1e5000``. Hedges are refused before any comparison (``strict.py``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

from grpo_lab.rewards import algebra, strict

_OPEN_TAG_RE = re.compile(r"<answer>", re.IGNORECASE)
_CLOSE_TAG_RE = re.compile(r"</answer>", re.IGNORECASE)
_HASH_RE = re.compile(r"####\s*([^\n]*)")
_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_FRAC_RE = re.compile(r"^\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}$")
_RELATION_RE = re.compile(r"[<>≤≥≠≈]|\\(?:le|ge|leq|geq|ne|neq|approx|sim|lt|gt)(?![A-Za-z])")
_UNIT_WRAP_RE = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox)\s*\{([^{}]*)\}")
_PLAIN_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}(?![A-Za-z])")
# Words that may lead in to a number: nothing else may stand before it.
_LEAD_IN = frozenset("the a final answer answers is are so thus therefore hence total result value it equals we get "
                     "has have there".split())
# Words after a number that qualify it rather than name its unit: "8 max", "8 thousand", "8 ish".
_QUALIFIERS = frozenset(
    "not no minus negative plus times over under than less more least most about around approximately approx "
    "roughly nearly almost between and to or half twice double triple squared cubed dozen hundred thousand "
    "million billion trillion max maximum min minimum upto up within at ish tops circa ca odd some "
    "give take either onwards onward upward upwards downward downwards above below beyond lower higher fewer "
    "greater smaller larger bigger inclusive exclusive till until through thru something probably maybe "
    "perhaps possibly rounded estimate estimated guess".split())
_PAREN_WORDS_RE = re.compile(r"\(\s*([A-Za-z][A-Za-z ]*)\)")
_PHRASE_RE = re.compile(r"(?P<before>(?:[A-Za-z]{2,}:?\s+)*?)(?P<number>[^\sA-Za-z]+)"
                        r"(?P<after>(?:\s+[A-Za-z]{2,})*)\s*\.?")
_DECIMAL_RE = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
# Thousands groups split by a blank (normal, no-break or thin space): exactly three digits each.
_SPACED_THOUSANDS_RE = re.compile(r"(?<![\d.])\d{1,3}(?:[ \u00a0\u2009\u202f]\d{3})+(?![\d.])")
_SPACE_RE = re.compile(r"[ \u00a0\u2009\u202f]")
_WHOLE_WRAP_RE = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|boldsymbol)\s*\{([^{}]*)\}")
_CURRENCY = "€£¥₹"
MAX_DIGITS = 64  # characters of a plain number; a longer one is not an answer
MAX_ITEMS = 32  # a list or set answer longer than this is not compared


class Value(NamedTuple):
    """An answer by value: ``kind`` and brackets as in ``strict.Shape``, items as canonical
    polynomials (sorted without repeats for sets and lists, whose order does not matter)."""

    kind: str
    opener: str
    closer: str
    items: tuple[algebra.Canonical, ...]


def extract_tagged(text: str) -> str | None:
    """Content of the last ``<answer>...</answer>``; an unclosed final tag runs to the end
    (generation may stop at the length limit)."""
    found = all_tagged(text)
    return found[-1] if found else None


def all_tagged(text: str, closed_only: bool = False) -> list[str]:
    """Contents of every closed ``<answer>`` tag (each opener with the first closer after it, as
    a non-greedy match would pair them), then of an unclosed final one unless ``closed_only``,
    stripped; one pass, so a text of many openers costs what its length does."""
    closers = iter(_CLOSE_TAG_RE.finditer(text))
    found, position = [], 0
    for opener in _OPEN_TAG_RE.finditer(text):
        if opener.start() < position:
            continue
        closer = next(closers, None)
        while closer is not None and closer.start() < opener.end():
            closer = next(closers, None)
        if closer is None:
            if not closed_only:
                found.append(text[opener.end():].strip())
            break
        found.append(text[opener.end():closer.start()].strip())
        position = closer.end()
    return found


def all_boxed(text: str) -> list[str]:
    """Contents of every closed ``\\boxed{...}`` (or ``\\fbox{...}``), nested ones included, in
    order of their openers; one linear scan (escaped braces ``\\{`` ``\\}`` are content)."""
    openers = {m.end() - 1 for m in _BOX_RE.finditer(text)}
    stack: list[tuple[int, int]] = []  # (brace depth, content start) of open boxes
    found: list[tuple[int, str]] = []
    depth = 0
    for j, ch in enumerate(text):
        if (ch == "{" or ch == "}") and j and text[j - 1] == "\\":
            continue
        if ch == "{":
            depth += 1
            if j in openers:
                stack.append((depth, j + 1))
        elif ch == "}":
            if stack and stack[-1][0] == depth:
                start = stack.pop()[1]
                found.append((start, text[start:j].strip()))
            depth -= 1
    return [content for _, content in sorted(found)]


def extract_hash(text: str) -> str | None:
    """Text after the last GSM8K-style ``#### `` marker, up to the end of its line."""
    found = _HASH_RE.findall(text)
    return found[-1].strip() if found else None


def marked_answers(text: str, boxes: bool = True, hash_marks: bool = True) -> list[str]:
    """Every distinct non-empty marked answer, stripped: tags, and boxes and ``#### `` lines when
    asked for. A tag holding just a box counts as the box's content; marks that differ only in
    blanks are one."""
    marks = all_tagged(text) + (all_boxed(text) if boxes else []) + (_HASH_RE.findall(text) if hash_marks else [])
    distinct: dict[str, str] = {}  # blank-collapsed text -> the first such mark, as written
    for mark in marks:
        mark = _unbox(mark.strip())
        key = " ".join(mark.split())
        if key:
            distinct.setdefault(key, mark)
    return list(distinct.values())


def _unbox(mark: str) -> str:
    """The content of a mark that is exactly one box, else the mark."""
    opener = _BOX_RE.match(mark)
    if opener is None or not mark.endswith("}"):
        return mark
    depth = 0
    for ch in mark[opener.end():-1]:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return mark
    return mark[opener.end():-1].strip() if depth == 0 else mark


def normalize_number(text: str | None) -> str | None:
    """Canonical spelling of a number, or None if ``text`` is not exactly one number.

    Integers print without a decimal point ("3.0" -> "3", "-0" -> "0", "1,000" -> "1000"),
    terminating decimals print minimal digits ("0.50" -> "0.5"), other rationals as "p/q",
    so two answers are equal exactly when their normalised strings are equal.
    Currency signs, a trailing "%" or "." and LaTeX ``\\frac{a}{b}`` are tolerated.
    """
    value = _number(text)
    return None if value is None else format_fraction(value)


def _number(text: str | None) -> Fraction | None:
    """A plain decimal or ``p/q`` of plain decimals (no exponent: ``1e5000`` is not an answer, and
    its digits would cost what the exponent says), at most MAX_DIGITS characters of digits."""
    if text is None:
        return None
    s = clean(text).replace("\\$", "").replace("$", "")
    s = _SPACED_THOUSANDS_RE.sub(lambda m: _SPACE_RE.sub("", m.group()), s.strip()).replace(",", "")
    s = s.rstrip(".").removesuffix("\\%").removesuffix("%").strip(_CURRENCY).strip()
    frac = _FRAC_RE.match(s)
    if frac:
        s = f"{frac.group(1).strip()}/{frac.group(2).strip()}"
    parts = s.split("/")
    if len(s) > MAX_DIGITS or len(parts) > 2 or not all(_DECIMAL_RE.fullmatch(part) for part in parts):
        return None
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None


def clean(text: str) -> str:
    """``text`` without markup that wraps a whole answer and changes nothing about its value:
    markdown emphasis or code (``**18**``, `` `18` ``), one ``\\mathbf{}``/``\\text{}``-like wrapper,
    and with the Unicode minus sign read as "-". Only a wrapper of the whole answer is removed, so
    nothing inside it (a hedge included) is hidden or opened."""
    s = text.strip().replace("\u2212", "-")
    for _ in range(4):
        before = s
        for mark in ("**", "__", "*", "_", "`"):
            if len(s) > 2 * len(mark) and s.startswith(mark) and s.endswith(mark):
                s = s[len(mark):-len(mark)].strip()
        wrapped = _WHOLE_WRAP_RE.fullmatch(s)
        if wrapped:
            s = wrapped.group(1).strip()
        if s == before:
            break
    return s


def format_fraction(value: Fraction) -> str:
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


def lone_number(text: str) -> Fraction | None:
    """The number of a short phrase ("8 apples", "The answer is 8.", "Answer: 8"), or None.

    Words may stand before the number only when they are a plain lead-in (``_LEAD_IN``: "the
    answer is"), and after it only as up to three unit words that are not qualifiers
    (``_QUALIFIERS``: "8 max", "8 ish", "8 thousand"); a word before the number that is not a
    lead-in ("max 8", "within 8", "approx 8") refuses the phrase, so an unknown qualifier before
    the number costs the answer, never earns it."""
    s = _UNIT_WRAP_RE.sub(lambda m: f" {m.group(1)} ", text)
    s = _PAREN_WORDS_RE.sub(lambda m: f" {m.group(1)} ", s)
    phrase = _PHRASE_RE.fullmatch(s.strip())
    if phrase is None:
        return None
    before, after = phrase.group("before").split(), phrase.group("after").split()
    if any(w.rstrip(":").lower() not in _LEAD_IN for w in before) or len(after) > 3:
        return None
    if any(w.lower() in _QUALIFIERS for w in after):
        return None
    return _number(phrase.group("number"))


def scalar(text: str) -> algebra.Canonical | None:
    """One value: a number, a polynomial, or a number among words. An equation states its last
    side when every other side is a bare name or has the same value ("x = 4" and "2+2 = 4" are 4,
    "3 = 4" is nothing); a relation such as "x < 4" or "x \\approx 4" is not a value."""
    s = strict.unwrap(text)
    if _RELATION_RE.search(s):
        return None
    *sides, last = s.split("=")
    value = _side(last)
    if value is None or any(side.strip() and not strict.is_name(side) and _side(side) != value for side in sides):
        return None
    return value


def _side(text: str) -> algebra.Canonical | None:
    s = text.strip()
    number = _number(s)
    if number is not None:
        return algebra.of_constant(number)
    poly = algebra.polynomial(s)
    if poly is None or algebra.constant(poly) is None:
        lone = lone_number(s)
        if lone is not None:
            return algebra.of_constant(lone)
    return poly


def value_of(text: str) -> Value | None:
    """The value of an answer, or None when one of its items has none."""
    layout = strict.shape(clean(text))
    if len(layout.items) > MAX_ITEMS or not layout.items:
        return None
    items = []
    for item in layout.items:
        canonical = scalar(item)
        if canonical is None:
            return None
        items.append(canonical)
    if layout.kind in ("set", "list"):
        ordered = sorted(items)
        items = [c for i, c in enumerate(ordered) if i == 0 or c != ordered[i - 1]]
    return Value(layout.kind, layout.opener, layout.closer, tuple(items))


def same_value(answer: str, target: str) -> bool:
    """True iff ``answer`` has the value of ``target`` (see the module doc)."""
    return values_equal(value_of(answer), value_of(target))


def values_equal(got: Value | None, want: Value | None) -> bool:
    """True iff two values are equal: sets and lists as unordered collections of distinct items,
    tuples and intervals in order and with the same brackets, a scalar only to a scalar."""
    if want is None or got is None or want.items != got.items:
        return False
    if want.kind in ("set", "list"):
        return got.kind in ("set", "list")
    return (got.kind, got.opener, got.closer) == (want.kind, want.opener, want.closer)


def show(value: Value) -> str:
    """A deterministic spelling of a value, for diversity statistics ("7", "x^2 + 1", "{1, 2}")."""
    parts = [format_fraction(c) if (c := algebra.constant(item)) is not None else algebra.describe(item)
             for item in value.items]
    joined = ", ".join(parts)
    return {"set": f"{{{joined}}}", "tuple": f"{value.opener}{joined}{value.closer}"}.get(value.kind, joined)
