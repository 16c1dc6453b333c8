"""Purge from the record page: the typed confirmation must be the key, and an unsettled
at-most-once operation also needs the force box (without it the ledger's UNSETTLED_AT_MOST_ONCE
is shown and nothing is removed); a key is shown exactly enough to be typed back."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from conftest import Stack, Tokens, record_url, sign_in, uid


def test_purge_needs_the_key_typed(stack: Stack, page: Page, tokens: Tokens) -> None:
    ns, key = f"email.send-{uid()}", f"welcome-{uid()}"
    claim = stack.cli("claim", ns, key, "--payload", '{"to":"a@example.com"}').json()
    stack.cli(
        "complete", ns, key, "--lease-token", str(claim["lease"]["token"]), "--code", "200"
    ).json()

    sign_in(page, stack.console, tokens.alice)
    page.goto(record_url(stack.console, ns, key))
    assert page.locator("#status").inner_text() == "SUCCEEDED"
    assert page.locator("#force").count() == 0, "a settled record needs no force"

    page.fill("#confirm", key + "x")
    page.click("#purge-button")
    page.wait_for_load_state()
    # The console refuses it itself: the ledger is not asked.
    assert page.locator("h1").inner_text() == "Not done"
    assert "type the record's key exactly" in page.locator("p.error[role=alert]").inner_text()
    assert stack.lookup(ns, key) is not None, "a wrong confirmation purges nothing"

    page.get_by_role("link", name="Back to the record").click()
    page.fill("#confirm", key)
    page.click("#purge-button")
    page.wait_for_url("**/records?*done=purged*")
    assert page.locator("p.ok[role=status]").inner_text() == "Purged."
    assert stack.lookup(ns, key) is None, "Lookup answers NOT_FOUND after the purge"
    assert page.get_by_role("link", name=key, exact=True).count() == 0


def test_purging_an_unsettled_at_most_once_operation_needs_force(
    stack: Stack, page: Page, tokens: Tokens
) -> None:
    ns, key = f"payments.charge-{uid()}", f"charge-{uid()}"
    stack.cli(
        "claim", ns, key, "--payload", '{"amount":5}', "--at-most-once", "--lease", "60s"
    ).json()

    sign_in(page, stack.console, tokens.alice)
    page.goto(record_url(stack.console, ns, key))
    assert page.locator("#status").inner_text() == "PROCESSING"
    assert page.locator("#force").is_visible()

    page.fill("#confirm", key)
    page.click("#purge-button")
    page.wait_for_load_state()
    assert "UNSETTLED_AT_MOST_ONCE" in page.locator("p.error[role=alert]").inner_text()
    record = stack.lookup(ns, key)
    assert record is not None and record["status"] == "PROCESSING"

    page.get_by_role("link", name="Back to the record").click()
    page.fill("#confirm", key)
    page.check("#force")
    page.click("#purge-button")
    page.wait_for_url("**/records?*done=purged*")
    assert stack.lookup(ns, key) is None


def test_a_key_with_edge_spaces_is_shown_as_it_is(stack: Stack, page: Page, tokens: Tokens) -> None:
    ns, key = f"email.send-{uid()}", f"  two  spaces-{uid()} "
    stack.cli("claim", ns, key, "--payload", "{}").json()
    sign_in(page, stack.console, tokens.alice)
    page.goto(record_url(stack.console, ns, key))
    page.fill("#confirm", page.locator("#key").inner_text())
    with page.expect_navigation():
        page.click("#purge-button")
    assert "done=purged" in page.url, page.locator("main").inner_text()
    assert stack.lookup(ns, key) is None
