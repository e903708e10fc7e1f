"""What a report shows of a run is data, never markup (docs/trust.md, issue 60).

Two real runs get hostile values planted in their ``config.json``, ``run.json`` and
``metrics.json`` (a ``host.cpu`` that closes an HTML attribute and adds ``onfocus``, links
to ``javascript:``, Markdown headings, raw HTML and fences, spreadsheet formulas, terminal
escape sequences); ``harness report`` must show them as text in ``report.html`` (checked
with a real HTML parser), in ``report.md`` (checked block by block), as inert cells in
``summary.csv`` and ``runs.csv``, and escaped on the terminal.
"""

from __future__ import annotations

import csv
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import harness_cli

#: the longer end-to-end checks of make test-slow (each over ~10 s on a slow 2-core machine)
pytestmark = pytest.mark.slow

ESC = "\x1b"
CPU = (
    '"><a href=javascript:alert(1) autofocus onfocus=alert(1)>'
    '[x](javascript:alert(1)) [y](" autofocus onfocus="alert(1)) <script>alert(1)</script>'
    "\n# PLANTED heading\n```\n<img src=x onerror=alert(1)>" + ESC + "[31m"
)
CPU_2 = "@SUM(1+1)*cmd|' /C calc'!A0 ![i](javascript:alert(3)) \\<b>bold\\</b>"
SWEEP = '=HYPERLINK("http://x") ``` `[s](javascript:alert(2))` <script>\n===\nPLANTED'
SWEEP_2 = "=cmd|' /C calc'!A0\n```\n# PLANTED fence breaker\n- # PLANTED item heading"
IMPORTS = [
    "evil" + ESC + "[31mmod" + ESC + "]0;title\x07",
    "x\n````\n# PLANTED fence breaker\n- # PLANTED item heading\n</details><script>",
]
NEGATIVE = -71.2
FORMULA = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
#: The only tags the report draws, and where an address may point.
TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "p", "ul", "li", "strong",
    "em", "code", "a", "img", "table", "thead", "tbody", "tr", "th", "td", "div", "details",
    "summary", "pre",
}  # fmt: skip
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
HREF = re.compile(r"https?://\S+|#\S*|[\w.][\w./-]*")


