"""Strict grading: an answer that names more candidates than the reference answer earns nothing.

GRPO learns whatever a reward pays for. A grader that reads "the last number" or takes the first
item of a list pays for hedging: ``3 or 4``, ``\\pm 4``, ``3, 4`` and ``\\{3, 4\\}`` all contain the
right 4. A careful grader gives them 0, and so do the math, logic and reasoning-gym tasks: before
an answer is compared with the reference, :func:`names_more` counts its candidates in each of a
few measures and refuses it when any count exceeds the reference's own. The measures are relative
to the reference, so a reference that itself says "x = 1 or x = 2" or lists three values lets the
answer do as much, and no more.

Measures (:func:`counts`):

- ``alternatives``: the word "or" and plus-minus signs (``±``, ``∓``, ``\\pm``, ``\\mp``, ``+/-``);
- ``items``: top-level items separated by commas, semicolons or line breaks (a thousands group such
  as ``1,000`` is one number), inside the outer brackets of a set, tuple or interval;
- ``collection``: 1 for a set, tuple, interval or list, 0 for a single value, so ``\\{4\\}`` is not 4;
- ``numbers`` and ``words``: runs of digits and of letters, for free-text answers (reasoning-gym)
  whose scorers read only the first number or the first words.

Everything here is a pure, linear-time function of the text.
"""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

