"""Exact canonical forms of small math answers: rational arithmetic and polynomials.

The ``extract`` verifier compares answers by value, not by spelling: ``2+2`` is 4, ``1 + x`` is
``x+1``, ``\\frac{6}{4}`` is 1.5. :func:`polynomial` reads a plain or LaTeX expression over rational
numbers and single-letter variables with + - * /, integer powers and parentheses into a canonical
polynomial (a sorted tuple of (monomial, coefficient) pairs), so two answers are equal exactly when
their canonical forms are. It is its own tokenizer and recursive-descent parser: no ``eval``, no
sympy. Every cost is bounded before it is paid (text length, tokens, nesting, exponent, number of
terms, coefficient size); past a bound the answer has no canonical form (None), which scores 0.
Division is by nonzero constants only, so rational functions, roots and constants such as pi
have no canonical form here (math-verify handles those).
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_CHARS = 240  # longer answers are not short math answers
MAX_TOKENS = 160
MAX_DEPTH = 24  # nested parentheses and unary signs
MAX_EXPONENT = 8  # of a polynomial: (x+1)^8 is an answer; (x+y+z)^99 is an attack on the expansion
MAX_DEGREE = 16  # per variable, after expansion
MAX_TERMS = 32  # also of every partial product, so a refusal costs no more than an answer
MAX_BITS = 256  # numerator and denominator of every coefficient

Monomial = tuple[tuple[str, int], ...]  # ((variable, power), ...) sorted by variable; () is 1
Poly = dict[Monomial, Fraction]
Canonical = tuple[tuple[Monomial, Fraction], ...]

_TOKEN_RE = re.compile(r"\s*(?:(\d{1,3}(?:,\d{3})+(?!\d|,\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)|([A-Za-z])|([-+*/^()]))")
_FRAC_CMD_RE = re.compile(r"\\[dt]?frac")
_DROP_RE = re.compile(r"\\left|\\right|\\[,;:! ]|\\displaystyle|\\?\$")
_WORD_RE = re.compile(r"[A-Za-z]{4,}")  # a word, not a product of single-letter variables ("xyz")
_OPERATOR_CMDS = {"\\cdot": "*", "\\times": "*", "\\ast": "*", "\\div": "/"}


class _Unsupported(Exception):
    """The text is outside the language or past a bound: it has no canonical form."""


def polynomial(text: str) -> Canonical | None:
    """The canonical polynomial of ``text``, or None when it is not one within the bounds."""
    if len(text) > MAX_CHARS:
        return None
    try:
        plain = _plain(text)
        tokens = _tokens(plain)
        poly = _Parser(tokens).parse()
    except _Unsupported:
        return None
    return tuple(sorted(poly.items()))


def of_constant(value: Fraction) -> Canonical:
    """The canonical polynomial of a number (zero has no terms)."""
    return (((), value),) if value else ()


def constant(canonical: Canonical | None) -> Fraction | None:
    """The value of a canonical polynomial without variables, else None."""
    if canonical is None:
        return None
    if not canonical:
        return Fraction(0)
    if len(canonical) == 1 and canonical[0][0] == ():
        return canonical[0][1]
    return None


def describe(canonical: Canonical) -> str:
    """A readable, deterministic spelling of a canonical polynomial ("x^2 + 2*x + 1")."""
    if not canonical:
        return "0"
    parts = []
    for monomial, coef in sorted(canonical, key=lambda item: (-sum(p for _, p in item[0]), item[0])):
        factors = "*".join(v if p == 1 else f"{v}^{p}" for v, p in monomial)
        if not factors:
            parts.append(str(coef))
        elif coef in (1, -1):
            parts.append(("-" if coef < 0 else "") + factors)
        else:
            parts.append(f"{coef}*{factors}")
    return " + ".join(parts).replace("+ -", "- ")


def _plain(text: str) -> str:
    """LaTeX spellings mapped to plain operators; any other command is unsupported."""
    s = _DROP_RE.sub("", text).replace("**", "^")
    for command, operator in _OPERATOR_CMDS.items():
        s = s.replace(command, operator)
    s = _expand_fracs(s)
    if "\\" in s or _WORD_RE.search(s):
        raise _Unsupported(s)
    return s.replace("{", "(").replace("}", ")")


def _expand_fracs(s: str) -> str:
    r"""``\frac{a}{b}`` -> ``((a)/(b))``; ``\frac12`` (one-character arguments) -> ``((1)/(2))``."""
    out, i = [], 0
    for _ in range(MAX_CHARS):
        match = _FRAC_CMD_RE.search(s, i)
        if match is None:
            return "".join(out) + s[i:]
        out.append(s[i:match.start()])
        if s[:match.start()].rstrip()[-1:].isdigit():
            raise _Unsupported("a number before a fraction: a mixed number (2\\frac{1}{2}) or a product")
        numerator, j = _argument(s, match.end())
        denominator, i = _argument(s, j)
        out.append(f"(({_expand_fracs(numerator)})/({_expand_fracs(denominator)}))")
    raise _Unsupported(s)


def _argument(s: str, i: int) -> tuple[str, int]:
    """One LaTeX argument at ``s[i]``: a braced group or a single character; (text, end)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        raise _Unsupported(s)
    if s[i] != "{":
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        depth += {"{": 1, "}": -1}.get(s[j], 0)
        if depth == 0:
            return s[i + 1:j], j + 1
    raise _Unsupported(s)


