"""Writing a report: ``report.md`` beside its PNGs, and one self-contained ``report.html``.

A section may be *folded*: drawn inside ``<details>`` (closed) in both files, its heading
in the ``<summary>``, so the page reads as its result and a list of headings a reader
opens on demand. In the Markdown the heading stays a Markdown heading (blank lines
around it inside ``<summary>``), so GitHub renders it and derives its anchor, and links
into a folded section still resolve; browsers open a closed ``<details>`` when a link
targets an element inside it.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from harness.report.escape import fence, link_allowed, md_safe, md_text, one_line, printable
from harness.report.tables import fmt, markdown_table


@dataclass
class Section:
    """A heading with paragraphs, figures (PNG file names), tables of display strings and
    code blocks (shell commands), rendered in that order; ``after`` paragraphs close it."""

    title: str
    paragraphs: list[str] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)  # (file name, alt text)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)  # (caption, table)
    code: list[tuple[str, str]] = field(default_factory=list)  # (caption, shell text)
    after: list[str] = field(default_factory=list)
    #: Drawn closed inside ``<details>``, its heading the summary line.
    folded: bool = False

    @property
    def anchor(self) -> str:
        """The heading's fragment id, as GitHub derives it from a Markdown heading."""
        return slug(self.title)


@dataclass
class Document:
    title: str
    intro: list[str]
    sections: list[Section]
    #: Shown after the lead, in a box: things a reader must know before trusting a number.
    warnings: list[str] = field(default_factory=list)
    #: Shown first, under the title: the result (conclusions, main curve, summary table).
    lead: list[Section] = field(default_factory=list)