_OR_RE = re.compile(r"(?<![A-Za-z\\])or(?![A-Za-z])", re.IGNORECASE)
_PM_RE = re.compile(r"±|∓|\\pm(?![A-Za-z])|\\mp(?![A-Za-z])|\+\s*/\s*-")
_THOUSANDS_RE = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?!\d|,\d)")
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")
_WORD_RE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]+")  # a LaTeX command such as \frac is markup, not a word
_DELIMITERS = (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_TEXT_RE = re.compile(r"\\(?:text|textrm|textbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_COMMAND_RE = re.compile(r"\\([A-Za-z]+|.)")
_NAME_RE = re.compile(r"\s*(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?\w+\}?)?(?:\([A-Za-z]\))?\s*")
# LaTeX that builds one value: a math answer may use these freely. Any other command (a relation,
# a set operator, an accent, a big operator, "\\quad", "\\to", "\\otimes") is how two values hide
# side by side from a lenient parser, and is read only when the reference uses it too.
VALUE_COMMANDS = frozenset(
    "frac dfrac tfrac sqrt cdot times div pm mp left right text textrm textbf mathrm mbox mathbf mathit "
    "displaystyle infty pi theta alpha beta gamma delta epsilon varepsilon lambda mu sigma phi varphi omega tau "
    "rho eta zeta xi kappa nu chi psi Delta Gamma Theta Lambda Sigma Phi Omega sin cos tan cot sec csc arcsin "
    "arccos arctan sinh cosh tanh log ln exp lg binom".split()) | set("{}$%,;:! ")
_BINARY_OPS_RE = re.compile(r"(?:\\cdot|\\times|\\div|[*/])\s*(?:\\cdot(?![A-Za-z])|\\times(?![A-Za-z])|\\div(?![A-Za-z])|[*/])")
_EMPTY_GROUP_RE = re.compile(r"(?<!\\)\{\s*\}")
_DEGREES_RE = re.compile(r"\^\s*(?:\\circ|\{\s*\\circ\s*\})\s*$|\\degree\s*$")
_NULL_DELIMITER_RE = re.compile(r"\\(?:left|right)\s*\.")
_DOLLAR_RE = re.compile(r"(?<!\\)\$")
_MATRIX_RE = re.compile(r"\\begin\{([pbvBV]?matrix)\}(.*?)\\end\{\1\}", re.DOTALL)
_OPEN, _CLOSE = "([{", ")]}"
_SEPARATORS = ",;\n"

STRUCTURE = ("alternatives", "items", "collection")  # what math and logic compare; values do the rest
ALL = (*STRUCTURE, "numbers", "words")
MAX_MARKS = 4  # more distinct marked answers than this is a list of guesses, not an answer
MAX_LATEX = 2000  # characters of a math answer read for readable_latex; longer is not a short answer


class Shape(NamedTuple):
    """How an answer is laid out: ``kind`` is scalar, list, set or tuple (tuples include intervals,
    whose ``opener``/``closer`` tell ``(1,2]`` from ``[1,2]``); ``items`` are the raw item texts."""

    kind: str
    opener: str
    closer: str
    items: tuple[str, ...]


class Counts(NamedTuple):
    """Candidates an answer names, in each measure of the module doc."""

    alternatives: int
    items: int
    collection: int
    numbers: int
    words: int


def unwrap(text: str) -> str:
    """``text`` without surrounding blanks, math delimiters ($...$, \\(...\\), \\[...\\]) and
    ``\\left``/``\\right`` sizing, which change nothing about the value."""
    s = text.strip().replace("\\left", "").replace("\\right", "")
    for opener, closer in _DELIMITERS:
        if len(s) >= len(opener) + len(closer) and s.startswith(opener) and s.endswith(closer):
            s = s[len(opener):len(s) - len(closer)].strip()
    return s


def shape(text: str) -> Shape:
    """The layout of an answer; brackets that enclose the whole answer and hold a top-level
    separator make it a set (braces) or a tuple/interval (parentheses and square brackets).
    Text inside ``\\text{}`` is read as text, so ``3 \\text{, } 4`` is two items."""
    s = _TEXT_RE.sub(lambda m: f" {m.group(1)} ", unwrap(text))
    braces = s.startswith("\\{") and s.endswith("\\}")
    plain = s.replace("\\{", "{").replace("\\}", "}")
    if len(plain) >= 2 and plain[0] in _OPEN and plain[-1] in _CLOSE and _encloses(plain):
        inner = _split(plain[1:-1])
        if braces or (plain[0] == "{" and len(inner) > 1):
            return Shape("set", "{", "}", inner)
        if len(inner) > 1:
            return Shape("tuple", plain[0], plain[-1], inner)
    items = _split(plain)
    return Shape("list" if len(items) > 1 else "scalar", "", "", items)


def counts(text: str) -> Counts:
    """The candidate counts of an answer in every measure (see the module doc)."""
    layout = shape(text)
    return Counts(
        alternatives=len(_OR_RE.findall(text)) + len(_PM_RE.findall(text)),
        items=len(layout.items),
        collection=int(layout.kind != "scalar"),
        numbers=len(_NUMBER_RE.findall(_THOUSANDS_RE.sub("0", text))),
        words=len(_WORD_RE.findall(text)),
    )


def names_more(answer: str, reference: str, measures: tuple[str, ...] = STRUCTURE) -> bool:
    """True iff ``answer`` names more candidates than ``reference`` in any of ``measures``."""
    mine, theirs = counts(answer), counts(reference)
    return any(getattr(mine, m) > getattr(theirs, m) for m in measures)


def readable_latex(text: str, reference: str = "") -> bool:
    """True iff ``text`` reads as one value to a lenient LaTeX parser: every command is in
    VALUE_COMMANDS or used by ``reference``; "$" and ``\\left``/``\\right`` pair (no null
    delimiter ``\\left.``, no empty group ``{}``, unless the reference has one); no two binary
    operators in a row (``\\div\\div``); no bare "&", "...", "…" or unpaired "|". The cells of a
    matrix environment may be separated by "&" and "\\\\"; a trailing ``^\\circ`` is degrees.
    Past MAX_LATEX characters, False."""
    if len(text) > MAX_LATEX:
        return False
    cells = _DEGREES_RE.sub("", _MATRIX_RE.sub(lambda m: m.group(2).replace("&", " ").replace("\\\\", " "), text))
    if "&" in cells or "..." in cells or "…" in cells or cells.count("|") % 2 or _BINARY_OPS_RE.search(cells):
        return False
    if len(_DOLLAR_RE.findall(cells)) % 2 or cells.count("\\left") != cells.count("\\right"):
        return False
    if any(pattern.search(cells) and not pattern.search(reference) for pattern in (_EMPTY_GROUP_RE, _NULL_DELIMITER_RE)):
        return False
    allowed = VALUE_COMMANDS | set(_COMMAND_RE.findall(reference))
    return all(command in allowed for command in _COMMAND_RE.findall(cells))


def one_sided(text: str) -> bool:
    """True unless ``text`` is an equation whose left side is not a bare name ("x", "f(x)", "a_1",
    "\\theta"): "3 = 4" and "x = 3 = 4" state two values, "x = 4" states one."""
    return "=" not in text or is_name(text.rsplit("=", 1)[0])


def is_name(text: str) -> bool:
    """True iff ``text`` is a bare name: one letter or Greek command, an optional subscript and
    an optional "(x)"."""
    return _NAME_RE.fullmatch(text) is not None


def _encloses(s: str) -> bool:
    """True iff the bracket opened at ``s[0]`` closes at ``s[-1]`` (of any kind: intervals mix)."""
    depth = 0
    for i, ch in enumerate(s):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


def _split(s: str) -> tuple[str, ...]:
    """Top-level items of ``s`` (outside brackets); commas inside a thousands group do not split.
    Empty items are dropped, so a trailing comma is not a second candidate."""
    protected = {m.start() + i for m in _THOUSANDS_RE.finditer(s) for i, ch in enumerate(m.group()) if ch == ","}
    items, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth = max(depth - 1, 0)
        elif ch in _SEPARATORS and depth == 0 and i not in protected:
            items.append(s[start:i])
            start = i + 1
    items.append(s[start:])
    return tuple(item.strip() for item in items if item.strip())


def grade(marks: list[str], reference: str, equal: Callable[[str], tuple[bool, str | None]],
          measures: tuple[str, ...] = STRUCTURE) -> tuple[float, str | None]:
    """(reward, the last answer as shown by ``equal``) of a completion's distinct marked answers.

    1.0 iff there is at least one mark and at most MAX_MARKS, none names more candidates than
    ``reference`` in ``measures``, and ``equal(mark) -> (bool, shown)`` holds for every one: two
    boxes or tags that disagree are a hedge, and a hedge earns 0 whichever of them is right."""
    if not marks or len(marks) > MAX_MARKS:
        return 0.0, None
    shown = None
    for mark in marks:
        if names_more(mark, reference, measures):
            return 0.0, None
        ok, shown = equal(mark)
        if not ok:
            return 0.0, shown
    return 1.0, shown
