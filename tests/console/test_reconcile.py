"""Reconciling an at-most-once operation whose outcome is UNKNOWN, on each store: "It happened"
completes it with the operator's result (shown pretty-printed), "It did not happen" fails it for
good; the receipts name the operator and their note, and a later CLI Claim replays the outcome."""

from __future__ import annotations

import json
import time

from playwright.sync_api import Page

from conftest import Stack, Tokens, follow_from_home, sign_in, uid, wait_for

PAYLOAD = '{"amount":1200,"card":"tok_visa"}'


def unknown_operation(stack: Stack) -> tuple[str, str]:
    """An at-most-once operation whose holder vanished: its 1 s lease lapses, it reads UNKNOWN."""
    ns, key = f"payments.charge-{uid()}", f"charge-{uid()}"
    claim = stack.cli("claim", ns, key, "--payload", PAYLOAD, "--at-most-once", "--lease", "1s")
    assert claim.json()["outcome"] == "ACQUIRED"
    time.sleep(1.2)
    wait_for(
        "the record to read UNKNOWN",
        lambda: (stack.lookup(ns, key) or {}).get("status") == "UNKNOWN",
        timeout=15,
    )
    return ns, key


def open_unknown(page: Page, stack: Stack, key: str) -> None:
    follow_from_home(page, stack.console, "#unknown", key)
    assert page.locator("#status").inner_text() == "UNKNOWN"
    assert page.locator("#reconcile-button").is_visible()


def test_reconcile_it_happened(any_stack: Stack, page: Page, tokens: Tokens) -> None:
    stack = any_stack
    ns, key = unknown_operation(stack)
    sign_in(page, stack.console, tokens.alice, name="Alice Operator")
    open_unknown(page, stack, key)

    body = {"amount": 1200, "charge": "ch_3PqX", "refunds": [], "status": "succeeded"}
    page.check("input[name=outcome][value=succeeded]")
    page.fill("#rc-code", "201")
    assert page.input_value("#rc-ct") == "application/json"
    page.fill("#rc-body", json.dumps(body, separators=(",", ":")))
    page.fill("#rc-note", "charge ch_3PqX seen in the Stripe dashboard")
    page.click("#reconcile-button")
    page.wait_for_url("**done=reconciled")

    assert page.locator("#flash").inner_text() == "Reconciled."
    assert page.locator("#status").inner_text() == "SUCCEEDED"
    result = page.locator("#result")
    assert "Code 201" in result.inner_text()
    assert result.locator("pre.json").inner_text() == json.dumps(body, indent=2, sort_keys=True)
    meta = result.locator("table.meta").inner_text()
    assert "oncekey.reconciled_by\tAlice Operator" in meta, meta
    assert "charge ch_3PqX seen in the Stripe dashboard" in meta

    receipts = page.locator("#receipts li.receipt")
    texts = receipts.all_inner_texts()
    reconcile_claim = [
        t
        for t in texts
        if "CLAIM" in t
        and "Alice Operator (console): charge ch_3PqX seen in the Stripe dashboard" in t
    ]
    assert reconcile_claim, texts
    owners = receipts.locator(".owner").all_inner_texts()
    assert "Alice Operator (console): charge ch_3PqX seen in the Stripe dashboard" in owners
    assert "COMPLETE" in receipts.locator(".kind").all_inner_texts()

    # The ledger replays the reconciled outcome to the caller that retries.
    again = stack.cli("claim", ns, key, "--payload", PAYLOAD, "--at-most-once").json()
    assert again["outcome"] == "COMPLETED", again
    assert again["record"]["status"] == "SUCCEEDED"
    assert again["record"]["result"]["code"] == 201


def test_reconcile_it_did_not_happen(any_stack: Stack, page: Page, tokens: Tokens) -> None:
    stack = any_stack
    ns, key = unknown_operation(stack)
    sign_in(page, stack.console, tokens.alice)
    open_unknown(page, stack, key)

    page.check("input[name=outcome][value=failed]")
    page.fill("#rc-code", "402")
    page.fill("#rc-message", "card declined at the provider")
    page.fill("#rc-note", "no charge in the provider's log")
    page.click("#reconcile-button")
    page.wait_for_url("**done=reconciled")

    assert page.locator("#status").inner_text() == "FAILED"
    assert "Code 402" in page.locator("#error").inner_text()
    assert page.locator("#error-message").inner_text() == "card declined at the provider"
    details = json.loads(page.locator("#error pre.body").inner_text())
    assert details == {"reconciled_by": "alice", "note": "no charge in the provider's log"}
    owners = page.locator("#receipts li.receipt .owner").all_inner_texts()
    assert "alice (console): no charge in the provider's log" in owners
    assert "FAIL" in page.locator("#receipts li.receipt .kind").all_inner_texts()

    again = stack.cli("claim", ns, key, "--payload", PAYLOAD, "--at-most-once").json()
    assert again["outcome"] == "FAILED", again
    assert again["record"]["error"]["code"] == 402


def test_reconcile_refuses_a_form_without_a_note(stack: Stack, page: Page, tokens: Tokens) -> None:
    ns, key = unknown_operation(stack)
    sign_in(page, stack.console, tokens.alice)
    open_unknown(page, stack, key)
    page.check("input[name=outcome][value=succeeded]")
    # The browser's own check stops an empty note; a note of blanks reaches the console.
    page.fill("#rc-note", "   ")
    page.click("#reconcile-button")
    page.wait_for_load_state()
    assert "note: say what you checked" in page.locator("p.error[role=alert]").inner_text()
    assert (stack.lookup(ns, key) or {}).get("status") == "UNKNOWN", "nothing was settled"
