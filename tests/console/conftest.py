"""Fixtures of the operator console's browser tests: a real `oncekey serve` (embedded store in a
temporary directory, or the CQL store on a migrated keyspace of its own), a real `oncekey console`
in front of it, and Debian's headless Chromium driven by Playwright.

Environment:
  ONCEKEY_BIN                    the `oncekey` binary under test (required)
  ONCEKEY_TEST_CQL_NODES         a running Cassandra (host:port): the workflow tests also run on the
                                 CQL store
  ONCEKEY_CONSOLE_REQUIRE_CQL=1  without ONCEKEY_TEST_CQL_NODES the CQL params fail instead of
                                 being skipped (the console stage of scripts/test sets it)
  ONCEKEY_CONSOLE_SCREENSHOTS    where the PNGs go (default $CARGO_TARGET_DIR/console-screenshots)
  ONCEKEY_UPDATE_DOCS_SCREENSHOT=1  also copy the Needs attention screenshot to docs/console.png
  ONCEKEY_CHROMIUM               the browser (default /usr/bin/chromium)
"""

from __future__ import annotations

import json
import os
import queue
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("ONCEKEY_CHROMIUM", "/usr/bin/chromium")
# The Needs attention lists refresh this often in the shared console (the live refresh test waits
# for it); the keyboard test gets a console of its own that does not refresh under it.
REFRESH = "1s"
STARTUP_TIMEOUT = 90.0


def _bin() -> str:
    path = os.environ.get("ONCEKEY_BIN", "")
    if not path or not os.access(path, os.X_OK):
        raise pytest.UsageError(
            f"ONCEKEY_BIN={path!r}: set it to the oncekey binary to test "
            "(scripts/test console does, after building it)"
        )
    return path


def pytest_configure(config: pytest.Config) -> None:
    _bin()  # a missing binary stops the run at once, with the reason


def uid() -> str:
    """A short unique suffix for keys and namespaces (tests share one ledger)."""
    return secrets.token_hex(4)


# ---- processes -----------------------------------------------------------------------------


class Proc:
    """A child process whose first stdout line is read (the `listening …` line) and whose stderr
    goes to a log file shown when something fails."""

    def __init__(self, name: str, argv: list[str], log_dir: Path) -> None:
        self.name = name
        self.argv = argv
        self.log = log_dir / f"{name}.log"
        self._log_file = open(self.log, "wb")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log_file,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def first_line(self, timeout: float = STARTUP_TIMEOUT) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise RuntimeError(
                f"{self.name}: no stdout line in {timeout}s\n{self.tail()}"
            ) from None
        if line is None:
            self.proc.wait()
            raise RuntimeError(
                f"{self.name} exited {self.proc.returncode} before printing its address:"
                f"\n{' '.join(self.argv)}\n{self.tail()}"
            )
        return line.strip()

    def tail(self, lines: int = 40) -> str:
        if not self._log_file.closed:
            self._log_file.flush()
        text = self.log.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log_file.close()


def addr(line: str, name: str) -> str:
    """`NAME=HOST:PORT` out of a `listening …` line."""
    m = re.search(rf"\b{name}=(\S+)", line)
    if not m:
        raise RuntimeError(f"no {name}= in {line!r}")
    return m.group(1)


# ---- tokens --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Token:
    label: str
    tenant: str
    secret: str
    line: str


