"""Numbers in the README are read from the committed reports they link, never typed in.

Each row of the README's results table links one report and quotes scores as
``GROUP MEAN [LOW, HIGH]`` (or ``GROUP MEAN (n=N)`` below 3 runs); this test finds that
group in the report's "Scores at the common budget" table and fails on any mismatch.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.report.tables import markdown_rows

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
QUOTE = re.compile(
    r"^(?P<group>.+) (?P<mean>-?\d+(?:\.\d+)?) "
    r"(?:\[(?P<low>-?\d+(?:\.\d+)?), (?P<high>-?\d+(?:\.\d+)?)\]|\(n=(?P<n>\d+)\))$"
)


def report_scores(report: Path) -> dict[str, dict[str, str]]:
    markdown = report.read_text(encoding="utf-8")
    section = markdown[markdown.index("## Scores at the common budget") :]
    return {row["group"]: row for row in markdown_rows(section, "| env | group | n |")}


def results_rows() -> list[dict[str, str]]:
    readme = README.read_text(encoding="utf-8")
    section = readme[readme.index("## Results at a glance") :]
    return markdown_rows(section, "| study |")


def test_the_results_table_quotes_its_reports() -> None:
    rows = results_rows()
    assert len(rows) >= 6
    checked = 0
    for row in rows:
        link = re.search(r"\]\((reports/[^)]+/report\.md)\)", row["study"])
        assert link, row["study"]
        scores = report_scores(REPO / link.group(1))
        for quote in row["scores at the common budget"].split("; "):
            found = QUOTE.match(quote)
            assert found, f"unreadable quote {quote!r}"
            group = found.group("group")
            assert group in scores, f"{link.group(1)} has no group {group!r}"
            score = scores[group]
            assert found.group("mean") == score["mean"], (link.group(1), group)
            if found.group("low") is not None:
                interval = f"[{found.group('low')}, {found.group('high')}]"
                assert interval == score["mean 95% CI"], (link.group(1), group)
            else:
                assert found.group("n") == score["n"], (link.group(1), group)
                assert not score["mean 95% CI"].startswith("[")
            checked += 1
        seeds = re.match(r"(\d+)(?:-(\d+))? seeds?", row["runs, budget"])
        if seeds:
            counts = {int(s["n"]) for s in scores.values()}
            assert max(counts) == int(seeds.group(2) or seeds.group(1)), link.group(1)
    assert checked >= 10


def test_the_readme_is_a_guide() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    contents = text[text.index("## Contents") : text.index("## Quick start")]
    assert "(#sweep-files)" in contents and "(#extending)" in contents
    for word in ("issue", "the card", "DESIGN.md", "the seeds'"):
        assert word not in text.lower().replace("issues", ""), word
    for link in re.findall(r"\]\(((?:reports|docs|experiments)/[^)#]+)\)", text):
        if link != "docs/trust.md":  # written beside this guide by the trust work
            assert (REPO / link).exists(), link
