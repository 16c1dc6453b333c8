"""Approve and reject through the record page, on each store: a client held by `oncekey claim
--wait` acquires the moment an operator approves; a rejection fails the operation with code 403
and the operator's note, replayed to every later Claim."""

from __future__ import annotations

import json

from playwright.sync_api import Page

from conftest import Stack, Tokens, follow_from_home, sign_in, uid, wait_for

PAYLOAD = '{"amount":4200,"currency":"EUR","to":"acct_77"}'


def test_approval_releases_the_waiting_client(any_stack: Stack, page: Page, tokens: Tokens) -> None:
    stack = any_stack
    ns, key = f"payments.transfer-{uid()}", f"transfer-{uid()}"
    first = stack.cli("claim", ns, key, "--payload", PAYLOAD, "--require-approval").json()
    assert first["outcome"] == "AWAITING_APPROVAL"

    held_before = stack.metric("oncekey_claims_held")
    waiter = stack.cli_background("claim", ns, key, "--payload", PAYLOAD, "--wait", "60s")
    try:
        wait_for(
            "the background claim to be held by the ledger",
            lambda: waiter.poll() is not None or stack.metric("oncekey_claims_held") > held_before,
        )
        assert waiter.poll() is None, f"the waiting claim returned early: {waiter.communicate()}"

        sign_in(page, stack.console, tokens.alice)
        follow_from_home(page, stack.console, "#awaiting", key)
        assert page.locator("#status").inner_text() == "AWAITING_APPROVAL"
        assert page.locator("#fingerprint").inner_text() == first["record"]["fingerprint"]
        page.fill("#approve-note", "ok per ticket OPS-1234")
        page.click("#approve")
        page.wait_for_url("**done=approved")
        assert page.locator("#flash").inner_text() == "Approved."

        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 0, err
        answer = json.loads(out)
        assert answer["outcome"] == "ACQUIRED", answer
        assert answer["lease"]["token"] == 1
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate()

    page.reload()
    assert page.locator("#status").inner_text() in ("APPROVED", "PROCESSING")
    approval = page.locator("#approval")
    assert approval.locator("strong").inner_text() == "alice"
    assert approval.inner_text().startswith("APPROVED by alice")
    assert approval.locator("q").inner_text() == "ok per ticket OPS-1234"
    kinds = page.locator("#receipts li.receipt .kind").all_inner_texts()
    assert "APPROVE" in kinds and "CLAIM" in kinds, kinds
    # The ledger agrees.
    record = stack.lookup(ns, key)
    assert record is not None and record["status"] == "PROCESSING"
    assert record["approval"]["decided_by"] == "alice"


def test_rejection_fails_the_operation_with_403_and_the_note(
    any_stack: Stack, page: Page, tokens: Tokens
) -> None:
    stack = any_stack
    ns, key = f"payments.transfer-{uid()}", f"transfer-{uid()}"
    stack.cli("claim", ns, key, "--payload", PAYLOAD, "--require-approval").json()

    sign_in(page, stack.console, tokens.alice)
    follow_from_home(page, stack.console, "#awaiting", key)
    page.fill("#reject-note", "beneficiary not on the allow list")
    page.click("#reject")
    page.wait_for_url("**done=rejected")
    assert page.locator("#flash").inner_text() == "Rejected."
    assert page.locator("#status").inner_text() == "FAILED"
    error = page.locator("#error")
    assert "Code 403" in error.inner_text()
    assert page.locator("#error-message").inner_text() == "beneficiary not on the allow list"
    approval = page.locator("#approval")
    assert approval.inner_text().startswith("REJECTED by alice")
    assert "REJECT" in page.locator("#receipts li.receipt .kind").all_inner_texts()
    # Nothing needs attention any more.
    page.goto(stack.console + "/")
    assert page.locator("#awaiting").get_by_role("link", name=key, exact=True).count() == 0

    # Every later Claim is answered with that failure.
    again = stack.cli("claim", ns, key, "--payload", PAYLOAD).json()
    assert again["outcome"] == "FAILED", again
    assert again["record"]["error"]["code"] == 403
    assert again["record"]["error"]["message"] == "beneficiary not on the allow list"
