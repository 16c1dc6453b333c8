"""Scopes and forged requests: a ledger-only operator sees no approve, reject or purge controls and
a hand-made POST from their session is refused by the ledger (MISSING_SCOPE); a POST without the
session's CSRF token is refused; a page on another origin (another port: same site; `localhost`:
another site) that submits a form to the console is refused, even when it knows the CSRF token,
and the record stays as it was."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from html import escape

import pytest
from playwright.sync_api import Page

from conftest import Stack, Tokens, new_context, record_url, sign_in, uid

PAYLOAD = '{"amount":990000,"to":"acct_evil"}'
# A form as Playwright's request API takes it.
Form = dict[str, str | float | bool]


def awaiting(stack: Stack) -> tuple[str, str, str]:
    ns, key = f"payments.payout-{uid()}", f"payout-{uid()}"
    rec = stack.cli("claim", ns, key, "--payload", PAYLOAD, "--require-approval").json()["record"]
    return ns, key, rec["fingerprint"]


def status(stack: Stack, ns: str, key: str) -> str:
    rec = stack.lookup(ns, key)
    assert rec is not None
    return str(rec["status"])


def csrf_of(page: Page) -> str:
    value = page.locator("input[name=csrf]").first.get_attribute("value")
    assert value and len(value) == 64
    return value


def test_a_ledger_only_operator_gets_no_approval_or_purge(
    stack: Stack, page: Page, tokens: Tokens
) -> None:
    ns, key, fingerprint = awaiting(stack)
    sign_in(page, stack.console, tokens.bob)
    page.goto(record_url(stack.console, ns, key))
    assert page.locator("#status").inner_text() == "AWAITING_APPROVAL"
    for control in ("#approve", "#reject", "#decide", "#purge", "#purge-button", "#confirm"):
        assert page.locator(control).count() == 0, f"{control} shown to a ledger-only token"
    assert "no approve scope" in page.locator("#no-approve").inner_text()

    # Bob forges the POST the approve button would send, with his own valid CSRF token.
    csrf = csrf_of(page)
    form: Form = {
        "csrf": csrf,
        "namespace": ns,
        "key": key,
        "fingerprint": fingerprint,
        "note": "me",
    }
    r = page.context.request.post(f"{stack.console}/record/approve", form=form, max_redirects=0)
    assert r.status == 403, r.text()
    assert "MISSING_SCOPE" in r.text()
    r = page.context.request.post(
        f"{stack.console}/record/purge",
        form={"csrf": csrf, "namespace": ns, "key": key, "confirm": key},
        max_redirects=0,
    )
    assert r.status == 403 and "MISSING_SCOPE" in r.text(), r.text()
    assert status(stack, ns, key) == "AWAITING_APPROVAL"


def test_posts_without_the_sessions_csrf_token_are_refused(
    stack: Stack, page: Page, tokens: Tokens
) -> None:
    # Alice may approve: only the CSRF check stands in the way.
    ns, key, fingerprint = awaiting(stack)
    sign_in(page, stack.console, tokens.alice)
    page.goto(record_url(stack.console, ns, key))
    real = csrf_of(page)
    form: Form = {"namespace": ns, "key": key, "fingerprint": fingerprint, "note": "forged"}
    for csrf in (None, "", "0" * 64, real[:-1] + ("0" if real[-1] != "0" else "1")):
        body: Form = dict(form) if csrf is None else {**form, "csrf": csrf}
        r = page.context.request.post(f"{stack.console}/record/approve", form=body, max_redirects=0)
        assert r.status == 403, (csrf, r.status, r.text())
        assert "CSRF token does not match" in r.text()
    assert status(stack, ns, key) == "AWAITING_APPROVAL"

    # Another session's token does not do either: bob's session, alice's token.
    assert page.context.browser is not None
    ctx = new_context(page.context.browser)
    try:
        other = ctx.new_page()
        sign_in(other, stack.console, tokens.bob)
        r = ctx.request.post(
            f"{stack.console}/record/approve", form={**form, "csrf": real}, max_redirects=0
        )
        assert r.status == 403 and "CSRF" in r.text(), r.text()
    finally:
        ctx.close()
    assert status(stack, ns, key) == "AWAITING_APPROVAL"


class Attacker:
    """Pages served from another origin: a form aimed at the console that submits itself."""

    def __init__(self) -> None:
        self.pages: dict[str, bytes] = {}
        pages = self.pages

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                body = pages.get(self.path)
                self.send_response(200 if body else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(body or b"no such page")

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def form_page(self, path: str, action: str, fields: dict[str, str], no_referrer: bool) -> None:
        inputs = "".join(
            f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">'
            for k, v in fields.items()
        )
        meta = '<meta name="referrer" content="no-referrer">' if no_referrer else ""
        self.pages[path] = (
            f"<!doctype html><html><head>{meta}<title>You won a prize</title></head><body>"
            f'<form id="f" method="post" action="{escape(action)}">{inputs}'
            '<button id="claim-prize">Claim your prize</button></form>'
            "<script>document.getElementById('f').submit()</script></body></html>"
        ).encode()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def attacker() -> Iterator[Attacker]:
    a = Attacker()
    yield a
    a.close()


@pytest.mark.parametrize(
    "host,no_referrer",
    [("127.0.0.1", False), ("127.0.0.1", True), ("localhost", False)],
    ids=["same-site-other-port", "same-site-no-referrer", "cross-site-localhost"],
)
def test_a_form_on_another_origin_cannot_approve(
    stack: Stack, page: Page, tokens: Tokens, attacker: Attacker, host: str, no_referrer: bool
) -> None:
    ns, key, fingerprint = awaiting(stack)
    sign_in(page, stack.console, tokens.alice)
    page.goto(record_url(stack.console, ns, key))
    # The worst case: the other page even knows the session's CSRF token.
    fields = {
        "csrf": csrf_of(page),
        "namespace": ns,
        "key": key,
        "fingerprint": fingerprint,
        "note": "approved by a stranger",
    }
    attacker.form_page("/prize", f"{stack.console}/record/approve", fields, no_referrer)
    evil = f"http://{host}:{attacker.port}/prize"
    with page.expect_response(f"{stack.console}/record/approve") as answer:
        page.goto(evil)
    response = answer.value
    assert response.status == 403, (response.status, response.headers)
    page.wait_for_load_state()
    assert page.url.startswith(stack.console)
    assert page.locator("h1").inner_text() == "Refused"
    assert "a request from another site" in page.locator("p.error").inner_text()
    assert status(stack, ns, key) == "AWAITING_APPROVAL"

    # Clicking instead of auto-submitting changes nothing.
    attacker.pages["/click"] = attacker.pages["/prize"].replace(
        b"<script>document.getElementById('f').submit()</script>", b""
    )
    page.goto(f"http://{host}:{attacker.port}/click")
    with page.expect_response(f"{stack.console}/record/approve") as answer:
        page.click("#claim-prize")
    assert answer.value.status == 403
    assert status(stack, ns, key) == "AWAITING_APPROVAL"
