"""The session cookie and sign-out: HttpOnly, SameSite=Strict, unreadable from script, the token in
no page, URL or script-visible storage; sign-out clears the cookie, after which pages send to the
sign-in page and the live refresh answers 401. (The cookie is sealed and stateless: a copy taken
before sign-out stays valid until it idles out, by design — docs/console.md says so — so nothing
here asserts otherwise.)"""

from __future__ import annotations

from playwright.sync_api import Page

from conftest import Stack, Tokens, record_url, sign_in, uid

COOKIE = "oncekey_console"


def test_session_cookie_and_sign_out(stack: Stack, page: Page, tokens: Tokens) -> None:
    secret = tokens.alice.secret
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    ns, key = f"session-{uid()}", f"k-{uid()}"
    stack.cli("claim", ns, key, "--payload", "{}", "--require-approval").json()

    sign_in(page, stack.console, tokens.alice)
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies[COOKIE]
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Strict"
    assert session["path"] == "/"
    assert session["secure"] is False, "plain http on loopback: no Secure"
    assert secret not in session["value"], "the cookie is sealed, not the token"
    assert "oncekey_console_signin" not in cookies, "the sign-in form's cookie is cleared"
    assert COOKIE not in page.evaluate("document.cookie")
    assert page.evaluate("JSON.stringify(Object.assign({}, localStorage, sessionStorage))") == "{}"

    for url in (
        stack.console + "/",
        f"{stack.console}/records",
        record_url(stack.console, ns, key),
    ):
        page.goto(url)
        html = page.content()
        assert secret not in html, url
        assert secret[4:] not in html, url
    page.wait_for_timeout(1500)  # a live refresh or so
    assert not any(secret in u or secret[4:] in u for u in urls), urls

    # The refresh endpoint answers while signed in.
    assert page.context.request.get(f"{stack.console}/attention").status == 200

    page.goto(stack.console + "/")
    with page.expect_navigation():
        page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{stack.console}/signin")
    assert COOKIE not in {c["name"] for c in page.context.cookies()}, "sign-out clears the cookie"
    page.goto(stack.console + "/")
    assert page.url == f"{stack.console}/signin"
    page.goto(record_url(stack.console, ns, key))
    assert page.url == f"{stack.console}/signin"
    assert page.context.request.get(f"{stack.console}/attention").status == 401
    # A console POST without a session is refused too.
    r = page.context.request.post(
        f"{stack.console}/record/approve",
        form={"csrf": "0" * 64, "namespace": ns, "key": key, "fingerprint": "", "note": ""},
        max_redirects=0,
    )
    assert r.status == 403
    assert (stack.lookup(ns, key) or {}).get("status") == "AWAITING_APPROVAL"


def test_an_open_tab_learns_its_session_ended(stack: Stack, page: Page, tokens: Tokens) -> None:
    """Sign-out in one tab: the other tab's live refresh gets 401 and says so in place."""
    sign_in(page, stack.console, tokens.alice)
    other = page.context.new_page()
    other.goto(stack.console + "/")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{stack.console}/signin")
    note = other.locator("#attention p.error")
    note.wait_for(timeout=10_000)
    assert "Your session ended" in note.inner_text()
