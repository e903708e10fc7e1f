"""`report.html` in a real browser: every image loads and no link is broken.

Debian's Chromium (``apt-get install chromium``) is started headless by the test
on a copy of the report with a small script appended; the script records, once
the page has loaded, each image's natural size and each link's target into the
DOM, which ``--dump-dom`` prints. The same test renders a screenshot of the page
(set ``HARNESS_REPORT_SCREENSHOT=/path.png`` to keep it). Skipped where Chromium
is not installed.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import textwrap
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from harness.report.build import build_report
from harness.sweep import load_sweep, run_sweep

CHROMIUM = next(
    (
        path
        for path in (shutil.which(name) for name in ("chromium", "chromium-browser"))
        if path is not None
    ),
    None,
)
#: slow: a browser and a report of real runs (make test-slow)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="Chromium is not installed (Debian: apt-get install chromium); the browser check "
        "of report.html needs a real browser",
    ),
]

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)

CHECK = """
<script>
window.addEventListener("load", () => {
  const images = Array.from(document.images).map((img) => ({
    alt: img.alt,
    complete: img.complete,
    width: img.naturalWidth,
    height: img.naturalHeight,
    src: img.getAttribute("src").slice(0, 32),
  }));
  const links = Array.from(document.querySelectorAll("a[href]")).map((a) => {
    const raw = a.getAttribute("href");
    const fragment = raw.startsWith("#") ? decodeURIComponent(raw.slice(1)) : null;
    return {
      raw: raw,
      resolved: a.href,
      fragment_found: fragment === null ? null : document.getElementById(fragment) !== null,
    };
  });
  const out = document.createElement("pre");
  out.id = "browser-check";
  out.textContent = JSON.stringify({ images: images, links: links, title: document.title });
  document.body.appendChild(out);
});
</script>
"""


def _chromium(*args: str, profile: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small report from real runs: optimes and CMA-ES on CartPole, 3 seeds each."""
    folder = tmp_path_factory.mktemp("browser")
    sweep_file = folder / "browser.yaml"
    sweep_file.write_text(
        textwrap.dedent("""\
        name: browser
        grid: {algo: [optimes, cma], env: [CartPole], seed: [0, 1, 2]}
        budget: {timesteps: 1500}
        backend: inline
        set: [eval_every_timesteps=500, eval_episodes=2]
        overrides:
          optimes: [population=10, noise_size=200000]
          cma: [population=10]
        """)
    )
    runs = folder / "runs"
    result = run_sweep(load_sweep(sweep_file), runs, jobs=2, progress=False)
    assert not result.failed, [(o.cell.label, o.detail) for o in result.failed]
    out = folder / "report"
    build_report([runs], out, map_runs=1)
    return out


def test_report_html_in_a_browser(report_dir: Path, tmp_path: Path) -> None:
    page = report_dir / "report.html"
    text = page.read_text(encoding="utf-8")
    assert text.count("</body>") == 1
    checked = report_dir / "_browser_check.html"  # beside the report: relative links resolve
    checked.write_text(text.replace("</body>", CHECK + "</body>"), encoding="utf-8")
    try:
        done = _chromium(
            "--virtual-time-budget=15000",
            "--dump-dom",
            checked.as_uri(),
            profile=tmp_path / "profile-dom",
        )
    finally:
        checked.unlink()
    found = re.search(r'<pre id="browser-check">(.*?)</pre>', done.stdout, flags=re.DOTALL)
    assert found is not None, f"the check script did not run:\n{done.stderr[-2000:]}"
    result = json.loads(html.unescape(found.group(1)))

    # The headline figure is shown twice (top of the page and among the figures).
    figures = re.findall(r"!\[[^]]*\]\(([^)]+\.png)\)", (report_dir / "report.md").read_text())
    assert sorted(set(figures)) == sorted(p.name for p in report_dir.glob("*.png"))
    assert len(result["images"]) == len(figures) >= 5
    for image in result["images"]:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0, image

    assert result["links"], "the report links its data files and appendices"
    for link in result["links"]:
        if link["fragment_found"] is not None:
            assert link["fragment_found"], f"no element for {link['raw']}"
            continue
        url = urlparse(link["resolved"])
        assert url.scheme == "file", f"a link leaves the report folder: {link['raw']}"
        target = Path(unquote(url.path))
        assert target.exists(), f"broken link {link['raw']} -> {target}"
        assert target.parent == report_dir
    # runs.csv is named, not linked: committed reports leave it out (it is large).
    assert "summary.csv" in {link["raw"] for link in result["links"]}
    assert (report_dir / "runs.csv").is_file()
    assert "n=3 runs per group" in result["title"]


def test_report_screenshot(report_dir: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    done = _chromium(
        "--window-size=1280,4200",
        "--virtual-time-budget=15000",
        f"--screenshot={shot}",
        (report_dir / "report.html").as_uri(),
        profile=tmp_path / "profile-shot",
    )
    assert shot.exists(), done.stderr[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000  # a rendered page, not blank
    keep = os.environ.get("HARNESS_REPORT_SCREENSHOT")
    if keep:
        shutil.copyfile(shot, keep)
