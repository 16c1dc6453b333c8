"""Keyboard use and the live refresh of Needs attention: an operator signs in, finds a record and
approves it with Tab and Enter only (the skip link first); the lists refresh in place every
`--refresh` without touching the filter box or what is typed in it, new records appear, and a
keyboard user's place in the lists survives a refresh."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Page

from conftest import Stack, Tokens, sign_in, uid, wait_for

ACTIVE = """() => {
  const e = document.activeElement;
  return e ? {tag: e.tagName, id: e.id, text: (e.textContent || '').trim(),
              cls: e.className, href: e.getAttribute('href') || ''} : null;
}"""


def active(page: Page) -> dict[str, str]:
    return page.evaluate(ACTIVE) or {}


def tab_to(
    page: Page, what: str, matches: Callable[[dict[str, str]], bool], limit: int = 60
) -> dict[str, str]:
    """Presses Tab until the focused element matches (at most `limit` times)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        a = active(page)
        if matches(a):
            return a
    raise AssertionError(f"{what}: not reached in {limit} Tab presses (last focus: {active(page)})")


@pytest.fixture(scope="module")
def quiet_console(stack: Stack) -> Iterator[str]:
    """A console whose lists do not refresh during the test (at most every 10 minutes)."""
    yield stack.start_console(refresh="10m")


def test_keyboard_only_approval(
    stack: Stack, quiet_console: str, page: Page, tokens: Tokens
) -> None:
    console = quiet_console
    ns, key = f"kbd-{uid()}", f"kbd-order-{uid()}"
    stack.cli("claim", ns, key, "--payload", '{"n":1}', "--require-approval").json()
    # Another record that the filter hides.
    stack.cli("claim", ns, f"other-{uid()}", "--payload", "{}", "--require-approval").json()

    # Sign in from the keyboard.
    page.goto(f"{console}/signin")
    first = tab_to(page, "the skip link", lambda a: True, limit=1)
    assert first["text"] == "Skip to content" and first["href"] == "#main", first
    tab_to(page, "#name", lambda a: a["id"] == "name", limit=3)
    page.keyboard.type("alice")
    tab_to(page, "#token", lambda a: a["id"] == "token", limit=3)
    page.keyboard.type(tokens.alice.secret)
    tab_to(page, "Sign in", lambda a: a["tag"] == "BUTTON" and a["text"] == "Sign in", limit=4)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_url(f"{console}/")

    # Needs attention: the skip link is the first stop; it leads into the content.
    first = tab_to(page, "the skip link", lambda a: True, limit=1)
    assert first["text"] == "Skip to content" and first["cls"] == "skip", first
    page.keyboard.press("Enter")
    assert active(page)["id"] == "main"
    tab_to(page, "#filter", lambda a: a["id"] == "filter", limit=3)
    page.keyboard.type(key)
    link = tab_to(
        page, "the record's link", lambda a: a["tag"] == "A" and a["text"] == key, limit=5
    )
    assert link["href"].startswith("/record?")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator("#key").inner_text() == key

    # The record: Tab to the note, type it, Tab to Approve, Enter.
    tab_to(page, "#approve-note", lambda a: a["id"] == "approve-note", limit=40)
    page.keyboard.type("checked by keyboard")
    button = tab_to(page, "#approve", lambda a: True, limit=1)
    assert button["id"] == "approve", button
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_url("**done=approved")
    assert page.locator("#status").inner_text() == "APPROVED"
    assert page.locator("#approval q").inner_text() == "checked by keyboard"
    record = stack.lookup(ns, key)
    assert record is not None and record["status"] == "APPROVED"


def test_live_refresh_keeps_the_filter_and_shows_new_records(
    stack: Stack, page: Page, tokens: Tokens
) -> None:
    tag = f"live-{uid()}"
    ns = f"refresh-{uid()}"
    hidden_key = f"unrelated-{uid()}"
    stack.cli("claim", ns, hidden_key, "--payload", "{}", "--require-approval").json()
    sign_in(page, stack.console, tokens.alice)
    assert page.locator("#attention").get_attribute("data-refresh-ms") == "1000"

    page.click("#filter")
    page.keyboard.type(tag[:6])  # typing, not finished yet
    new_key = f"{tag}-order"
    stack.cli("claim", ns, new_key, "--payload", "{}", "--require-approval").json()
    before = page.locator("#refreshed").inner_text()
    # Over two refreshes (1 s each) later the new record is listed...
    link = page.locator("#awaiting").get_by_role("link", name=new_key, exact=True)
    link.wait_for(state="visible", timeout=10_000)
    wait_for("a refresh", lambda: page.locator("#refreshed").inner_text() != before, timeout=10)
    # ...and the half-typed filter is as it was, still focused; typing goes on.
    assert page.input_value("#filter") == tag[:6]
    assert active(page)["id"] == "filter"
    page.keyboard.type(tag[6:])
    assert page.input_value("#filter") == tag
    page.wait_for_timeout(2500)  # more refreshes
    assert page.input_value("#filter") == tag
    assert link.is_visible()
    # The filter applies to the refreshed lists: the unrelated record is there but hidden.
    unrelated = page.locator("#awaiting").get_by_role(
        "link", name=hidden_key, exact=True, include_hidden=True
    )
    assert unrelated.count() == 1 and not unrelated.is_visible()


def test_live_refresh_keeps_a_focused_link(stack: Stack, page: Page, tokens: Tokens) -> None:
    ns, key = f"focus-{uid()}", f"focus-{uid()}"
    stack.cli("claim", ns, key, "--payload", "{}", "--require-approval").json()
    sign_in(page, stack.console, tokens.alice)
    page.click("#filter")
    page.keyboard.type(key)
    focused = tab_to(
        page, "the record's link", lambda a: a["tag"] == "A" and a["text"] == key, limit=5
    )
    before = page.locator("#refreshed").inner_text()
    wait_for("a refresh", lambda: page.locator("#refreshed").inner_text() != before, timeout=10)
    assert active(page) == focused, "the focused link is gone after the live refresh"
