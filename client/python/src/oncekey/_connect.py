"""How both clients reach a server: the target address, credentials headers, channel options, and
the settings the sync and async clients share.

Nothing here sends a request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, cast

import grpc

from oncekey.retry import BreakerPolicy, RetryPolicy
from oncekey.v1 import ledger_pb2_grpc

new_stub = cast(Callable[[grpc.Channel | grpc.aio.Channel], Any], ledger_pb2_grpc.LedgerStub)
"""The generated ``oncekey.v1.Ledger`` stub of a channel (the generated code is not typed)."""

TENANT_HEADER = "x-oncekey-tenant"

# The channel reconnects quickly after the server comes back (its own backoff would otherwise add
# seconds on top of the client's retry backoff); HTTP/2 pings notice a dead connection.
_CHANNEL_DEFAULTS = {
    "grpc.keepalive_time_ms": 20_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1_000,
}


@dataclass(frozen=True)
class Settings:
    """Everything a client is built from (shared by ``Client`` and ``AsyncClient``)."""

    target: str
    token: str | None = None
    tenant: str | None = None
    credentials: grpc.ChannelCredentials | None = None
    timeout: float = 10.0
    connect_timeout: float = 5.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    owner: str | None = None
    options: Sequence[tuple[str, Any]] = ()

    def address(self) -> tuple[str, grpc.ChannelCredentials | None]:
        """The address for grpc and the credentials to use (``https://`` means TLS)."""
        target = self.target
        if target.startswith("http://"):
            return target[len("http://") :].rstrip("/"), self.credentials
        if target.startswith("https://"):
            return target[len("https://") :].rstrip("/"), self.credentials or grpc.ssl_channel_credentials()
        return target, self.credentials

    def channel_options(self) -> list[tuple[str, Any]]:
        merged = dict(_CHANNEL_DEFAULTS)
        merged.update(dict(self.options))
        return list(merged.items())

    def metadata(self) -> tuple[tuple[str, str], ...]:
        out = []
        if self.token:
            out.append(("authorization", f"Bearer {self.token}"))
        if self.tenant:
            out.append((TENANT_HEADER, self.tenant))
        return tuple(out)
