"""Screenshots of every page for a person to look at (not assertions of looks): sign-in, Needs
attention, Records, a record with its actions, the reconcile form and a reconciled record. They
are made in a tenant of their own (`shop`) so other tests' records stay out of the picture, and
saved as PNGs in ONCEKEY_CONSOLE_SCREENSHOTS (default $CARGO_TARGET_DIR/console-screenshots);
with ONCEKEY_UPDATE_DOCS_SCREENSHOT=1 the Needs attention one is also copied to docs/console.png."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from playwright.sync_api import Page

from conftest import REPO, Stack, Tokens, record_url, sign_in


def seed(stack: Stack, tokens: Tokens) -> None:
    """A small, plausible ledger in tenant `shop` (fixed keys: the stack is new for each run)."""
    t = tokens.shop

    def cli(*args: str) -> dict:  # type: ignore[type-arg]
        return stack.cli(*args, token=t).json()

    cli(
        "claim",
        "payments.charge",
        "order-1042",
        "--payload",
        '{"amount":129900,"currency":"EUR","customer":"cus_8812"}',
        "--require-approval",
        "--owner",
        "checkout",
    )
    cli(
        "claim",
        "payments.refund",
        "refund-0077",
        "--payload",
        '{"amount":4500,"charge":"ch_3Pq1"}',
        "--require-approval",
        "--owner",
        "support-desk",
    )
    for ns, key, owner in (
        ("payments.charge", "order-1039", "checkout-worker-2"),
        ("email.send", "welcome-5521", "mailer-7f9c"),
    ):
        cli(
            "claim",
            ns,
            key,
            "--payload",
            '{"n":1}',
            "--at-most-once",
            "--lease",
            "1s",
            "--owner",
            owner,
        )
    cli(
        "claim",
        "reports.export",
        "nightly-2026-12-03",
        "--payload",
        "{}",
        "--lease",
        "1s",
        "--owner",
        "exporter-1",
    )
    done = cli(
        "claim",
        "payments.charge",
        "order-1040",
        "--payload",
        '{"amount":2500}',
        "--owner",
        "checkout-worker-1",
    )
    cli(
        "complete",
        "payments.charge",
        "order-1040",
        "--lease-token",
        str(done["lease"]["token"]),
        "--code",
        "201",
        "--content-type",
        "application/json",
        "--body",
        '{"charge":"ch_3Pq7","status":"succeeded"}',
    )
    failed = cli("claim", "email.send", "receipt-5519", "--payload", "{}", "--owner", "mailer-7f9c")
    cli(
        "fail",
        "email.send",
        "receipt-5519",
        "--lease-token",
        str(failed["lease"]["token"]),
        "--disposition",
        "final",
        "--code",
        "550",
        "--message",
        "mailbox unavailable",
    )
    time.sleep(1.3)  # the 1 s leases lapse


def test_screenshots(stack: Stack, page: Page, tokens: Tokens, screenshots: Path) -> None:
    seed(stack, tokens)
    shots: list[Path] = []

    def shot(name: str) -> None:
        path = screenshots / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 5000, path
        shots.append(path)

    page.goto(f"{stack.console}/signin")
    page.fill("#name", "alice")
    shot("01-sign-in")

    sign_in(page, stack.console, tokens.shop)
    # Listing may lag a change by a few seconds (api.md, Listing): look again until it shows.
    want = (("#unknown", 2), ("#awaiting", 2), ("#lapsed", 1))
    deadline = time.monotonic() + 15
    while True:
        counts = [page.locator(f"{section} tr.row").count() for section, _ in want]
        if counts == [n for _, n in want] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
        page.reload()
    for (section, n), count in zip(want, counts):
        assert count == n, (section, page.locator(f"{section} tr.row").all_inner_texts())
    shot("02-needs-attention")
    if os.environ.get("ONCEKEY_UPDATE_DOCS_SCREENSHOT") == "1":
        shutil.copyfile(screenshots / "02-needs-attention.png", REPO / "docs" / "console.png")

    page.get_by_role("link", name="Records").click()
    page.wait_for_url("**/records")
    assert page.locator("table.records tr.row").count() == 7
    shot("03-records")

    page.goto(record_url(stack.console, "payments.charge", "order-1042"))
    assert page.locator("#approve").is_visible() and page.locator("#purge-button").is_visible()
    page.fill("#approve-note", "customer confirmed by phone, ticket OPS-1234")
    shot("04-record-awaiting-approval")

    page.goto(record_url(stack.console, "payments.charge", "order-1039"))
    page.check("input[name=outcome][value=succeeded]")
    page.fill("#rc-code", "201")
    page.fill("#rc-body", '{"charge":"ch_3Pq9","amount":8900,"status":"succeeded"}')
    page.fill("#rc-note", "charge ch_3Pq9 found in the provider dashboard")
    shot("05-record-reconcile-form")
    page.click("#reconcile-button")
    page.wait_for_url("**done=reconciled")
    assert page.locator("#status").inner_text() == "SUCCEEDED"
    shot("06-record-reconciled")

    print(f"\nconsole screenshots: {', '.join(str(s) for s in shots)}")