def new_token(tenant: str, label: str, scopes: str) -> Token:
    out = subprocess.run(
        [_bin(), "token", "new", "--tenant", tenant, "--label", label, "--scope", scopes],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # token: okt_…
    # tokens-file line: tenant:label:sha256hex:scopes
    found = dict(
        (k.strip(), v.strip())
        for k, v in (ln.split(":", 1) for ln in out.splitlines() if ":" in ln)
    )
    secret, line = found.get("token", ""), found.get("tokens-file line", "")
    assert secret and line.startswith(f"{tenant}:{label}:"), (
        f"unexpected `token new` output:\n{out}"
    )
    assert line.endswith(f":{scopes}"), line
    return Token(label, tenant, secret, line)


@dataclass(frozen=True)
class Tokens:
    alice: Token  # acme: ledger, approve, admin
    bob: Token  # acme: ledger only
    shop: Token  # shop (the screenshots' tenant, label alice): every scope


@pytest.fixture(scope="session")
def tokens() -> Tokens:
    return Tokens(
        alice=new_token("acme", "alice", "ledger,approve,admin"),
        bob=new_token("acme", "bob", "ledger"),
        shop=new_token("shop", "alice", "ledger,approve,admin"),
    )


# ---- the stack: ledger + console -----------------------------------------------------------


@dataclass
class CliResult:
    rc: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        assert self.rc == 0, f"exit {self.rc}: {self.stderr}"
        return json.loads(self.stdout)


@dataclass
class Stack:
    """A running ledger and the console in front of it."""

    store: str
    server: str  # http://127.0.0.1:PORT (gRPC)
    admin: str  # http://127.0.0.1:PORT (metrics)
    console: str  # http://127.0.0.1:PORT
    tokens: Tokens
    procs: list[Proc] = field(default_factory=list)
    work: Path = Path(".")

    def cli(self, *args: str, token: Token | None = None, timeout: float = 90) -> CliResult:
        """`oncekey ARGS --server … --token …` (alice's token unless another is given)."""
        token = token or self.tokens.alice
        p = subprocess.run(
            [_bin(), *args, "--server", self.server, "--token", token.secret],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return CliResult(p.returncode, p.stdout, p.stderr)

    def cli_background(self, *args: str, token: Token | None = None) -> subprocess.Popen[str]:
        token = token or self.tokens.alice
        return subprocess.Popen(
            [_bin(), *args, "--server", self.server, "--token", token.secret],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def lookup(self, namespace: str, key: str, token: Token | None = None) -> dict[str, Any] | None:
        """The record as `oncekey lookup` prints it, or None when the ledger says NOT_FOUND."""
        r = self.cli("lookup", namespace, key, token=token)
        if r.rc != 0 and "NOT_FOUND" in r.stderr:
            return None
        return r.json()["record"]

    def metric(self, name: str) -> float:
        text = urllib.request.urlopen(f"{self.admin}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        raise AssertionError(f"{name} not in /metrics")

    def start_console(self, refresh: str = REFRESH) -> str:
        """Another console on this ledger (its own port and session key); returns its URL."""
        proc = Proc(
            f"console-{self.store}-{len(self.procs)}",
            [
                _bin(),
                "console",
                "--server",
                self.server,
                "--listen",
                "127.0.0.1:0",
                "--refresh",
                refresh,
            ],
            self.work,
        )
        self.procs.append(proc)
        return "http://" + addr(proc.first_line(), "http")

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.stop()


def _cql_nodes(store: str) -> str:
    nodes = os.environ.get("ONCEKEY_TEST_CQL_NODES", "")
    if nodes:
        return nodes
    why = (
        f"the {store} store needs a Cassandra node: set ONCEKEY_TEST_CQL_NODES=host:port "
        "(scripts/cassandra start prints one; scripts/test console starts it)"
    )
    if os.environ.get("ONCEKEY_CONSOLE_REQUIRE_CQL") == "1":
        pytest.fail(f"ONCEKEY_CONSOLE_REQUIRE_CQL=1 but {why}", pytrace=False)
    pytest.skip(why)


def start_stack(store: str, tokens: Tokens, work: Path) -> Stack:
    work.mkdir(parents=True, exist_ok=True)
    tokens_file = work / "tokens"
    tokens_file.write_text("".join(t.line + "\n" for t in (tokens.alice, tokens.bob, tokens.shop)))
    argv = [
        _bin(),
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
        "--tokens-file",
        str(tokens_file),
    ]
    if store == "embedded":
        argv += ["--store", "embedded", "--data-dir", str(work / "data")]
    elif store == "cql":
        nodes = _cql_nodes(store)
        keyspace = f"oncekey_console_{os.getpid()}_{uid()}"
        migrate = subprocess.run(
            [
                _bin(),
                "migrate",
                "--cql-nodes",
                nodes,
                "--cql-keyspace",
                keyspace,
                "--cql-replication",
                os.environ.get("ONCEKEY_TEST_CQL_REPLICATION", "SimpleStrategy:1"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert migrate.returncode == 0, f"oncekey migrate failed:\n{migrate.stderr}"
        argv += ["--store", "cql", "--cql-nodes", nodes, "--cql-keyspace", keyspace]
    else:
        raise ValueError(store)
    server = Proc(f"serve-{store}", argv, work)
    stack = Stack(store=store, server="", admin="", console="", tokens=tokens, work=work)
    stack.procs.append(server)
    try:
        line = server.first_line()
        stack.server = "http://" + addr(line, "grpc")
        stack.admin = "http://" + addr(line, "admin")
        stack.console = stack.start_console()
    except BaseException:
        stack.stop()
        raise
    return stack


class Stacks:
    """One stack per store for the whole run, started on first use."""

    def __init__(self, tokens: Tokens, root: Path) -> None:
        self.tokens = tokens
        self.root = root
        self.started: dict[str, Stack] = {}

    def get(self, store: str) -> Stack:
        if store not in self.started:
            self.started[store] = start_stack(store, self.tokens, self.root / store)
            _STARTED.append(self.started[store])
        return self.started[store]

    def stop(self) -> None:
        for s in self.started.values():
            s.stop()


# Every started stack, for the failure report's log tails.
_STARTED: list[Stack] = []


@pytest.fixture(scope="session")
def stacks(request: pytest.FixtureRequest, tokens: Tokens) -> Iterator[Stacks]:
    root = Path(tempfile.mkdtemp(prefix="oncekey-console-tests-"))
    s = Stacks(tokens, root)
    yield s
    s.stop()
    if request.session.testsfailed or os.environ.get("ONCEKEY_CONSOLE_KEEP_LOGS") == "1":
        print(f"\nconsole tests: logs of the ledger and consoles kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def stack(stacks: Stacks) -> Stack:
    """The embedded-store stack (for the tests that do not depend on the store)."""
    return stacks.get("embedded")


@pytest.fixture(scope="session", params=["embedded", "cql"])
def any_stack(request: pytest.FixtureRequest, stacks: Stacks) -> Stack:
    """The stack of each store (the approve, reject and reconcile workflows run on both)."""
    return stacks.get(request.param)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """A failure's report ends with the tails of the ledgers' and consoles' logs."""
    outcome: Any = yield
    report = outcome.get_result()
    if report.failed and call.when in ("setup", "call"):
        for st in _STARTED:
            for p in st.procs:
                report.sections.append((f"log of {p.name}", p.tail(30)))


# ---- the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"no browser at {CHROMIUM}: run scripts/console-setup", pytrace=False)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        yield b
        b.close()


def new_context(browser: Browser) -> BrowserContext:
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    ctx.set_default_timeout(15_000)
    return ctx


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser profile (no cookies) per test."""
    ctx = new_context(browser)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    target = os.environ.get("CARGO_TARGET_DIR") or str(Path.home() / ".cache/oncekey/target")
    d = Path(os.environ.get("ONCEKEY_CONSOLE_SCREENSHOTS") or Path(target) / "console-screenshots")
    d.mkdir(parents=True, exist_ok=True)
    return d


# ---- helpers the tests share ---------------------------------------------------------------


def sign_in(page: Page, console: str, token: Token, name: str | None = None) -> None:
    """Signs in through the form, as an operator does, and lands on Needs attention."""
    page.goto(f"{console}/signin")
    page.fill("#name", name or token.label)
    page.fill("#token", token.secret)
    page.click("button[type=submit]:has-text('Sign in')")
    page.wait_for_url(f"{console}/")
    assert page.locator("h1").inner_text() == "Needs attention"


def record_url(console: str, namespace: str, key: str) -> str:
    from urllib.parse import urlencode

    return f"{console}/record?{urlencode({'namespace': namespace, 'key': key})}"


def follow_from_home(page: Page, console: str, section: str, key: str, timeout: float = 20) -> None:
    """Opens Needs attention and follows the key's link in `section` (`#unknown`, `#awaiting`,
    `#lapsed`), as an operator does; reloads while the listing has not caught up yet (it may lag
    a change by a few seconds, CONTRACT §9)."""
    page.goto(console + "/")
    link = page.locator(section).get_by_role("link", name=key, exact=True)
    deadline = time.monotonic() + timeout
    while link.count() == 0:
        assert time.monotonic() < deadline, f"{key!r} not listed under {section} in {timeout}s"
        time.sleep(0.5)
        page.reload()
    link.click()
    page.wait_for_url("**/record?*")
    assert page.locator("#key").inner_text() == key


def wait_for(what: str, check: Any, timeout: float = 30.0, every: float = 0.2) -> Any:
    """Polls `check()` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
