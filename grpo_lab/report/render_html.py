"""Render a Document as one self-contained HTML page.

Self-contained means: CSS inline, images as base64 data URIs, no script, no URL to any other
host, so the file can be mailed, archived or opened offline and look the same. Every piece of
text goes through html.escape.
"""

from __future__ import annotations

import base64
import html
import re

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


def _e(text: str) -> str:
    return html.escape(text, quote=True)


# Short cells (numbers, CIs, names) never wrap; long free text does, at spaces, and a long
# trick set ("a+b+c") may break after each "+".
_WRAP_FROM = 28
_TRICK_SET = re.compile(r"[A-Za-z_][\w.-]*(\+[\w.-]+)+")


def _cell(cell: TableCell) -> str:
    if isinstance(cell, Badge):
        return f'<td><span class="badge {cell.tone}">{_e(cell.text)}</span></td>'
    if len(cell) < _WRAP_FROM:
        return f"<td>{_e(cell)}</td>"
    text = _e(cell)
    if _TRICK_SET.fullmatch(cell):
        text = text.replace("+", "+<wbr>")
    return f'<td class="text">{text}</td>'


def _table(table: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in table.headers)
    body = "\n".join("<tr>" + "".join(_cell(c) for c in row) + "</tr>"
                     for row in table.rows)
    note = f'<p class="note">{_e(table.note)}</p>' if table.note else ""
    return (f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>\n{body}\n</tbody></table></div>{note}")


def _image(image: Image) -> str:
    data = base64.b64encode(image.png).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{_e(image.alt)}">'
            f"<figcaption>{_e(image.caption)}</figcaption></figure>")


def _block(block: Block) -> str:
    if isinstance(block, Paragraph):
        return f"<p>{_e(block.text)}</p>"
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Image):
        return _image(block)
    if isinstance(block, Code):
        return "<pre>" + _e("\n".join(block.lines)) + "</pre>"
    raise TypeError(f"unknown block {type(block).__name__}")


def render_html(doc: Document) -> str:
    nav = "".join(f'<a href="#{_e(s.id)}">{_e(s.title)}</a>' for s in doc.sections)
    summary = "".join(f"<p>{_e(line)}</p>" for line in doc.summary)
    sections = "\n".join(
        f'<section id="{_e(s.id)}">\n<h2>{_e(s.title)}</h2>\n'
        + "\n".join(_block(b) for b in s.blocks) + "\n</section>"
        for s in doc.sections)
    # The empty data: icon stops the browser from asking the file system for a favicon.
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>{_e(doc.title)}</title>
<style>{_CSS}</style>
</head>
<body>
<header><h1>{_e(doc.title)}</h1>{summary}<nav>{nav}</nav></header>
<main>
{sections}
</main>
</body>
</html>
"""