def _tokens(s: str) -> list[tuple[str, str, bool]]:
    """(kind, text, preceded by space) for each token; any other character is unsupported."""
    tokens, i = [], 0
    while i < len(s):
        if s[i:].strip() == "":
            break
        match = _TOKEN_RE.match(s, i)
        if match is None or len(tokens) >= MAX_TOKENS:
            raise _Unsupported(s)
        kind = "num" if match.group(1) else "var" if match.group(2) else "op"
        tokens.append((kind, match.group(1) or match.group(2) or match.group(3), s[i].isspace()))
        i = match.end()
    if not tokens:
        raise _Unsupported(s)
    return tokens


def _check(poly: Poly) -> Poly:
    poly = {m: c for m, c in poly.items() if c}
    if len(poly) > MAX_TERMS:
        raise _Unsupported("too many terms")
    for monomial, coef in poly.items():
        if coef.numerator.bit_length() > MAX_BITS or coef.denominator.bit_length() > MAX_BITS:
            raise _Unsupported("coefficient too large")
        if any(p > MAX_DEGREE for _, p in monomial):
            raise _Unsupported("degree too high")
    return poly


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, Fraction(0)) + sign * c
    return _check(out)


def _mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            powers = dict(ma)
            for v, p in mb:
                powers[v] = powers.get(v, 0) + p
            m = tuple(sorted(powers.items()))
            out[m] = out.get(m, Fraction(0)) + ca * cb
            if len(out) > MAX_TERMS:  # refused before the whole product is paid for
                raise _Unsupported("too many terms")
    return _check(out)


def _const(value: Fraction) -> Poly:
    return _check({(): value})


class _Parser:
    """expr := term (+|- term)*; term := unary ((*|/|implicit) unary)*; unary := (+|-) unary | power;
    power := atom (^ [-]integer)?; atom := number | letter | ( expr ).

    Implicit multiplication ("2x", "3(x+1)", "(x+1)(x-1)", "xy") needs a letter or an unspaced
    parenthesis on the right, so "3 4" is not 12: two numbers side by side are two answers."""

    def __init__(self, tokens: list[tuple[str, str, bool]]):
        self.tokens, self.i, self.depth = tokens, 0, 0

    def parse(self) -> Poly:
        poly = self.expr()
        if self.i != len(self.tokens):
            raise _Unsupported("trailing tokens")
        return poly

    def peek(self) -> tuple[str, str, bool] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, text: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "op" and token[1] == text:
            self.i += 1
            return True
        return False

    def expr(self) -> Poly:
        poly = self.term()
        while True:
            if self.take("+"):
                poly = _add(poly, self.term())
            elif self.take("-"):
                poly = _add(poly, self.term(), -1)
            else:
                return poly

    def term(self) -> Poly:
        poly = self.unary()
        while True:
            token = self.peek()
            if self.take("*"):
                poly = _mul(poly, self.unary())
            elif self.take("/"):
                divisor = self.unary()
                if set(divisor) != {()}:
                    raise _Unsupported("division by a non-constant or by zero")
                poly = _mul(poly, _const(1 / divisor[()]))
            elif token is not None and (token[0] == "var" or (token[1] == "(" and not token[2])):
                poly = _mul(poly, self.power())
            else:
                return poly

    def unary(self) -> Poly:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Unsupported("nested too deeply")
        try:
            if self.take("-"):
                return _mul(_const(Fraction(-1)), self.unary())
            if self.take("+"):
                return self.unary()
            return self.power()
        finally:
            self.depth -= 1

    def power(self) -> Poly:
        base = self.atom()
        if not self.take("^"):
            return base
        exponent = self.exponent()
        if set(base) <= {()}:  # a number: one exact power, its size checked before it is paid for
            value = base.get((), Fraction(0))
            bits = max(value.numerator.bit_length(), value.denominator.bit_length()) - 1
            if (exponent < 0 and not value) or bits * abs(exponent) > MAX_BITS:
                raise _Unsupported("power of a number out of range")
            return _const(value**exponent)
        if not 0 <= exponent <= MAX_EXPONENT:
            raise _Unsupported("power of a polynomial out of range")
        out = _const(Fraction(1))
        for _ in range(exponent):
            out = _mul(out, base)
        return out

    def exponent(self) -> int:
        """An integer exponent, "2", "-2", "(2)" or "{-2}" (braces are parentheses by now)."""
        braced = self.take("(")
        negative = self.take("-")
        token = self.peek()
        if token is None or token[0] != "num" or not token[1].isdigit() or len(token[1]) > 3:
            raise _Unsupported("exponent is not an integer")
        self.i += 1
        if braced and not self.take(")"):
            raise _Unsupported("unclosed exponent")
        return -int(token[1]) if negative else int(token[1])

    def atom(self) -> Poly:
        token = self.peek()
        if token is None:
            raise _Unsupported("missing operand")
        self.i += 1
        if token[0] == "num":
            return _const(Fraction(token[1].replace(",", "")))
        if token[0] == "var":
            return {((token[1], 1),): Fraction(1)}
        if token[1] == "(":
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise _Unsupported("nested too deeply")
            inner = self.expr()
            self.depth -= 1
            if not self.take(")"):
                raise _Unsupported("unclosed parenthesis")
            return inner
        raise _Unsupported(f"unexpected {token[1]!r}")
