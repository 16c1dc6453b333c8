"""The connection to an Oncekey server and the claim → run → complete/fail helper."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import grpc
from google.protobuf import duration_pb2

from oncekey.errors import FinalError, InProgress, NeedsReconciliation, OperationFailed
from oncekey.fingerprint import fingerprint
from oncekey.v1 import ledger_pb2, ledger_pb2_grpc

TENANT_HEADER = "x-oncekey-tenant"

_Outcome = ledger_pb2.ClaimOutcome


@dataclass(frozen=True)
class Outcome:
    """What ``Client.run`` returns."""

    result: ledger_pb2.OperationResult
    """The operation's result: the one the function returned, or the stored one replayed."""
    replayed: bool
    """True when the function did not run because the operation had already succeeded."""


class Held:
    """The lease the caller holds while ``run``'s function performs the side effect."""

    def __init__(self, lease: ledger_pb2.Lease):
        self.lease = lease
        self.lost = threading.Event()

    @property
    def token(self) -> int:
        """The fencing token: pass it to downstream systems that fence."""
        return self.lease.token


class Client:
    """A connection to an Oncekey server; thread-safe. Use as a context manager or ``close()`` it.

    ``ledger`` is the generated ``oncekey.v1.Ledger`` stub with the credentials attached.
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        tenant: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ):
        metadata = []
        if token:
            metadata.append(("authorization", f"Bearer {token}"))
        if tenant:
            metadata.append((TENANT_HEADER, tenant))
        options = [("grpc.keepalive_time_ms", 20_000), *options]
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        channel = grpc.intercept_channel(self._channel, _Metadata(metadata))
        self.ledger = ledger_pb2_grpc.LedgerStub(channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def claim(
        self,
        namespace: str,
        key: str,
        args: Any = None,
        *,
        payload_json: str | None = None,
        lease_ttl: float | None = None,
        retention: float | None = None,
        wait: float | None = None,
        owner: str = "",
        semantics: int = ledger_pb2.SEMANTICS_UNSPECIFIED,
        reconcile: bool = False,
        timeout: float | None = None,
    ) -> ledger_pb2.ClaimResponse:
        """Claims ``key``: ``args`` are fingerprinted here; or pass ``payload_json`` for the server."""
        request = ledger_pb2.ClaimRequest(
            namespace=namespace,
            key=key,
            owner=owner,
            semantics=semantics,
            reconcile=reconcile,
            lease_ttl=_duration(lease_ttl),
            retention=_duration(retention),
            wait=_duration(wait),
        )
        if payload_json is not None:
            request.payload_json = payload_json
        else:
            request.fingerprint = fingerprint(args)
        return self.ledger.Claim(request, timeout=timeout)

    def run(
        self,
        namespace: str,
        key: str,
        args: Any,
        fn: Callable[[Held], ledger_pb2.OperationResult],
        *,
        lease_ttl: float = 30.0,
        **claim: Any,
    ) -> Outcome:
        """Claims ``key`` and calls ``fn`` only when the claim acquired it, keeping the lease alive
        over the KeepAlive stream meanwhile; then completes the key with ``fn``'s result, or fails it
        when ``fn`` raises (``FinalError``: for good; anything else: released for a retry).

        A key that already succeeded returns its stored result without calling ``fn``; one that
        failed for good raises ``OperationFailed``; one in flight elsewhere ``InProgress`` (pass
        ``wait=`` seconds to wait for its outcome instead).
        """
        claimed = self.claim(namespace, key, args, lease_ttl=lease_ttl, **claim)
        if claimed.outcome == _Outcome.CLAIM_OUTCOME_COMPLETED:
            return Outcome(result=claimed.record.result, replayed=True)
        if claimed.outcome == _Outcome.CLAIM_OUTCOME_FAILED:
            raise OperationFailed(claimed.record.error)
        if claimed.outcome == _Outcome.CLAIM_OUTCOME_IN_PROGRESS:
            raise InProgress(claimed.retry_after.ToTimedelta().total_seconds())
        if claimed.outcome == _Outcome.CLAIM_OUTCOME_NEEDS_RECONCILIATION:
            raise NeedsReconciliation(f"{namespace}/{key} needs reconciliation")
        if claimed.outcome != _Outcome.CLAIM_OUTCOME_ACQUIRED:
            raise RuntimeError(f"unknown claim outcome {claimed.outcome}")

        held = Held(claimed.lease)
        token = claimed.lease.token
        keep_alive = _KeepAlive(
            self.ledger,
            ledger_pb2.KeepAliveRequest(
                namespace=namespace, key=key, lease_token=token, lease_ttl=_duration(lease_ttl)
            ),
            held,
        )
        try:
            result = fn(held)
        except FinalError as e:
            keep_alive.close()
            error = ledger_pb2.OperationError(code=e.code, message=e.message, details=e.details)
            self.ledger.Fail(
                ledger_pb2.FailRequest(
                    namespace=namespace,
                    key=key,
                    lease_token=token,
                    error=error,
                    disposition=ledger_pb2.DISPOSITION_FINAL,
                )
            )
            raise OperationFailed(error) from e
        except BaseException as e:
            keep_alive.close()
            self.ledger.Fail(
                ledger_pb2.FailRequest(
                    namespace=namespace,
                    key=key,
                    lease_token=token,
                    error=ledger_pb2.OperationError(message=f"{type(e).__name__}: {e}"),
                    disposition=ledger_pb2.DISPOSITION_RETRYABLE,
                )
            )
            raise
        keep_alive.close()
        result = result if result is not None else ledger_pb2.OperationResult()
        self.ledger.Complete(
            ledger_pb2.CompleteRequest(namespace=namespace, key=key, lease_token=token, result=result)
        )
        return Outcome(result=result, replayed=False)


class _KeepAlive:
    """Holds a KeepAlive stream open on a background thread until ``close``; records each renewed
    lease in ``held`` and sets ``held.lost`` if the server ends the stream first."""

    def __init__(self, ledger: ledger_pb2_grpc.LedgerStub, request: ledger_pb2.KeepAliveRequest, held: Held):
        self._closed = threading.Event()
        self._held = held

        def requests():
            yield request
            self._closed.wait()

        self._call = ledger.KeepAlive(requests())
        self._thread = threading.Thread(target=self._read, name="oncekey-keepalive", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for lease in self._call:
                self._held.lease = lease
        except grpc.RpcError:
            pass
        if not self._closed.is_set():
            self._held.lost.set()

    def close(self) -> None:
        self._closed.set()
        self._call.cancel()
        self._thread.join()


def _duration(seconds: float | None) -> duration_pb2.Duration | None:
    if seconds is None:
        return None
    d = duration_pb2.Duration()
    d.FromNanoseconds(round(seconds * 1e9))
    return d


class _CallDetails(
    collections.namedtuple(
        "_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
    ),
    grpc.ClientCallDetails,
):
    pass


class _Metadata(
    grpc.UnaryUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds the credentials headers to every call."""

    def __init__(self, metadata: list[tuple[str, str]]):
        self._metadata = metadata

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        return _CallDetails(
            details.method,
            details.timeout,
            [*(details.metadata or ()), *self._metadata],
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_stream(self, continuation, details, request_iterator):
        return continuation(self._details(details), request_iterator)
