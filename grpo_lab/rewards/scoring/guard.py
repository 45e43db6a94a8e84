"""The inert-answer guard: an answer that could run as code never reaches a scorer that evaluates.

The scoring worker keeps a completion's code away from the trainer, but inside the worker's
child that code could still write "1.0" as its own result. So for the scorers that evaluate
the answer (``reach.py`` finds them), the trainer checks the answer first and scores it 0,
without sending it, unless it is inert for that kind of evaluation:

``eval`` (Python's ``eval(answer)``): every reading Python could give the text (as is, with
    leading blanks dropped as ``eval`` does, stripped) either is not an expression at all (a
    board like ``_ Q _ _``: ``eval`` raises before anything runs) or is a literal display:
    numbers, strings, lists, tuples, sets and signs on numbers, or one plain name alone (a
    string_insertion answer such as ``EACADDDB``). No name inside a display, no call,
    attribute, subscript, operator, comprehension or lambda. Inside the worker the scorers'
    ``eval`` reads an answer as a literal only (``_scorers._literal_eval_only``), so even a
    bare name never reads a scorer's variable such as ``oracle_answer``.
``sympy`` (``sympy.parse_expr``, which runs ``eval`` with Python's builtins in scope): the
    stripped text does not tokenize (sympy tokenizes it the same way and raises before its
    ``eval``), or its tokens are numbers, arithmetic, comparison and bitwise operators,
    brackets, commas, ``!`` (factorial) and plain names; a name may be called only when it is
    one of a fixed set of mathematical functions; a list may not be subscripted and nothing but
    those names called. Its cost stays small: an exponent (the operand after ``**``) holds no
    ``**`` and is not followed by one (no power tower such as ``9**9**9``), and every number
    in an exponent is at most three digits, with an optional decimal part; ``!`` follows a name
    or such a number.

A plain name is ASCII (Python folds other letters to ASCII ones: ``ｅｖａｌ`` is ``eval``), not a
keyword, not a builtin, and starts with a letter (no ``_`` or dunder). Strings are inert to
``eval`` (a literal) but refused for sympy, whose answers are formulas. Pure functions.
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import tokenize

EVAL, SYMPY = "eval", "sympy"
_BUILTIN_NAMES = frozenset(dir(builtins))
# Functions an honest formula calls (the integration datasets' answers use sin, cos, exp, log...).
CALLABLE = frozenset({
    "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "acot", "asec", "acsc",
    "sinh", "cosh", "tanh", "coth", "sech", "csch", "asinh", "acosh", "atanh", "acoth",
    "exp", "log", "ln", "sqrt", "cbrt", "root", "Abs", "sign", "floor", "ceiling",
    "factorial", "binomial", "gamma", "erf", "atan2", "Rational",
    "Integral"})  # intermediate_integration's own answers leave some integrals unevaluated
_OPS = frozenset({"+", "-", "*", "/", "//", "%", "**", "(", ")", "[", "]", ",", "<", ">", "<=", ">=",
                  "==", "!=", "~", "&", "|", "^", "<<", ">>", "!"})
_LAYOUT = frozenset({tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER})
_LITERAL_NODES = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Load)
_CONSTANTS = (int, float, complex, str, bytes, bool, type(None))


def inert(answer: str | None, modes: frozenset[str]) -> bool:
    """Can ``answer`` go to a scorer that evaluates it in the ways named by ``modes``?"""
    if answer is None or not modes:
        return True
    if EVAL in modes and not inert_to_eval(answer):
        return False
    return SYMPY not in modes or inert_to_sympy(answer)


def plain_name(name: str) -> bool:
    return (name.isascii() and name.isidentifier() and name[0].isalpha() and "__" not in name
            and not keyword.iskeyword(name) and name not in _BUILTIN_NAMES)


def inert_to_eval(answer: str) -> bool:
    for text in dict.fromkeys((answer, answer.lstrip(" \t"), answer.strip())):
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            continue  # eval raises on it before running anything
        except (ValueError, RecursionError, MemoryError):
            return False
        if isinstance(tree.body, ast.Name):  # string_insertion's answers are bare names
            if not plain_name(tree.body.id):
                return False
        elif not all(_literal_node(node) for node in ast.walk(tree)):
            return False
    return True


def _literal_node(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, _CONSTANTS)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(node.operand, ast.Constant)
    return isinstance(node, (*_LITERAL_NODES, ast.USub, ast.UAdd))


def inert_to_sympy(answer: str) -> bool:
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(answer.strip()).readline))
    except (tokenize.TokenError, SyntaxError):
        return True  # sympy reads the same text with the same tokenizer, and fails before its eval
    except (ValueError, RecursionError, MemoryError):
        return False
    tokens = [token for token in tokens if token.type not in _LAYOUT]
    for index, token in enumerate(tokens):
        if not _token_ok(token, tokens[index - 1] if index else None):
            return False
    return _cheap(tokens)


def _cheap(tokens: list[tokenize.TokenInfo]) -> bool:
    """No power tower, and only small numbers where sympy would raise to them or take their
    factorial: honest answers never need more, and ``9**9**9`` runs until its deadline."""
    for index, token in enumerate(tokens):
        if token.string == "!" and index and not (_small(tokens[index - 1]) or tokens[index - 1].type == tokenize.NAME):
            return False
        if token.string != "**":
            continue
        start = index + 1
        while start < len(tokens) and tokens[start].string in ("+", "-"):
            start += 1
        end = _operand_end(tokens, start)
        exponent = tokens[start:end + 1]
        if any(t.string == "**" for t in exponent) or (end + 1 < len(tokens) and tokens[end + 1].string == "**"):
            return False
        if any(t.type == tokenize.NUMBER and not _small(t) for t in exponent):
            return False
    return True


def _operand_end(tokens: list[tokenize.TokenInfo], start: int) -> int:
    """Index of the last token of the operand starting at ``start``: an atom, a call or a
    bracketed group."""
    end = start
    if end + 1 < len(tokens) and tokens[end].type == tokenize.NAME and tokens[end + 1].string == "(":
        end += 1
    if end < len(tokens) and tokens[end].string in ("(", "["):
        depth = 0
        for end in range(end, len(tokens)):
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(tokens[end].string, 0)
            if depth == 0:
                break
    return end


def _small(token: tokenize.TokenInfo) -> bool:
    return token.type == tokenize.NUMBER and re.fullmatch(r"[0-9]{1,3}(\.[0-9]*)?", token.string) is not None


def _token_ok(token: tokenize.TokenInfo, previous: tokenize.TokenInfo | None) -> bool:
    kind, text = token.type, token.string
    if kind == tokenize.NUMBER:
        return True
    if kind == tokenize.NAME:
        return plain_name(text)
    if kind not in (tokenize.OP, tokenize.ERRORTOKEN) or text not in _OPS:
        return False
    after_value = previous is not None and (previous.type in (tokenize.NAME, tokenize.NUMBER)
                                            or previous.string in (")", "]"))
    if text == "(" and after_value:  # a call: only of a known mathematical function
        return previous.type == tokenize.NAME and previous.string in CALLABLE
    return not (text == "[" and after_value)  # a subscript
