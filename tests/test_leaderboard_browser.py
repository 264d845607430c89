"""The leaderboard site in a real browser: headless Chromium driven over the DevTools protocol
(`polar_bench.leaderboard.browser`). The pages are loaded from files (file:// URLs), as a reader who
opens ``leaderboard/site/index.html`` would; the test checks the rendered table, that clicking a
column heading re-sorts it, and that the injected markup of a hostile submission did not run.

Skipped when no Chromium is installed (Debian: ``apt-get install -y chromium chromium-driver``)."""

from __future__ import annotations

import pytest
from test_leaderboard_fixtures import XSS_INFO, XSS_NAME, add_verification, make_leaderboard

from polar_bench.leaderboard import RankingOptions, build
from polar_bench.leaderboard.browser import Chromium, find_chromium
from polar_bench.leaderboard.site import SITE_TITLE

pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="Chromium is not installed (Debian: apt-get install -y chromium chromium-driver, or set "
           "POLAR_BENCH_CHROMIUM); the leaderboard site's browser test needs it")

ROWS = ("Array.from(document.querySelectorAll('table.sortable tbody tr'))"
        ".map(r => Array.from(r.cells).map(c => c.textContent.trim()))")
# Traces the payloads would leave, had any of them run.
INJECTION_TRACES = "[typeof window.__pwned, document.title, document.querySelectorAll('script').length," \
                   " document.querySelectorAll('[onerror], b').length]"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    board = make_leaderboard(tmp_path_factory.mktemp("leaderboard"))
    add_verification(board, "strong", True)
    add_verification(board, "weak", False)
    build(board, RankingOptions(reps=500, poi_reps=200), plots=False)
    return board / "site"


@pytest.fixture(scope="module")
def browser():
    with Chromium(width=1400, height=900) as b:
        yield b


def agents(browser) -> list[str]:
    return [row[1] for row in browser.evaluate(ROWS)]


def assert_nothing_ran(browser):
    pwned, title, scripts, injected = browser.evaluate(INJECTION_TRACES)
    assert pwned == "undefined" and title == SITE_TITLE
    assert scripts == 1, "only the site's own script element"
    assert injected == 0, "no element made of submitted markup"
    assert browser.dialogs == [], f"a JavaScript dialog opened: {browser.dialogs}"


def test_table_renders_with_ranks_ties_and_escaped_names(site, browser):
    browser.open((site / "index.html").as_uri())
    rows = browser.evaluate(ROWS)
    assert [r[1] for r in rows] == ["strong", "close-second", XSS_NAME, "weak"]
    assert [r[0] for r in rows] == ["1", "1 ≈", "3", "—"]  # tied entries share a rank
    header = browser.evaluate("Array.from(document.querySelectorAll('table.sortable th')).map(t => t.textContent)")
    assert header[:8] == ["Rank", "Agent", "Overall IQM", "classic", "dmc", "procgen", "nethack", "babyai"]
    assert rows[0][-2:] == ["10 of 1,770 episodes re-run, 0 of 38 tasks, 2026-02-01", "2026-01-10"]
    assert rows[3][-2] == "failed (3 of 10 differ)"
    assert rows[1][-3] == "1,248", "LLM tokens per episode of the LLM agent"
    assert browser.evaluate("document.querySelector('tr.tied td:nth-child(2)').textContent") == "close-second"
    assert_nothing_ran(browser)
    assert browser.console_errors == []


def test_sort_click_changes_the_order(site, browser):
    browser.open((site / "index.html").as_uri())
    before = agents(browser)
    browser.click("table.sortable th:nth-child(2) button")  # Agent: ascending first
    after = agents(browser)
    assert after != before and after == sorted(before, key=str.lower)
    assert browser.evaluate("document.querySelector('table.sortable th:nth-child(2)').getAttribute('aria-sort')") \
        == "ascending"
    browser.click("table.sortable th:nth-child(2) button")
    assert agents(browser) == sorted(before, key=str.lower, reverse=True)
    browser.click("table.sortable th:last-child button")  # Date: newest first
    assert agents(browser) == ["weak", XSS_NAME, "close-second", "strong"]
    browser.click("table.sortable th:nth-child(1) button")  # Rank: 1 first, the unranked entry last
    assert agents(browser) == before
    browser.click("table.sortable th:nth-child(4) button")  # classic IQM: best first
    ranked = agents(browser)
    assert ranked[-2:] == [XSS_NAME, "weak"] and set(ranked[:2]) == {"strong", "close-second"}
    assert_nothing_ran(browser)
    assert browser.console_errors == []


def test_domain_view_and_entry_page(site, browser, tmp_path):
    browser.open((site / "v1-classic.html").as_uri())
    rows = browser.evaluate(ROWS)
    assert len(rows) == 4 and rows[-1][0] == "—"
    header = browser.evaluate("Array.from(document.querySelectorAll('table.sortable th')).map(t => t.textContent)")
    assert header[2] == "classic IQM" and "gym/CartPole-v1" in header
    assert_nothing_ran(browser)

    browser.click("a[href^='entry-']:not([href='index.html'])")  # the first agent's page
    browser.wait_event("Page.loadEventFired")
    assert browser.evaluate("document.querySelector('h1').textContent") in {"strong", "close-second"}

    xss_page = next(p for p in site.glob("entry-*.html") if "&lt;script&gt;alert(1)" in p.read_text())
    browser.open(xss_page.as_uri())
    assert browser.evaluate("document.querySelector('h1').textContent") == XSS_NAME
    text = browser.evaluate("document.querySelector('dl').textContent")
    for value in (XSS_INFO["license"], XSS_INFO["description"], XSS_INFO["authors"][0]):
        assert value in text, "shown as text, literally"
    assert browser.evaluate("document.querySelector('dd a').getAttribute('href')") == XSS_INFO["url"]
    assert_nothing_ran(browser)

    shot = browser.screenshot(tmp_path / "page.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
