"""Redraw the committed reports from their run archives, and write their index.

``reports/index.yaml`` lists every committed report: its folder, title, note, kind (a
study or a tuning probe), the question it answers, the groups its index line quotes and
any further ``harness report`` options. ::

    python scripts/reports.py                 # redraw every report, then write reports/README.md
    python scripts/reports.py redraw demo     # redraw the named folders only
    python scripts/reports.py index           # only write reports/README.md

Each report is drawn by ``harness report reports/FOLDER/runs.tar.xz --out reports/FOLDER``
with the index's title, note and options, so a report's figures and tables always come
from the current code. ``reports/README.md`` quotes each study's scores from its
redrawn ``report.md``, never typed in.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path("reports")
INDEX = ROOT / "index.yaml"
ARCHIVE = "runs.tar.xz"
SCORES = "## Scores at the common budget"


@dataclass
class Entry:
    folder: str
    kind: str
    title: str
    question: str
    note: str = ""
    headline: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return ROOT / self.folder


def load_index(path: Path = INDEX) -> list[Entry]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [Entry(**item) for item in data["reports"]]


def redraw(entry: Entry) -> Path:
    """Draw ``entry``'s report from its archive with the current code."""
    from harness.records import STATUSES
    from harness.report.build import build_report

    map_runs = 0  # archives hold no population logs
    if "--map-runs" in entry.options:
        map_runs = int(entry.options[entry.options.index("--map-runs") + 1])
    statuses = STATUSES if "--all-statuses" in entry.options else ("COMPLETED",)
    return build_report(
        [str(entry.path / ARCHIVE)],
        str(entry.path),
        title=entry.title,
        map_runs=map_runs,
        statuses=statuses,
        note=entry.note or None,
    )


# -- reading a drawn report --------------------------------------------------------------


def table_rows(markdown: str, header_start: str) -> list[dict[str, str]]:
    """The rows of the first Markdown table whose header starts with ``header_start``."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def scores(report_md: Path) -> dict[str, dict[str, str]]:
    """The report's scores at the common budget, by group: mean, interval, n, env."""
    markdown = report_md.read_text(encoding="utf-8")
    section = markdown[markdown.index(SCORES) :]
    return {row["group"]: row for row in table_rows(section, "| env | group | n |")}


def common_budgets(report_md: Path) -> dict[str, str]:
    """env -> the common budget the scores are read at (``3M timesteps``)."""
    markdown = report_md.read_text(encoding="utf-8")
    section = markdown[markdown.index(SCORES) :]
    found = re.search(r"common budget \(([^)]*)\)", section)
    budgets: dict[str, str] = {}
    for part in (found.group(1) if found else "").split(", "):
        env, _, budget = part.partition(": ")
        if budget:
            budgets[env] = budget
    return budgets


def headline_text(group: str, row: dict[str, str]) -> str:
    """``group mean [low, high]``, or ``group mean (n=2)`` where there is no interval."""
    interval = row["mean 95% CI"]
    if interval.startswith("["):
        return f"{group} {row['mean']} {interval}"
    return f"{group} {row['mean']} (n={row['n']}, no interval)"


def title_parts(report_md: Path) -> tuple[str, str, str]:
    """The title, its ``n=...`` text and its budget text, from the report's first line."""
    first = report_md.read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
    found = re.fullmatch(r"(.*) \((n=[^,]*), budget (.*)\)", first)
    if not found:
        return first, "", ""
    return found.group(1), found.group(2), found.group(3)


def envs_and_algos(folder: Path) -> tuple[str, str]:
    import pandas as pd

    summary = pd.read_csv(folder / "summary.csv")
    envs = ", ".join(sorted(summary["env"].astype(str).unique()))
    algos = ", ".join(sorted(summary["algo"].astype(str).unique()))
    return envs, algos


def index_markdown(entries: list[Entry]) -> str:
    """reports/README.md: the studies first, one row each; then the probes, one line each."""
    lines = [
        "# Reports",
        "",
        "Generated by `make reports` (`scripts/reports.py`) from `reports/index.yaml` and the",
        "reports themselves. Each folder holds `report.md` with its figures, `summary.csv` (one",
        "row per run) and `runs.tar.xz`, the run records it is drawn from: `make reports`",
        "redraws every report from its archive with the current code (`report.html` and",
        "`runs.csv` are written beside it and not committed). Scores are the mean evaluation",
        "return at each report's common budget with its 95% interval (stratified bootstrap over",
        "runs); no interval below 3 runs. These studies ran on tuning seeds (below 100); the",
        "results on held-out seeds are the benchmark, [BENCHMARK.md](../BENCHMARK.md).",
        "",
        "## Studies",
        "",
        "| report | question | envs | algorithms | runs | budget | scores at the common budget |",
        "|---|---|---|---|---|---|---|",
    ]
    for entry in entries:
        if entry.kind != "study":
            continue
        md = entry.path / "report.md"
        _, n_text, budget = title_parts(md)
        envs, algos = envs_and_algos(entry.path)
        rows = scores(md)
        budgets = common_budgets(md)
        quoted = []
        for group in entry.headline:
            row = rows[group]
            at = budgets.get(row["env"], "")
            quoted.append(headline_text(group, row) + (f" at {at}" if at else ""))
        lines.append(
            f"| [{entry.folder}]({entry.folder}/report.md) | {entry.question} | {envs} | "
            f"{algos} | {n_text} | {budget} | {'; '.join(quoted) or 'see the report'} |"
        )
    lines += [
        "",
        "## Tuning probes",
        "",
        "Short runs made while choosing the shipped per-env defaults, mostly on one or two",
        "seeds; [docs/locomotion-tuning.md](../docs/locomotion-tuning.md) tells what each showed.",
        "",
    ]
    for entry in entries:
        if entry.kind == "probe":
            title, n_text, budget = title_parts(entry.path / "report.md")
            lines.append(
                f"- [{entry.folder}]({entry.folder}/report.md): {entry.question} "
                f"({title}; {n_text}, budget {budget})"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", default="all", choices=["all", "redraw", "index"])
    parser.add_argument("folders", nargs="*", help="redraw only these folders (index.yaml's)")
    args = parser.parse_args(argv)
    entries = load_index()
    known = {e.folder for e in entries}
    unknown = [f for f in args.folders if f not in known]
    if unknown:
        parser.error(f"not in {INDEX}: {', '.join(unknown)}")
    if args.what in ("all", "redraw"):
        for entry in entries:
            if args.folders and entry.folder not in args.folders:
                continue
            print(f"redrawing {entry.path}", flush=True)
            redraw(entry)
    if args.what in ("all", "index"):
        (ROOT / "README.md").write_text(index_markdown(entries), encoding="utf-8")
        print(f"wrote {ROOT / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
