"""Signing in: a real browser's own form POST, the Needs attention page listing an operation
created with `oncekey claim --require-approval`, and failed sign-ins that never echo the token."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page

from conftest import Stack, Tokens, new_context, sign_in, uid


def test_a_plain_browser_can_sign_in(stack: Stack, browser: Browser, tokens: Tokens) -> None:
    ctx = new_context(browser)
    try:
        page = ctx.new_page()
        page.goto(f"{stack.console}/signin")
        page.fill("#name", "alice")
        page.fill("#token", tokens.alice.secret)
        with page.expect_navigation():
            page.click("button[type=submit]:has-text('Sign in')")
        assert page.url == f"{stack.console}/", page.locator("main").inner_text()
        assert page.locator("h1").inner_text() == "Needs attention"
    finally:
        ctx.close()


def test_home_lists_an_operation_awaiting_approval(
    stack: Stack, page: Page, tokens: Tokens
) -> None:
    ns, key = f"payments.charge-{uid()}", f"order-{uid()}"
    claim = stack.cli("claim", ns, key, "--payload", '{"amount":1200}', "--require-approval")
    assert claim.json()["outcome"] == "AWAITING_APPROVAL"

    page.goto(stack.console + "/")
    assert page.url == f"{stack.console}/signin", "signed out: / sends to the sign-in page"
    sign_in(page, stack.console, tokens.alice)
    assert page.locator(".who strong").inner_text() == "alice"

    awaiting = page.locator("#awaiting")
    link = awaiting.get_by_role("link", name=key, exact=True)
    assert link.is_visible()
    row = awaiting.locator("tr.row", has=page.get_by_role("link", name=key, exact=True))
    assert row.locator("td").nth(0).inner_text() == ns
    assert "AWAITING_APPROVAL" in row.inner_text()
    for other in ("#unknown", "#lapsed"):
        assert page.locator(other).get_by_role("link", name=key, exact=True).count() == 0
    # The per-namespace counts say it too.
    counts = page.locator("table.counts tr", has=page.locator(f"th:text-is('{ns}')"))
    assert [c.inner_text() for c in counts.locator("td").all()] == ["0", "1", "0", "0"]

    link.click()
    page.wait_for_url("**/record?*")
    assert page.locator("#key").inner_text() == key
    assert page.locator("#status").inner_text() == "AWAITING_APPROVAL"


def test_failed_sign_ins_say_why_and_never_echo_the_token(
    stack: Stack, page: Page, tokens: Tokens
) -> None:
    wrong = "okt_" + "0" * 64
    page.goto(f"{stack.console}/signin")
    page.fill("#name", "mallory")
    page.fill("#token", wrong)
    page.click("button[type=submit]:has-text('Sign in')")
    page.wait_for_load_state()
    assert (
        page.locator("p.error[role=alert]").inner_text() == "The ledger did not accept this token."
    )
    assert page.input_value("#name") == "mallory", "the name is kept"
    assert page.input_value("#token") == "", "the token field is never refilled"
    assert wrong not in page.content()

    # A token and a tenant at once: refused, neither leaks back.
    page.fill("#name", "alice")
    page.fill("#token", tokens.alice.secret)
    page.fill("#tenant", "acme")
    page.click("button[type=submit]:has-text('Sign in')")
    page.wait_for_load_state()
    assert "not both" in page.locator("p.error[role=alert]").inner_text()
    assert tokens.alice.secret not in page.content()
    assert tokens.alice.secret not in page.url
    assert not any(c["name"] == "oncekey_console" for c in page.context.cookies())
