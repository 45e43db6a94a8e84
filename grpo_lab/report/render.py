"""The report as data, and its two renderings: Markdown (images as files beside it) and one
self-contained HTML page.

Content is decided once, as a Document of sections and blocks, and rendered twice, so the two
formats cannot drift apart; number formatting lives here too, so they agree to the digit.
Self-contained HTML means: CSS inline, images as base64 data URIs, no script, no URL to any other
host, so the file can be mailed, archived or opened offline and look the same. Every piece of
text goes through html.escape (HTML) or a Markdown escape.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

# --- numbers: how a missing value, an effect, a CI or an hour count reads ---

MISSING = "—"


def is_missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: float | None) -> str:
    """Three significant digits for small values; thousands separators, no decimals, from 100 up."""
    if is_missing(x):
        return MISSING
    assert x is not None
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def signed(x: float | None) -> str:
    if is_missing(x):
        return MISSING
    assert x is not None
    return ("+" if x > 0 else "") + num(x)


def interval(lo: float | None, hi: float | None) -> str:
    if is_missing(lo) or is_missing(hi):
        return MISSING
    return f"[{signed(lo)}, {signed(hi)}]"


def p_value(p: float | None) -> str:
    if is_missing(p):
        return MISSING
    assert p is not None
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def share(part: float | None, total: float | None) -> str:
    if is_missing(part) or is_missing(total) or not total:
        return MISSING
    assert part is not None and total is not None
    return f"{100 * part / total:.0f}%"


def hours_unit(unit: str | None) -> str:
    """Short label for the cost unit: CPU sweeps must not pass for GPU ones. A plain
    "device-hours" is the CPU hardware profile's unit (spec/model_cards.py), one core per device."""
    text = (unit or "gpu-hours").lower()
    if "gpu" in text:
        return "GPU-h"
    if "cpu" in text or "core" in text or text == "device-hours":
        return "core-h"
    return "device-h"


def timestamp(value: object) -> str:
    """A time to the second, in UTC: '2026-12-01 20:15:06 UTC'. Naive times are the registry's,
    which stores UTC; text that is not an ISO time is shown as given."""
    when = value
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            return value
    if not isinstance(when, datetime):
        return MISSING if value is None else str(value)
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def text(x: object) -> str:
    """A table cell's text; MISSING for none or empty."""
    return MISSING if x is None or x == "" else str(x)


def key_cells(row: dict) -> list[str]:
    """The model, task and tricks cells that open a row of a per-trick-set table."""
    return [text(row["model"]), text(row["task"]), text(row["tricks"])]


