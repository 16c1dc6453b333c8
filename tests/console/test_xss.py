"""Stored strings are inert text: keys, owners, result bodies (HTML and JSON) and rejection notes
holding `<script>` and `<img onerror>` show as the characters they are on Needs attention (also
after a live refresh), Records and each record's page; no element is made from them, no script
runs, no dialog opens. (The Content-Security-Policy would block inline script anyway, so the
tests look at the DOM, not only at whether script ran.)"""

from __future__ import annotations

import time

from playwright.sync_api import Dialog, Page

from conftest import Stack, Tokens, record_url, sign_in, uid

SCRIPT_KEY = "<script>window.__pwned=1</script>"
IMG_KEY = '<img src=x onerror="window.__pwned=2;alert(2)">'
SVG_KEY = '"><svg onload=alert(3)>'
HTML_BODY = '<script>window.__pwned=4</script><img src=x onerror="window.__pwned=5;alert(5)">'
JSON_BODY = '{"html":"<script>window.__pwned=6</script>","img":"<img src=x onerror=alert(7)>"}'
EVIL_OWNER = "<img src=x onerror=alert(8)>"
EVIL_NOTE = "<b>bold</b><img src=x onerror=alert(9)>"


def assert_inert(page: Page, dialogs: list[str], where: str) -> None:
    assert dialogs == [], f"{where}: a dialog opened: {dialogs}"
    assert page.evaluate("typeof window.__pwned") == "undefined", where
    assert page.locator("img").count() == 0, f"{where}: an <img> was made from stored text"
    assert page.locator("svg").count() == 0, f"{where}: an <svg> was made from stored text"
    assert page.locator("b").count() == 0, f"{where}: a <b> was made from stored text"
    scripts = page.locator("script")
    assert scripts.count() == 1 and scripts.get_attribute("src") == "/assets/console.js", where


def test_stored_markup_renders_as_text(stack: Stack, page: Page, tokens: Tokens) -> None:
    ns = f"xss-{uid()}"
    stack.cli("claim", ns, SCRIPT_KEY, "--payload", "{}", "--require-approval").json()
    for key, body, ct in (
        (IMG_KEY, HTML_BODY, "text/html"),
        (SVG_KEY, JSON_BODY, "application/json"),
    ):
        lease = stack.cli("claim", ns, key, "--payload", "{}").json()["lease"]["token"]
        stack.cli(
            "complete",
            ns,
            key,
            "--lease-token",
            str(lease),
            "--code",
            "200",
            "--body",
            body,
            "--content-type",
            ct,
        ).json()
    unknown_key = f"unknown-{uid()}"
    stack.cli(
        "claim",
        ns,
        unknown_key,
        "--payload",
        "{}",
        "--at-most-once",
        "--lease",
        "1s",
        "--owner",
        EVIL_OWNER,
    ).json()
    rejected_key = f"rejected-{uid()}"
    stack.cli("claim", ns, rejected_key, "--payload", "{}", "--require-approval").json()
    assert stack.cli("reject", ns, rejected_key, "--note", EVIL_NOTE).rc == 0
    time.sleep(1.2)  # the 1 s lease lapses: UNKNOWN

    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    sign_in(page, stack.console, tokens.alice)

    # Needs attention.
    page.goto(stack.console + "/")
    awaiting = page.locator("#awaiting")
    assert awaiting.get_by_role("link", name=SCRIPT_KEY, exact=True).is_visible()
    unknown_row = page.locator("#unknown tr.row", has=page.get_by_role("link", name=unknown_key))
    assert unknown_row.locator("td.owner").inner_text() == EVIL_OWNER
    assert_inert(page, dialogs, "Needs attention")
    page.wait_for_selector("#refreshed", state="attached")
    before = page.locator("#refreshed").inner_text()
    page.wait_for_function(
        "before => document.getElementById('refreshed').textContent !== before",
        arg=before,
        timeout=10_000,
    )
    assert awaiting.get_by_role("link", name=SCRIPT_KEY, exact=True).is_visible()
    assert_inert(page, dialogs, "Needs attention after the live refresh")

    # Records.
    page.goto(f"{stack.console}/records?namespace={ns}")
    for key in (SCRIPT_KEY, IMG_KEY, SVG_KEY):
        assert page.get_by_role("link", name=key, exact=True).is_visible(), key
    assert EVIL_OWNER in page.locator("table.records").inner_text()
    assert_inert(page, dialogs, "Records")

    # Each record, reached by its link (the key travels in the URL, encoded).
    page.get_by_role("link", name=SCRIPT_KEY, exact=True).click()
    page.wait_for_url("**/record?*")
    assert page.locator("#key").inner_text() == SCRIPT_KEY
    assert page.title() == f"{ns} / {SCRIPT_KEY} · Oncekey console"
    assert_inert(page, dialogs, "record with a <script> key")

    page.goto(record_url(stack.console, ns, IMG_KEY))
    assert page.locator("#key").inner_text() == IMG_KEY
    assert page.locator("#result pre.body").inner_text() == HTML_BODY
    assert_inert(page, dialogs, "record with an HTML result")

    page.goto(record_url(stack.console, ns, SVG_KEY))
    assert page.locator("#key").inner_text() == SVG_KEY
    shown = page.locator("#result pre.json").inner_text()
    assert '"html": "<script>window.__pwned=6</script>"' in shown, shown
    assert '"img": "<img src=x onerror=alert(7)>"' in shown, shown
    assert_inert(page, dialogs, "record with a JSON result")

    page.goto(record_url(stack.console, ns, unknown_key))
    assert EVIL_OWNER in page.locator("#receipts .owner").all_inner_texts()
    assert_inert(page, dialogs, "record with a markup owner")

    page.goto(record_url(stack.console, ns, rejected_key))
    assert page.locator("#error-message").inner_text() == EVIL_NOTE
    assert page.locator("#approval q").inner_text() == EVIL_NOTE
    assert_inert(page, dialogs, "record rejected with a markup note")
