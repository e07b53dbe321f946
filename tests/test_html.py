"""report.html: the markdown converted, figures embedded, and the page read by a browser.

The browser test opens the page in headless Chromium (Debian's `chromium`, installed by
`make test` when apt is usable) and keeps a screenshot in test-artifacts/ (git-ignored).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.report import html as report_html
from harness.report.html import write_html_report
from tests.synthetic_runs import cell_result, write_run

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
PNG_1PX = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")

MARKDOWN = """# Benchmark report

Drawn from `run-1`: **two** lines
of one paragraph.

## At a glance

- **matmul**: GPU faster from n=256 up
- fastest: torch `cuda:0` <fast> & cheap

![matmul: overview](fig.png)

| cell | note |
|---|---|
| torch \\| cpu | `a\\|b` ok |

![gone](missing.png)
"""


def test_markdown_becomes_html() -> None:
    images = {"images": lambda target: None if "missing" in target else
              f"data:image/png;base64,{target}"}
    body = report_html.MARKDOWN.render(MARKDOWN, images)
    assert "<h1>Benchmark report</h1>" in body and "<h2>At a glance</h2>" in body
    assert ("<p>Drawn from <code>run-1</code>: <strong>two</strong> lines\nof one paragraph.</p>"
            in body)
    assert body.count("<li>") == 2 and "<strong>matmul</strong>" in body
    assert "&lt;fast&gt; &amp; cheap" in body  # text is escaped, never markup
    assert ('<figure><img src="data:image/png;base64,fig.png" alt="matmul: overview">'
            "<figcaption>matmul: overview</figcaption></figure>") in body
    assert "<p><figure>" not in body  # a lone image is a figure, outside any paragraph
    assert "<td>torch | cpu</td>" in body and "<th>cell</th>" in body
    assert "<td><code>a|b</code> ok</td>" in body
    assert "[missing figure: missing.png]" in body


def test_escaped_pipes_stay_inside_their_cell() -> None:
    # summary.md escapes every pipe in a cell, code spans included (GFM splits on a bare one).
    body = report_html.MARKDOWN.render("| a \\| b | c |\n|---|---|\n| `x\\|y` | z |\n",
                                      {"images": lambda _: None})
    assert "<th>a | b</th>" in body and "<td><code>x|y</code></td>" in body
    assert body.count("<td>") == 2


def test_figures_are_embedded_so_the_page_stands_alone(tmp_path: Path) -> None:
    (tmp_path / "fig.png").write_bytes(PNG_1PX)
    summary = tmp_path / "summary.md"
    summary.write_text("# Title\n\n![a figure](fig.png)\n")
    page = write_html_report(summary).read_text()
    assert "<title>Title</title>" in page
    sources = re.findall(r'src="([^"]+)"', page)
    assert sources and all(source.startswith("data:image/png;base64,") for source in sources)


def _report(tmp_path: Path) -> Path:
    """A report drawn by `harness report --html` from a run with a known answer."""
    run_dir = write_run(tmp_path / "run", [
        cell_result("torch", {64: [1e-3] * 6 + [1.1e-3] * 6, 128: [8e-3] * 12}),
        cell_result("numpy", {64: [4e-3] * 6 + [4.4e-3] * 6, 128: [30e-3] * 12}),
    ])
    result = CliRunner().invoke(app, ["report", str(run_dir), "--html", "--out",
                                      str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    return tmp_path / "report" / "report.html"


def test_report_html_holds_summary_tables_and_every_figure(tmp_path: Path) -> None:
    page_path = _report(tmp_path)
    page = page_path.read_text()
    pngs = sorted(page_path.parent.glob("*.png"))
    assert len(pngs) >= 3 and "memory.png" in {p.name for p in pngs}
    assert page.count('src="data:image/png;base64,') == len(pngs)
    assert "<h2>At a glance</h2>" in page and "<h2>Peak memory</h2>" in page
    assert "<table>" in page and "200 MiB" in page
    assert "http://" not in page and "https://" not in page  # readable offline


PROBE = """<script>
window.addEventListener('load', () => {
  const images = [...document.images].map(img => ({alt: img.alt, width: img.naturalWidth}));
  const glance = [...document.querySelectorAll('h2')].find(h => h.textContent === 'At a glance');
  const list = glance && glance.nextElementSibling;
  const probe = document.createElement('pre');
  probe.id = 'probe';
  probe.textContent = JSON.stringify({images,
    glance_height: list ? list.getBoundingClientRect().height : 0,
    glance_text: list ? list.innerText : ''});
  document.body.appendChild(probe);
});
</script>"""


def _browser() -> str:
    for name in BROWSERS:
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no chromium on PATH: `make test` installs Debian's chromium with apt-get when "
                "it runs as root with apt; elsewhere install chromium to run this test")


def _chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    # --no-sandbox: CI containers run as root, where Chromium's sandbox refuses to start.
    command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_browser_loads_every_figure_and_shows_the_verdicts(tmp_path: Path) -> None:
    browser = _browser()
    page_path = _report(tmp_path)
    probed = page_path.with_name("probed.html")
    probed.write_text(page_path.read_text().replace("</body>", PROBE + "\n</body>"))
    dumped = _chromium(browser, tmp_path / "profile", "--virtual-time-budget=10000",
                       "--dump-dom", probed.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', dumped.stdout, re.DOTALL)
    assert found, dumped.stderr[-2000:]
    probe = json.loads(found[1].replace("&quot;", '"').replace("&amp;", "&")
                       .replace("&lt;", "<").replace("&gt;", ">"))
    figures = len(list(page_path.parent.glob("*.png")))
    assert len(probe["images"]) == figures
    assert all(image["width"] > 0 for image in probe["images"]), probe["images"]
    assert probe["glance_height"] > 0
    assert "fastest on box (cpu only) at n=128: torch cpu" in probe["glance_text"]
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "report.png"
    screenshot.unlink(missing_ok=True)
    shot = _chromium(browser, tmp_path / "profile", "--window-size=1280,2400",
                     f"--screenshot={screenshot}", page_path.as_uri())
    assert screenshot.is_file() and screenshot.read_bytes()[:4] == b"\x89PNG", shot.stderr[-2000:]
