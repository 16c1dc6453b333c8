"""Agent safety in the console: Needs attention lists the suspected duplicate intents (the same
arguments claimed under several keys, one of them refused by the intent guard) with each key
linked to its record and the refused one marked, keeps them through the live refresh, and a
parent's page shows its run budget after a child was created and another refused."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page

from conftest import Stack, Tokens, record_url, sign_in, uid, wait_for


def test_suspected_duplicates_are_listed_and_linked(
    stack: Stack, page: Page, tokens: Tokens, screenshots: Path
) -> None:
    ns = f"dup-{uid()}"
    first, second, refused = f"order-{uid()}", f"call_{uid()}", f"call_{uid()}"
    args = '{"order":"o-7","cents":4200}'
    # Guarded by the Claims themselves (the shared ledger has no --intent-guard): the first two
    # are acquired with a warning, the third refused.
    acquired = stack.cli("claim", ns, first, "--payload", args, "--intent-guard", "warn").json()
    assert acquired["outcome"] == "ACQUIRED"
    warned = stack.cli("claim", ns, second, "--payload", args, "--intent-guard", "warn").json()
    assert warned["outcome"] == "ACQUIRED" and warned["intent_matches"][0]["key"] == first
    no = stack.cli("claim", ns, refused, "--payload", args, "--intent-guard", "refuse").json()
    assert no["outcome"] == "DUPLICATE_INTENT", no
    record = stack.lookup(ns, first)
    assert record is not None
    fingerprint = record["fingerprint"]

    sign_in(page, stack.console, tokens.alice)
    section = page.locator("#duplicates")
    row = section.locator("tr.row", has_text=ns)
    assert row.count() == 1
    assert re.fullmatch(r"Suspected duplicate intents \(\d+\)", section.locator("h2").inner_text())
    code = row.locator("code.fingerprint")
    assert code.inner_text() == fingerprint[:12]
    assert code.get_attribute("title") == fingerprint
    # Oldest first: the two acquired keys linked with their status, the refused one marked.
    claims = row.locator("li.claim")
    assert claims.count() == 3
    assert [claims.nth(i).locator(".key, a").inner_text() for i in range(3)] == [
        first,
        second,
        refused,
    ]
    for i in (0, 1):
        assert claims.nth(i).locator(".status").inner_text() == "PROCESSING"
    assert claims.nth(2).get_by_role("link").count() == 0
    assert claims.nth(2).locator(".status").inner_text() == "refused"
    # Claimed "Ns ago" (the script), the time itself in the title.
    when = claims.nth(0).locator("time")
    assert re.fullmatch(r"\d+[smhd] ago", when.inner_text()), when.inner_text()
    assert when.get_attribute("title") == when.get_attribute("datetime")
    # Counted in the summary.
    counts = page.locator("table.counts tr", has=page.locator(f"th:text-is('{ns}')"))
    assert counts.locator("td").last.inner_text() == "1"
    section.screenshot(path=str(screenshots / "attention-duplicates.png"))

    # The filter finds the row by a key; the link keeps its focus through a refresh.
    page.fill("#filter", second)
    assert row.is_visible()
    link = row.get_by_role("link", name=second, exact=True)
    link.focus()
    before = page.locator("#refreshed").inner_text()
    wait_for("a refresh", lambda: page.locator("#refreshed").inner_text() != before, timeout=10)
    assert page.evaluate("() => document.activeElement.textContent") == second
    assert page.evaluate("() => document.activeElement.closest('section').id") == "duplicates"
    assert re.fullmatch(r"\d+[smhd] ago", when.inner_text())

    # Enter follows the link to the record.
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("#key").inner_text() == second
    assert page.locator("#fingerprint").inner_text() == fingerprint


def test_a_parents_page_shows_its_run_budget(stack: Stack, page: Page, tokens: Tokens) -> None:
    ns, run = f"agent-{uid()}", f"run-{uid()}"
    mail = f"mail-{uid()}"
    budget = ["--max-children", "5", "--max-per-namespace", f"{mail}=1"]
    stack.cli("claim", ns, run, "--payload", "{}", *budget).json()
    parent = f"{ns}/{run}"
    stack.cli("claim", mail, "m-1", "--payload", '{"n":1}', "--parent", parent).json()
    over = stack.cli("claim", mail, "m-2", "--payload", '{"n":2}', "--parent", parent)
    assert over.rc == 1 and "BUDGET_EXHAUSTED" in over.stderr, over.stderr

    sign_in(page, stack.console, tokens.alice)
    page.goto(record_url(stack.console, ns, run))
    block = page.locator("#budget")
    assert block.locator("h2").inner_text() == "Run budget"
    assert page.locator("#budget-children").inner_text() == "1 / 5"
    assert page.locator("#budget-refused").inner_text() == "1 new child"
    cap = block.locator("tr", has=page.locator(f"th:text-is('{mail}')"))
    assert cap.locator("td").inner_text() == "1 / 1 spent"
    # The listing marks the parent.
    page.goto(f"{stack.console}/records?namespace={ns}")
    assert page.locator("span.budget").inner_text() == "budget 1/5"