def _plant(run_dir: Path, cpu: str, sweep: str) -> None:
    run = json.loads((run_dir / "run.json").read_text())
    run["host"]["cpu"] = cpu
    (run_dir / "run.json").write_text(json.dumps(run))
    config = json.loads((run_dir / "config.json").read_text())
    config["sweep"] = sweep
    config["imports"] = IMPORTS
    (run_dir / "config.json").write_text(json.dumps(config))
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["fitness_min"]["values"] = [NEGATIVE for _ in metrics["fitness_min"]["values"]]
    (run_dir / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """Two planted runs and the finished ``harness report`` over them."""
    root = tmp_path_factory.mktemp("hostile")
    runs = root / "runs"
    for seed in ("0", "1"):
        harness_cli(
            "run", "--algo", "optimes", "--env", "CartPole", "--timesteps", "2000",
            "--backend", "inline", "--seed", seed, "--runs-dir", str(runs),
        )  # fmt: skip
    dirs = sorted(p for p in runs.iterdir() if p.name.isdigit())
    _plant(dirs[0], CPU, SWEEP)
    _plant(dirs[1], CPU_2, SWEEP_2)
    out = root / "report"
    done = harness_cli(
        "report", str(runs), "--out", str(out), "--map-runs", "0", "--no-replay", check=False
    )
    assert done.returncode == 0, done.stderr
    return out, done


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_report_html_shows_run_fields_as_text_and_links_only_to_the_web(
    hostile: tuple[Path, Any],
) -> None:
    out, _ = hostile
    page = (out / "report.html").read_text(encoding="utf-8")
    assert CONTROL.search(page) is None
    parser = _Tags()
    parser.feed(page)
    names = {tag for tag, _ in parser.tags}
    assert names <= TAGS, names - TAGS
    for tag, attrs in parser.tags:
        for name, value in attrs:
            assert not name.startswith("on") and name != "autofocus", (tag, name, value)
            assert name in {"lang", "charset", "id", "class", "href", "src", "alt"}, name
            if name == "href":
                assert value is not None and HREF.fullmatch(value), value
                assert not value.startswith("//"), value
            if name == "src":
                assert value is not None and value.startswith("data:image/png;base64,"), value
    # the planted values are shown, as text
    text = "".join(parser.text)
    assert "onfocus=alert(1)>[x](javascript:alert(1))" in text
    assert "<script>alert(1)</script>" in text


def _blocks(markdown: str) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The lines outside fenced code blocks, and each fenced block (its opening line and
    content), as CommonMark reads fences: closed by a run of the same character at
    least as long, or by the end of the document."""
    outside: list[str] = []
    fences: list[tuple[str, list[str]]] = []
    lines = iter(markdown.splitlines())
    for line in lines:
        opening = re.match(r" {0,3}(`{3,}|~{3,})", line)
        if opening is None:
            outside.append(line)
            continue
        ticks, content = opening.group(1), []
        for inner in lines:
            closing = re.match(r" {0,3}(`{3,}|~{3,})\s*$", inner)
            if closing and closing.group(1)[0] == ticks[0] and len(closing.group(1)) >= len(ticks):
                break
            content.append(inner)
        fences.append((line, content))
    return outside, fences


def _without_code_spans(line: str) -> str:
    return re.sub(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)", "", line)


def test_report_md_gives_run_fields_no_heading_html_link_or_fence(
    hostile: tuple[Path, Any],
) -> None:
    out, _ = hostile
    markdown = (out / "report.md").read_text(encoding="utf-8")
    outside, fences = _blocks(markdown)
    # one code block, the appendix's commands, holding the planted imports whole
    assert [opening.strip("`") for opening, _ in fences] == ["sh"]
    commands = "\n".join(fences[0][1])
    assert "PLANTED fence breaker" in commands and "PLANTED item heading" in commands
    previous = ""
    # the title is one line (it names the sweeps, planted ones too); no other heading
    # holds a run's field
    assert outside[0].startswith("# ") and outside[1] == ""
    for number, line in enumerate(outside):
        heading = re.match(r" {0,3}(#{1,6})(\s|$)", line)
        assert not (heading and number and "PLANTED" in line), line
        assert not re.match(r" {0,3}[-*+] {1,4}#{1,6}(\s|$)", line), line
        if previous.strip() and not previous.startswith("|"):
            assert not re.fullmatch(r" {0,3}(=+|-+)\s*", line), (previous, line)
        previous = line
        bare = _without_code_spans(line)
        # raw HTML: only the renderer's own <details> and <summary> lines
        for match in re.finditer(r"(\\*)<(?=[A-Za-z/!?])", bare):
            if len(match.group(1)) % 2 == 0:
                assert line in {"<details>", "</details>", "<summary>", "</summary>"}, line
        # links: never to another scheme than http(s)
        for match in re.finditer(r"(\\*)\]\(([^)\s]*)", bare):
            if len(match.group(1)) % 2 == 0:
                assert HREF.fullmatch(match.group(2)), (match.group(2), line)
    assert "javascript:alert(1)" in markdown  # shown, as text
    assert CONTROL.search(markdown) is None  # nor a terminal's escape sequence, for `cat`


def _cells(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


@pytest.mark.parametrize("name", ["summary.csv", "runs.csv"])
def test_csv_cells_are_no_formulas_and_numbers_stay_numbers(
    hostile: tuple[Path, Any], name: str
) -> None:
    out, _ = hostile
    header, rows = _cells(out / name)
    cells = header + [value for row in rows for value in row.values()]
    for value in cells:
        if value.startswith(FORMULA):
            assert PLAIN_NUMBER.fullmatch(value), value
    shown = {row.get("sweep") for row in rows}
    assert shown == {"'" + SWEEP, "'" + SWEEP_2}
    if name == "summary.csv":
        assert {row["host_cpu"] for row in rows} == {CPU, "'" + CPU_2}
    else:
        values = {row["fitness_min"] for row in rows if row["fitness_min"]}
        assert values == {str(NEGATIVE)}


def test_terminal_gets_no_escape_sequence_from_a_run(
    hostile: tuple[Path, Any], tmp_path: Path
) -> None:
    _, done = hostile
    assert ESC not in done.stdout + done.stderr and "\x07" not in done.stderr
    assert "evil\\x1b[31mmod" in done.stderr  # named, escaped
    # an error line of the command line: `harness enjoy` refuses the recorded import
    runs = next(hostile[0].parent.glob("runs"))
    run_dir = sorted(p for p in runs.iterdir() if p.name.isdigit())[0]
    refused = harness_cli("enjoy", str(run_dir), "--episodes", "1", check=False)
    assert refused.returncode == 2, refused.stderr
    assert ESC not in refused.stdout + refused.stderr
    assert "harness: error:" in refused.stderr and "\\x1b" in refused.stderr


def test_terminal_text_shows_control_characters_escaped() -> None:
    from harness.commands import terminal_text

    shown = terminal_text("a" + ESC + "[2J\r\x9b\u202eb\n\tc [sigma=0.05]")
    assert shown == "a\\x1b[2J\\r\\x9b\\u202eb\n\tc [sigma=0.05]"
