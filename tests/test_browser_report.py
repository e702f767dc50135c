"""The HTML report in a real Chromium, offline: every network request is blocked and recorded.

Opens a report (single and comparison, built from a SYNTHETIC trace with a hostile kernel name) as a file://
URL with page.route aborting anything else, then checks: no request left the page, none failed, no console
error or page error, every Plotly figure drew, and the hostile name's script never ran. Uses Debian's
/usr/bin/chromium; never lets Playwright download a browser.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.exporters.report_html import build_report, write_report
from tests.test_report_html import HOSTILE, _report_trace, synthetic_steps

pytestmark = pytest.mark.browser


def _open_offline(browser, path: Path) -> dict:
    """Load the file with the network blocked; return what happened."""
    context = browser.new_context(offline=True)
    page = context.new_page()
    seen = {"blocked": [], "failed": [], "errors": [], "dialogs": []}

    def route(request_route):
        url = request_route.request.url
        if url == path.as_uri():
            request_route.continue_()
        else:
            seen["blocked"].append(url)
            request_route.abort()

    page.route("**/*", route)
    page.on("requestfailed", lambda request: seen["failed"].append(request.url))
    page.on("console", lambda message: message.type == "error" and seen["errors"].append(message.text))
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    page.on("dialog", lambda dialog: (seen["dialogs"].append(dialog.message), dialog.dismiss()))
    page.goto(path.as_uri(), wait_until="load")
    divs = page.locator(".plotly-graph-div")
    seen["figures"] = divs.count()
    page.wait_for_function(
        "n => document.querySelectorAll('.plotly-graph-div .main-svg').length >= n",
        arg=seen["figures"],
        timeout=30_000,
    )
    seen["drawn"] = page.evaluate("document.querySelectorAll('.plotly-graph-div').length")
    seen["drawn_svg"] = page.evaluate(
        "[...document.querySelectorAll('.plotly-graph-div')].filter(d => d.querySelector('.main-svg')).length"
    )
    seen["pwned"] = page.evaluate("window.__pwned === undefined ? null : window.__pwned")
    seen["title"] = page.title()
    page.wait_for_timeout(500)  # late errors (WebGL, resize) would land here
    context.close()
    return seen


@pytest.mark.parametrize("compare", [False, True], ids=["single", "compare"])
def test_report_opens_offline_without_errors(browser, tmp_path, compare):
    trace = _report_trace(tmp_path, HOSTILE, synthetic_steps(16, kernel_name=HOSTILE))
    other = _report_trace(tmp_path, "other", synthetic_steps(16, kernels=2)) if compare else None
    path = tmp_path / "report.html"
    write_report(build_report(trace, other), path)
    seen = _open_offline(browser, path)
    assert seen["blocked"] == [], "the report asked the network for something"
    assert seen["failed"] == []
    assert seen["errors"] == []
    assert seen["dialogs"] == [] and seen["pwned"] is None  # the hostile name stayed text
    expected = 6 + (6 + 2 if compare else 0)  # each trace: overview, 3 per-step charts, categories, gaps
    assert seen["figures"] == expected and seen["drawn_svg"] == expected
    assert "</script>" in seen["title"]  # the title shows the hostile name as text


REAL = sorted(p.name for p in (Path(__file__).resolve().parent / "data" / "real").glob("*.json*"))
FIRST_SCREEN = {"width": 1280, "height": 720}


@pytest.mark.parametrize("name", REAL)
def test_real_trace_report_first_screen_holds_the_cards_and_the_findings(browser, tmp_path, name):
    """Issue 45, on every real trace (tests/data/real, PROVENANCE.md): at 1280x720 the cards and every finding's
    line are on the first screen, before the timeline; every figure draws from the packed plotly.js, offline."""
    from tests.test_report_html import real_report

    html, report = real_report(name)
    path = tmp_path / "report.html"
    write_report(html, path)
    context = browser.new_context(offline=True, viewport=FIRST_SCREEN)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.goto(path.as_uri(), wait_until="load")
    page.wait_for_function(
        "[...document.querySelectorAll('.plotly-graph-div')].every(d => d.querySelector('.main-svg'))",
        timeout=60_000,
    )
    bottoms = page.evaluate(
        "[...document.querySelectorAll('.card, body > .finding > summary, #findings + p, #findings ~ p.note')]"
        ".filter(e => !e.matches('p.note') || e.textContent.startsWith('Context:'))"
        ".map(e => e.getBoundingClientRect().bottom)"
    )
    timeline_top = page.evaluate(
        "[...document.querySelectorAll('h2')].find(h => h.textContent === 'Timeline').getBoundingClientRect().top"
    )
    # a finding with nothing to save is a "Context:" line (issue 44), the rest open as details
    shown = page.locator("body > .finding > summary").count() + page.locator("p.note", has_text="Context: ").count()
    context.close()
    assert errors == []
    assert shown == min(len(report["findings"]), 6)
    assert bottoms and max(bottoms) <= FIRST_SCREEN["height"], bottoms
    assert timeline_top > max(bottoms)
