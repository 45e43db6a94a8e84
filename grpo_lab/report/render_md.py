"""Render a Document as Markdown; images are files beside it, referenced by relative path."""

from __future__ import annotations

import re
from typing import Callable

from grpo_lab.report.document import (
    Badge,
    Block,
    Code,
    Document,
    Image,
    Paragraph,
    Table,
    TableCell,
)

_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def _e(text: str) -> str:
    """Escape Markdown syntax so trick names like kl_decay or a|b render as written."""
    return _SPECIAL.sub(r"\\\1", text).replace("\n", " ")


def _cell(cell: TableCell) -> str:
    return f"**{_e(cell.text)}**" if isinstance(cell, Badge) else _e(cell)


def _table(table: Table) -> str:
    lines = ["| " + " | ".join(_e(h) for h in table.headers) + " |",
             "|" + "---|" * len(table.headers)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table.rows]
    if table.note:
        lines += ["", f"*{_e(table.note)}*"]
    return "\n".join(lines)


def _code(code: Code) -> str:
    text = "\n".join(code.lines)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)  # a fence longer than any backtick run in the commands
    return f"{fence}sh\n{text}\n{fence}"


def _block(block: Block, image_path: Callable[[Image], str]) -> str:
    if isinstance(block, Paragraph):
        return _e(block.text)
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Image):
        return f"![{_e(block.alt)}]({image_path(block)})\n\n*{_e(block.caption)}*"
    if isinstance(block, Code):
        return _code(block)
    raise TypeError(f"unknown block {type(block).__name__}")


def render_markdown(doc: Document, image_path: Callable[[Image], str]) -> str:
    parts = [f"# {_e(doc.title)}", "\n\n".join(_e(line) for line in doc.summary),
             "\n".join(f"- [{_e(s.title)}](#{s.id})" for s in doc.sections)]
    for section in doc.sections:
        # An explicit anchor: renderers derive heading ids from titles differently.
        parts.append(f'<a id="{section.id}"></a>\n\n## {_e(section.title)}')
        parts += [_block(b, image_path) for b in section.blocks]
    return "\n\n".join(parts) + "\n"