def short(text: str, limit: int = 48) -> str:
    """Trim long trick-set names for plot labels; tables keep the full name."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


# --- the document model ---

Tone = Literal["good", "warn", "bad", "neutral"]


@dataclass(frozen=True)
class Badge:
    """A verdict cell: coloured in HTML, bold in Markdown."""

    text: str
    tone: Tone


@dataclass(frozen=True)
class Link:
    """A cell that links: to an anchor in the report ("#..."), or to a file or folder on this
    machine (an absolute path, written relative to the report's folder by the renderers' href)."""

    text: str
    target: str


TableCell = str | Badge | Link  # one cell of a report table: plain text, a verdict badge or a link
Href = Callable[[str], str]  # a Link's target -> the href written


def anchor(kind: str, *parts: str) -> str:
    """A stable HTML id for a tuple of names: 'arm-tiny-math-ema_reference-3f2a9c1d', readable, and
    unique by the digest of the exact tuple (("a-b", "c") and ("a", "b-c") read alike)."""
    digest = hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:8]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join((kind, *parts, digest))).strip("-")


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Table:
    headers: list[str]
    rows: list[list[TableCell]]
    note: str = ""  # e.g. why rows were left out
    row_ids: list[str] | None = None  # an HTML id per row ("" for none): Links' "#..." targets

    def without(self, header: str) -> Table:
        if header not in self.headers:
            return self
        i = self.headers.index(header)
        return Table(self.headers[:i] + self.headers[i + 1:],
                     [row[:i] + row[i + 1:] for row in self.rows], self.note, self.row_ids)


@dataclass(frozen=True)
class Image:
    name: str  # file stem, unique within a report
    alt: str
    caption: str
    png: bytes


@dataclass(frozen=True)
class Code:
    lines: list[str]


Block = Paragraph | Table | Image | Code


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


# --- Markdown ---

_SPECIAL = re.compile(r"([\\`*_\[\]<>|#])")


def _md_e(text: str) -> str:
    """Escape Markdown syntax so trick names like kl_decay or a|b render as written."""
    return _SPECIAL.sub(r"\\\1", text).replace("\n", " ")


def _md_cell(cell: TableCell, href: Href) -> str:
    if isinstance(cell, Badge):
        return f"**{_md_e(cell.text)}**"
    if isinstance(cell, Link):
        return f"[{_md_e(cell.text)}](<{href(cell.target)}>)"
    return _md_e(cell)


def _md_table(table: Table, href: Href) -> str:
    lines = ["| " + " | ".join(_md_e(h) for h in table.headers) + " |",
             "|" + "---|" * len(table.headers)]
    ids = table.row_ids or [""] * len(table.rows)
    lines += ["| " + (f'<a id="{i}"></a>' if i else "") + " | ".join(_md_cell(c, href) for c in row) + " |"
              for i, row in zip(ids, table.rows, strict=True)]
    if table.note:
        lines += ["", f"*{_md_e(table.note)}*"]
    return "\n".join(lines)


def _md_code(code: Code) -> str:
    text = "\n".join(code.lines)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)  # a fence longer than any backtick run in the commands
    return f"{fence}sh\n{text}\n{fence}"


def _md_block(block: Block, image_path: Callable[[Image], str], href: Href) -> str:
    if isinstance(block, Paragraph):
        return _md_e(block.text)
    if isinstance(block, Table):
        return _md_table(block, href)
    if isinstance(block, Image):
        return f"![{_md_e(block.alt)}]({image_path(block)})\n\n*{_md_e(block.caption)}*"
    if isinstance(block, Code):
        return _md_code(block)
    raise TypeError(f"unknown block {type(block).__name__}")


def render_markdown(doc: Document, image_path: Callable[[Image], str], href: Href = str) -> str:
    parts = [f"# {_md_e(doc.title)}", "\n\n".join(_md_e(line) for line in doc.summary),
             "\n".join(f"- [{_md_e(s.title)}](#{s.id})" for s in doc.sections)]
    for section in doc.sections:
        # An explicit anchor: renderers derive heading ids from titles differently.
        parts.append(f'<a id="{section.id}"></a>\n\n## {_md_e(section.title)}')
        parts += [_md_block(b, image_path, href) for b in section.blocks]
    return "\n\n".join(parts) + "\n"


# --- HTML ---

_CSS = """
:root { --fg: #1d2430; --muted: #5b6576; --line: #d9dee6; --bg: #ffffff; --band: #f5f7fa; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
header { padding: 24px 32px 12px; border-bottom: 1px solid var(--line); background: var(--band); }
h1 { margin: 0 0 6px; font-size: 24px; }
header p { margin: 2px 0; color: var(--muted); }
nav { margin-top: 10px; display: flex; flex-wrap: wrap; gap: 6px 16px; }
nav a { color: #1f5fbf; text-decoration: none; font-weight: 600; }
main { padding: 8px 32px 48px; max-width: 1500px; }
section { padding-top: 12px; border-bottom: 1px solid var(--line); padding-bottom: 16px; }
h2 { font-size: 20px; margin: 14px 0 8px; }
figure { margin: 12px 0 20px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 13px; max-width: 1100px; }
.table-wrap { overflow-x: auto; margin: 8px 0 4px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: var(--band); min-width: 48px; }
td { white-space: nowrap; }
td.text { white-space: normal; min-width: 160px; max-width: 380px; overflow-wrap: break-word; }
tbody tr:nth-child(even) { background: #fafbfc; }
.note { color: var(--muted); font-size: 12px; margin: 2px 0 10px; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600;
  white-space: nowrap; }
.good { background: #dff3e4; color: #17612c; }
.warn { background: #fff1d6; color: #7a4b00; }
.bad { background: #fbe0de; color: #9b1c13; }
.neutral { background: #eceff3; color: #3f4856; }
pre { background: #f3f5f8; border: 1px solid var(--line); padding: 10px 12px; overflow-x: auto;
  font-size: 13px; }
"""


def _html_e(text: str) -> str:
    return html.escape(text, quote=True)


# Short cells (numbers, CIs, names) never wrap; long free text does, at spaces, and a long
# trick set ("a+b+c") may break after each "+".
_WRAP_FROM = 28
_TRICK_SET = re.compile(r"[A-Za-z_][\w.-]*(\+[\w.-]+)+")


def _html_cell(cell: TableCell, href: Href) -> str:
    if isinstance(cell, Badge):
        return f'<td><span class="badge {cell.tone}">{_html_e(cell.text)}</span></td>'
    if isinstance(cell, Link):
        return f'<td><a href="{_html_e(href(cell.target))}">{_html_e(cell.text)}</a></td>'
    if len(cell) < _WRAP_FROM:
        return f"<td>{_html_e(cell)}</td>"
    text = _html_e(cell)
    if _TRICK_SET.fullmatch(cell):
        text = text.replace("+", "+<wbr>")
    return f'<td class="text">{text}</td>'


def _html_table(table: Table, href: Href) -> str:
    head = "".join(f"<th>{_html_e(h)}</th>" for h in table.headers)
    ids = table.row_ids or [""] * len(table.rows)
    body = "\n".join((f'<tr id="{_html_e(i)}">' if i else "<tr>") + "".join(_html_cell(c, href) for c in row)
                     + "</tr>" for i, row in zip(ids, table.rows, strict=True))
    note = f'<p class="note">{_html_e(table.note)}</p>' if table.note else ""
    return (f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>\n{body}\n</tbody></table></div>{note}")


def _html_image(image: Image) -> str:
    data = base64.b64encode(image.png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{_html_e(image.alt)}">'
            f"<figcaption>{_html_e(image.caption)}</figcaption></figure>")


def _html_block(block: Block, href: Href) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{_html_e(block.text)}</p>"
    if isinstance(block, Table):
        return _html_table(block, href)
    if isinstance(block, Image):
        return _html_image(block)
    if isinstance(block, Code):
        return "<pre>" + _html_e("\n".join(block.lines)) + "</pre>"
    raise TypeError(f"unknown block {type(block).__name__}")


def render_html(doc: Document, href: Href = str) -> str:
    nav = "".join(f'<a href="#{_html_e(s.id)}">{_html_e(s.title)}</a>' for s in doc.sections)
    summary = "".join(f"<p>{_html_e(line)}</p>" for line in doc.summary)
    sections = "\n".join(
        f'<section id="{_html_e(s.id)}">\n<h2>{_html_e(s.title)}</h2>\n'
        + "\n".join(_html_block(b, href) for b in s.blocks) + "\n</section>"
        for s in doc.sections)
    # The empty data: icon stops the browser from asking the file system for a favicon.
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{_html_e(doc.title)}</title>
<style>{_CSS}</style>
</head>
<body>
<header><h1>{_html_e(doc.title)}</h1>{summary}<nav>{nav}</nav></header>
<main>
{sections}
</main>
</body>
</html>
"""
