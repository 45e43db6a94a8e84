"""Format checks shared by the tasks.

Format compliance is reported separately from correctness (``Score.format_ok``) so a run
can tell "the model stopped using the answer format" apart from "the model got worse".
"""

from __future__ import annotations

import ast
import re

from grpo_lab.rewards.extract import all_boxed, all_tagged

_INTEGER_RE = re.compile(r"-?\d+")
_FENCE_RE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_PYTHON_LANGS = {"python", "py", "python3"}


def is_integer(text: str) -> bool:
    """True iff ``text`` is one integer (optional minus, digits) and nothing else but blanks."""
    return _INTEGER_RE.fullmatch(text.strip()) is not None


def has_answer_tags(text: str) -> bool:
    """True iff the text holds a closed ``<answer>...</answer>`` pair with something in it: an
    empty or blank pair is no answer, so it earns no format bonus."""
    return any(all_tagged(text, closed_only=True))


def has_boxed(text: str) -> bool:
    """True iff the text holds a closed ``\\boxed{...}`` (or ``\\fbox{...}``) with something in it."""
    return any(all_boxed(text))


def fenced_code(text: str) -> str | None:
    """Code of the first closed Python fence, else of the first closed fence of any language.

    Prose around the fence is allowed; only the fenced code is ever executed. Returns None
    when the text has no closed fence at all.
    """
    blocks = _FENCE_RE.findall(text)
    for lang, code in blocks:
        if lang.lower() in _PYTHON_LANGS:
            return code
    return blocks[0][1] if blocks else None


def parses_as_expression(text: str) -> bool:
    """True iff ``text`` is a single, non-empty Python expression."""
    if not text.strip():
        return False
    try:
        ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return False
    return True


def defined_names(code: str) -> set[str]:
    """Top-level names bound by ``def``, ``class``, assignment or import; empty if unparsable."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def called_names(tests: list[str]) -> set[str]:
    """Names of plain functions called anywhere in the test strings."""
    names: set[str] = set()
    for test in tests:
        try:
            tree = ast.parse(test)
        except (SyntaxError, ValueError):
            continue
        names.update(
            n.func.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        )
    return names


def normalize_code(code: str) -> str:
    """Code with formatting and comments removed (via ``ast.unparse``) when it parses, so
    diversity statistics count two spellings of one program once."""
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError):
        return code.strip()
