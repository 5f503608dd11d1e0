"""gangsched-sim --report: one self-contained page with the comparison and
the plots, rendered by headless Chromium as a person would see it; a
screenshot is kept in build/test-artifacts/sim-report.png."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SIM = os.environ.get("GANGSCHED_SIM", str(ROOT / "build/sim/gangsched-sim"))
ARTIFACTS = Path(os.environ.get("GANGSCHED_ARTIFACTS",
                                ROOT / "build" / "test-artifacts"))
EXAMPLES = ROOT / "sim" / "examples"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-quic", "--no-first-run",
                  "--disable-background-networking",
                  "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("report")
    html = d / "report.html"
    done = subprocess.run(
        [SIM, f"--trace={EXAMPLES / 'trace.jsonl'}",
         f"--config={EXAMPLES / 'even-split.yaml'}",
         f"--config={EXAMPLES / 'production-first.yaml'}",
         f"--out={d / 'out'}", f"--report={html}"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return html


def chromium(*args: str) -> subprocess.CompletedProcess:
    profile = tempfile.mkdtemp(prefix="gangsched-sim-chromium-")
    try:
        return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS,
                               f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def test_the_page_holds_the_table_and_four_plots(report):
    text = report.read_text()
    assert text.count("<svg") == 4
    for plot in ("utilization", "waits", "share-0", "share-1"):
        assert f"id='{plot}'" in text
    assert "GPU utilization over time" in text
    assert "even-split: GPUs held against fair share" in text
    table = text[text.index("Configs side by side"):text.index("Per queue")]
    assert "<td>even-split</td>" in table
    assert "<td>production-first</td>" in table


def test_the_page_loads_nothing_from_anywhere(report):
    text = report.read_text()
    # Only references inside the page (href="#...", url(#...)).
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", text)
    assert not re.search(r"url\(\s*['\"]?(?!#)", text)
    assert "@import" not in text
    assert "<script" not in text
    assert str(report.parent) not in text  # no paths either


def test_the_same_runs_give_the_same_page(report, tmp_path):
    again = tmp_path / "again.html"
    done = subprocess.run(
        ["/usr/bin/python3",
         str(ROOT / "sim" / "tools" / "gangsched_sim_report.py"),
         f"--runs={report.parent / 'out'}", f"--html={again}"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert again.read_bytes() == report.read_bytes()


def test_chromium_renders_the_plots(report):
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"chromium not found at {CHROMIUM} (Debian package "
                    "'chromium')")
    dom = chromium("--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr
    # Parsed as SVG: the plots' paths are in the rendered document.
    assert dom.stdout.count("<svg") == 4
    assert dom.stdout.count("<path") > 50
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "sim-report.png"
    if shot.exists():
        shot.unlink()
    done = chromium("--window-size=1100,2600", f"--screenshot={shot}",
                    report.as_uri())
    assert done.returncode == 0, done.stderr
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50000  # four plots and two tables, not a blank page


def test_the_wide_tables_fit_the_page(report, tmp_path):
    """At the screenshot's width every table fits its column of the page:
    nothing is cut at the right edge (as it was, its headers one unbroken
    word each) or hidden behind a scrollbar; a narrower window scrolls the
    table box (overflow-x). Measured by the browser in a copy of the page
    with a script that writes each table box's widths into the DOM."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"chromium not found at {CHROMIUM}")
    probe = tmp_path / "probe.html"
    script = (
        "<script>document.body.setAttribute('data-fit', JSON.stringify("
        "[...document.querySelectorAll('.wide')].map("
        "d => [d.scrollWidth, d.clientWidth])));</script>")
    probe.write_text(report.read_text().replace("</body>",
                                                script + "</body>"))
    dom = chromium("--window-size=1100,2000", "--dump-dom",
                   probe.as_uri())
    assert dom.returncode == 0, dom.stderr
    found = re.search(r'data-fit="([^"]*)"', dom.stdout)
    assert found, dom.stdout[:2000]
    boxes = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(boxes) == 2
    for scroll, client in boxes:
        assert client > 0
        assert scroll <= client, (scroll, client)
