"""Test setup: the package from src/, and a real ``oncekey serve`` (the Rust binary) that tests can
kill and restart on the same port and data directory.

The binary is ``$ONCEKEY_BIN``, else ``oncekey`` in ``$CARGO_TARGET_DIR/debug`` or the repo's
``target/debug``. A missing binary fails the tests that need it, with the command that builds it.
"""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import threading
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "src"))


def oncekey_binary() -> pathlib.Path:
    if os.environ.get("ONCEKEY_BIN"):
        return pathlib.Path(os.environ["ONCEKEY_BIN"])
    candidates = []
    if os.environ.get("CARGO_TARGET_DIR"):
        candidates.append(pathlib.Path(os.environ["CARGO_TARGET_DIR"]) / "debug" / "oncekey")
    candidates.append(ROOT / "target" / "debug" / "oncekey")
    for path in candidates:
        if path.exists():
            return path
    pytest.fail(
        f"the oncekey binary is missing (looked at {[str(c) for c in candidates]}): "
        "build it with `cargo build -p oncekey` or set ONCEKEY_BIN",
        pytrace=False,
    )


class Server:
    """One ``oncekey serve`` on the embedded store; ``kill`` and ``start`` again keep the port and
    the data directory. ``env`` adds environment variables (e.g. the test-only
    ``ONCEKEY_TEST_CLOCK_SKEW_MS``)."""

    def __init__(self, data_dir: pathlib.Path, extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.extra_args = extra_args
        self.env = env or {}
        self.address: str | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log = data_dir.parent / f"server-{uuid.uuid4().hex[:8]}.log"

    @property
    def target(self) -> str:
        assert self.address is not None, "start the server first"
        return self.address

    def start(self) -> Server:
        listen = self.address or "127.0.0.1:0"
        log = open(self._log, "ab")
        self.process = subprocess.Popen(
            [str(oncekey_binary()), "serve", "--listen", listen, "--admin-listen", "127.0.0.1:0", "--data-dir", str(self.data_dir), *self.extra_args],
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "RUST_LOG": "info", **self.env},
        )
        line: list[bytes] = []
        reader = threading.Thread(target=lambda: line.append(self.process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=30)
        fields = dict(w.split("=", 1) for w in (line[0].decode() if line else "").split() if "=" in w)
        if "grpc" not in fields:
            self.kill()
            pytest.fail(f"oncekey serve did not start:\n{self._log.read_text(errors='replace')}", pytrace=False)
        self.address = fields["grpc"]
        return self

    def kill(self) -> None:
        """SIGKILL: nothing is flushed, connections drop."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path / "data").start()
    yield s
    s.kill()


@pytest.fixture
def tenant():
    """A tenant of its own for each test: no test sees another's records."""
    return f"t-{uuid.uuid4().hex[:12]}"


def fail_reasons(target: str, tenant: str, namespace: str, key: str) -> list[tuple[str, str]]:
    """The (outcome, reason) of each Fail receipt in the record's history, oldest first: Lookup with
    ``include_history`` through the generated stub (the client's ``lookup`` reads no history)."""
    import grpc

    from oncekey.v1 import ledger_pb2 as pb
    from oncekey.v1 import ledger_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        response = ledger_pb2_grpc.LedgerStub(channel).Lookup(
            pb.LookupRequest(namespace=namespace, key=key, include_history=True),
            metadata=(("x-oncekey-tenant", tenant),),
            timeout=10,
        )
    return [(e.outcome, e.reason) for e in response.history if e.kind == pb.EVENT_KIND_FAIL]
