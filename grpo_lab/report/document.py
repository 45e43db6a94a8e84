"""The report as data: sections of blocks that the HTML and the Markdown writers both render.

Content is decided once, here, and rendered twice, so the two formats cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union

Tone = Literal["good", "warn", "bad", "neutral"]


@dataclass(frozen=True)
class Badge:
    """A verdict cell: coloured in HTML, bold in Markdown."""

    text: str
    tone: Tone


TableCell = Union[str, Badge]  # one cell of a report table: plain text or a verdict badge


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[TableCell]]
    note: str = ""  # e.g. why rows were left out

    def without(self, header: str) -> Table:
        if header not in self.headers:
            return self
        i = self.headers.index(header)
        return Table(self.headers[:i] + self.headers[i + 1:],
                     [row[:i] + row[i + 1:] for row in self.rows], self.note)


@dataclass(frozen=True)
class Image:
    name: str  # file stem, unique within a report
    alt: str
    caption: str
    png: bytes


@dataclass(frozen=True)
class Code:
    lines: list[str]


Block = Union[Paragraph, Table, Image, Code]


@dataclass
class Section:
    id: str  # stable anchor: links and tests rely on it
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    summary: list[str]  # header lines above the table of contents
    sections: list[Section]


def capped(rows: list[list[TableCell]], limit: int, what: str) -> tuple[list[list[TableCell]], str]:
    """Keep the first `limit` rows; the note says how many were left out."""
    if len(rows) <= limit:
        return rows, ""
    return rows[:limit], f"Showing the first {limit} of {len(rows)} {what}."
