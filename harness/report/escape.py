"""Run data made inert for where a report writes it: Markdown, HTML links, CSV cells.

A run directory may come from someone else (docs/trust.md), and its fields (``host.cpu``,
``sweep``, ``algo``, config keys and values) reach ``report.md``, ``report.html``,
``summary.csv`` and ``runs.csv``. Each output has one helper here:

- :func:`md_text` and :func:`md_code`: a value of a run inserted into the report's
  Markdown, as text or as a code span. It renders as itself: never a link, raw HTML, a
  code span's end or a line of its own (a heading, a fence).
- :func:`md_safe`: the renderer's net over every paragraph and caption (authored
  Markdown with values inside): no raw HTML, no block (heading, fence, quote, list other
  than the authored ``- `` item, rule, table) started inside it, and a link only to an
  address :func:`link_allowed` accepts; :func:`md_safe_inline` the same for a table cell.
- :func:`fence`: a code block's fence, longer than any backtick run of its content.
- :func:`printable`: control characters (ESC, CR, BEL) as spaces in any text of a report.
- :func:`csv_frame`: a table for ``to_csv``, each string cell that a spreadsheet would
  read as a formula (a leading ``= + - @``, tab or carriage return) prefixed with ``'``
  (OWASP's CSV-injection advice); numbers, and strings that are plain numbers, unchanged.

Ordinary values (``optimes [sigma=0.05]``, ``LunarLanderContinuous-v3``, ``cma k=5``)
pass unchanged: only what can change a document's structure is escaped.
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

#: Characters that end a line or move the cursor: a value of a run stays on its line.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: The same but for newline and tab, which shape a paragraph or a code block.
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: In text: a backslash (an escape of its own), a backtick (a code span), ``<`` (raw HTML,
#: an autolink), and the ``](`` / ``][`` that close a link's text and open its target.
_MD_TEXT = re.compile(r"[\\`<]|(?<=\])[(\[]")
_BACKTICKS = re.compile(r"`+")
#: What a line may not start with: a heading, quote, fence, HTML block, list item, rule,
#: setext underline, table delimiter row or link reference definition.
_BLOCK_START = re.compile(
    r"""(?x)
    \#{1,6}(?:[ \t]|$)      # heading
    | >                     # block quote
    | `{3,} | ~{3,}         # fence
    | <                     # HTML block
    | [*+-](?:[ \t]|$)      # bullet (the authored "- " item is let through first)
    | \d{1,9}[.)](?:[ \t]|$)  # ordered item
    | [-=*_|:\ \t]+$        # rule, setext underline, table delimiter row
    | \[[^\]]*\]:           # link reference definition
    """
)
#: Raw HTML: ``<`` followed by a tag name, ``/``, ``!`` (comment, CDATA) or ``?``; and
#: the ``](`` of a link or image, its destination next. Each with the backslashes before
#: it: an odd count escapes it already.
_RAW_HTML = re.compile(r"(\\*)<(?=[A-Za-z/!?])")
_LINK_OPEN = re.compile(r"(\\*)\]\(")
#: Addresses a link may have: the web, a fragment of the page, a file beside the report.
_ALLOWED_TARGET = re.compile(r"https?://[^\s<>\"'`]+|#[^\s<>\"'`]*|[\w.][\w./-]*")
#: A string a spreadsheet takes for a number, not a formula.
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def one_line(value: object) -> str:
    """``value`` as text with every line break and control character a space."""
    return _CONTROL.sub(" ", str(value))


def printable(text: str) -> str:
    """``text`` with control characters (ESC, CR, BEL, ...) spaces; lines and tabs kept:
    a report is read in terminals too (``cat report.md``)."""
    return _CONTROL_IN_TEXT.sub(" ", text)


def md_text(value: object) -> str:
    """A value of a run as Markdown text that renders as the value itself, on one line."""
    return _MD_TEXT.sub(lambda m: "\\" + m.group(0), one_line(value))


def md_code(value: object) -> str:
    """A value of a run as a Markdown code span, its fence longer than any backtick run
    inside (a backtick in the value cannot end the span)."""
    text = one_line(value)
    ticks = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(text: str, info: str = "") -> tuple[str, str]:
    """Opening and closing lines of a fenced code block holding ``text``: backticks, one
    more than its longest backtick run and at least three."""
    ticks = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    return ticks + info, ticks


def link_allowed(target: str) -> bool:
    """Whether a link may point at ``target``: an http(s) address, a fragment of the page
    or a relative file name (``summary.csv``, ``task/report.md``); never ``javascript:``,
    ``data:`` or another scheme."""
    return _ALLOWED_TARGET.fullmatch(target) is not None and not target.startswith("//")


def _target(text: str, start: int) -> str:
    """A link destination starting at ``text[start]``: up to whitespace or ``)``."""
    end = start
    while end < len(text) and text[end] not in " \t\n)":
        end += 1
    return text[start:end]


def _unescaped(match: re.Match[str]) -> bool:
    return len(match.group(1)) % 2 == 0


def md_safe_inline(text: str) -> str:
    """Markdown text (a table cell, a line) with raw HTML escaped and every link whose
    target :func:`link_allowed` refuses left as text."""
    text = printable(text)
    text = _RAW_HTML.sub(lambda m: m.group(1) + ("\\<" if _unescaped(m) else "<"), text)
    out, last = [], 0
    for match in _LINK_OPEN.finditer(text):
        if _unescaped(match) and not link_allowed(_target(text, match.end())):
            out += [text[last : match.end() - 1], "\\("]
            last = match.end()
    return "".join(out) + text[last:]


def _safe_line(line: str, item: bool = True) -> str:
    indent = len(line) - len(line.lstrip(" \t"))
    head, rest = line[:indent], line[indent:]
    if item and rest.startswith("- ") and rest[2:].strip():
        return head + "- " + _safe_line(rest[2:], item=False)
    if _BLOCK_START.match(rest):
        rest = "\\" + rest
    return head + rest


def md_safe(text: str) -> str:
    """Authored Markdown with values of runs inside, made unable to change the document's
    structure: :func:`md_safe_inline`, and each line's leading block marker escaped (the
    authored ``- `` list item kept)."""
    return "\n".join(_safe_line(line) for line in md_safe_inline(text).split("\n"))


def _csv_cell(value: Any) -> Any:
    if (
        isinstance(value, str)
        and value.startswith(_FORMULA_START)
        and not _PLAIN_NUMBER.fullmatch(value)
    ):
        return "'" + value
    return value


def csv_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every string cell and column name a spreadsheet would take for a
    formula prefixed with ``'``; numeric columns, and strings that are plain numbers,
    unchanged."""
    out = frame.rename(columns=_csv_cell)
    for column in out.columns[[pd.api.types.is_object_dtype(t) for t in out.dtypes]]:
        out[column] = out[column].map(_csv_cell)
    return out