def slug(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", title.strip().lower())
    return text.replace(" ", "-")


def to_markdown(doc: Document) -> str:
    """The document as Markdown. Titles and alt texts are text (escaped); paragraphs,
    captions and table cells are Markdown, passed through :func:`md_safe` so that no value
    of a run inside them starts a block, raw HTML or a link off the web."""
    out = [f"# {md_text(doc.title)}", ""]
    for section in doc.lead:
        out += _markdown_section(section)
    if doc.warnings:
        out += ["> **Warnings**", ">"]
        out += [f"> - {md_safe(one_line(line))}" for line in doc.warnings]
        out += [""]
    for paragraph in doc.intro:
        out += [md_safe(paragraph), ""]
    for section in doc.sections:
        out += _markdown_section(section)
    return "\n".join(out).rstrip() + "\n"


DETAILS = re.compile(r"<details>.*?</details>", re.DOTALL)


def unfolded_words(markdown: str) -> int:
    """Words of a Markdown report outside its folded sections (``<details>`` blocks): what
    a reader meets before opening anything."""
    return len(DETAILS.sub(" ", markdown).split())


def _markdown_section(section: Section) -> list[str]:
    if section.folded:
        return [
            "<details>",
            "<summary>",
            "",
            f"## {md_text(section.title)}",
            "",
            "</summary>",
            "",
            *_markdown_body(section),
            "</details>",
            "",
        ]
    return [f"## {md_text(section.title)}", "", *_markdown_body(section)]


def _markdown_body(section: Section) -> list[str]:
    out: list[str] = []
    for paragraph in section.paragraphs:
        out += [md_safe(paragraph), ""]
    for name, alt in section.images:
        alt_text = md_text(alt).replace("[", "\\[").replace("]", "\\]")
        out += [f"![{alt_text}]({name})", ""]
    for table_caption, table in section.tables:
        if table_caption:
            out += [f"*{md_safe(one_line(table_caption))}*", ""]
        out += [markdown_table(table), ""]
    for code_caption, text in section.code:
        if code_caption:
            out += [f"*{md_safe(one_line(code_caption))}*", ""]
        opening, closing = fence(text, "sh")
        out += [opening, printable(text), closing, ""]
    for paragraph in section.after:
        out += [md_safe(paragraph), ""]
    return out


_INLINE = [
    (re.compile(r"\*\*([^*]+)\*\*"), r"<strong>\1</strong>"),
    (re.compile(r"(?<![*\w])\*([^*]+)\*(?![*\w])"), r"<em>\1</em>"),
]
#: A backslash escape of ASCII punctuation, or a run of backticks (a code span's fence).
_ESCAPE_OR_TICKS = re.compile(r"\\([!-/:-@\[-`{-~])|(`+)")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_HELD = re.compile("\ue000(\\d+)\ue001")


def _escape(text: str) -> str:
    """Text for HTML, in an element or a quoted attribute alike."""
    return html.escape(printable(text), quote=True)


def _inline(text: str) -> str:
    """The little Markdown the paragraphs use (backslash escapes, code spans, bold,
    italic, links) as HTML. Every character of the text is escaped for HTML text and
    attributes alike; a link is drawn only to an address :func:`link_allowed` accepts
    (the web, a fragment, a file beside the report), else it stays text."""
    held: list[str] = []  # escaped characters and code spans, kept out of the patterns

    def hold(markup: str) -> str:
        held.append(markup)
        return f"\ue000{len(held) - 1}\ue001"

    text = re.sub("[\ue000\ue001]", " ", text)
    parts, at = [], 0
    while (match := _ESCAPE_OR_TICKS.search(text, at)) is not None:
        parts.append(text[at : match.start()])
        at = match.end()
        if match.group(1) is not None:
            parts.append(hold(_escape(match.group(1))))
            continue
        ticks = match.group(2)
        closing = re.compile(f"(?<!`){ticks}(?!`)").search(text, at)
        if closing is None:
            parts.append(hold(_escape(ticks)))
            continue
        code = text[at : closing.start()]
        if code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        parts.append(hold(f"<code>{_escape(code)}</code>"))
        at = closing.end()
    parts.append(text[at:])
    escaped = _escape("".join(parts))
    for pattern, replacement in _INLINE:
        escaped = pattern.sub(replacement, escaped)

    def link(match: re.Match[str]) -> str:
        target = html.unescape(_HELD.sub(lambda m: held[int(m.group(1))], match.group(2)))
        if not link_allowed(target):
            return match.group(0)
        return f'<a href="{_escape(target)}">{match.group(1)}</a>'

    escaped = _LINK.sub(link, escaped)
    return _HELD.sub(lambda m: held[int(m.group(1))], escaped)


def _paragraph(text: str) -> str:
    text = md_safe(text)
    lines = text.splitlines()
    if lines and all(line.startswith("- ") for line in lines):
        items = "".join(f"<li>{_inline(line[2:])}</li>" for line in lines)
        return f"<ul>{items}</ul>"
    return f"<p>{_inline(text)}</p>"


_NUMBER = re.compile(r"[-+]?[\d,]*\.?\d+%?( \([^)]*\))?|—|n/a")


def _cell(value: object) -> str:
    text = fmt(value)
    numeric = _NUMBER.fullmatch(text) is not None
    return f'<td class="num">{_escape(text)}</td>' if numeric else f"<td>{_escape(text)}</td>"


def _html_table(table: pd.DataFrame) -> str:
    head = "".join(f"<th>{_escape(str(c))}</th>" for c in table.columns)
    body = "".join(
        "<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in table.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1180px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { margin-top: 2em; border-bottom: 1px solid #eee; padding-bottom: .2em; }
img { max-width: 100%; height: auto; display: block; margin: 1em 0; }
table { border-collapse: collapse; margin: .6em 0 1.4em; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; white-space: nowrap; }
code { background: #f4f4f4; padding: 0 .25em; border-radius: 3px; }
pre { background: #f6f6f6; padding: .5em .8em; overflow-x: auto; font-size: .85em;
      border: 1px solid #e2e2e2; border-radius: 4px; white-space: pre-wrap; word-break: break-all; }
.caption { font-style: italic; color: #555; margin-bottom: .2em; }
.warnings { background: #fff4e5; border-left: 5px solid #e69500; padding: .5em 1em;
            margin: 1em 0; }
.warnings ul { margin: .3em 0; }
.table-wrap { overflow-x: auto; }
details > summary { cursor: pointer; }
details > summary h2 { display: inline-block; margin: 1.2em 0 .3em; border-bottom: none; }
"""


def to_html(doc: Document, folder: Path) -> str:
    """The document as one HTML file; PNGs from ``folder`` embedded as base64 data URIs."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_escape(one_line(doc.title))}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_escape(one_line(doc.title))}</h1>",
    ]
    for section in doc.lead:
        parts += _html_section(section, folder)
    if doc.warnings:
        items = "".join(f"<li>{_inline(md_safe(one_line(line)))}</li>" for line in doc.warnings)
        parts.append(f'<div class="warnings"><strong>Warnings</strong><ul>{items}</ul></div>')
    parts += [_paragraph(p) for p in doc.intro]
    for section in doc.sections:
        parts += _html_section(section, folder)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _html_section(section: Section, folder: Path) -> list[str]:
    heading = f'<h2 id="{_escape(section.anchor)}">{_escape(section.title)}</h2>'
    if section.folded:
        return [
            f"<details><summary>{heading}</summary>",
            *_html_body(section, folder),
            "</details>",
        ]
    return [heading, *_html_body(section, folder)]


def _html_body(section: Section, folder: Path) -> list[str]:
    parts = [_paragraph(p) for p in section.paragraphs]
    for name, alt in section.images:
        data = base64.b64encode((folder / name).read_bytes()).decode("ascii")
        parts.append(f'<img src="data:image/png;base64,{data}" alt="{_escape(alt)}">')
    for table_caption, table in section.tables:
        if table_caption:
            parts.append(f'<p class="caption">{_inline(md_safe(one_line(table_caption)))}</p>')
        parts.append(f'<div class="table-wrap">{_html_table(table)}</div>')
    for code_caption, text in section.code:
        if code_caption:
            parts.append(f'<p class="caption">{_inline(md_safe(one_line(code_caption)))}</p>')
        parts.append(f"<pre><code>{_escape(text)}</code></pre>")
    parts += [_paragraph(p) for p in section.after]
    return parts
