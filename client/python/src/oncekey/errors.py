"""The typed exceptions of the Python client, and how a gRPC error becomes one of them.

Every exception the client raises on its own is an ``oncekey.Error``: catch that to catch them all.
The exceptions a wrapped function raises itself are never replaced by these: the caller sees the
function's own exception.

This module only classifies errors; whether to retry one is ``oncekey.retry``'s decision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc
from google.rpc import error_details_pb2, status_pb2

if TYPE_CHECKING:
    from oncekey.types import Record, StoredError

ERROR_DOMAIN = "oncekey"
RETRY_PUSHBACK_HEADER = "grpc-retry-pushback-ms"
_STATUS_DETAILS_HEADER = "grpc-status-details-bin"

# Codes after which resending the identical request may work.
TRANSIENT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)


class Error(Exception):
    """Base class of every error the client raises: ``code`` and ``reason`` say what the server
    answered (``None`` when the error did not come from the server)."""

    code: grpc.StatusCode | None = None
    reason: str | None = None


class RpcError(Error):
    """A server error without a more specific class: e.g. INVALID_ARGUMENT (``field`` names the
    offending request field), UNAUTHENTICATED, PERMISSION_DENIED, NOT_FOUND."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str | None = None, field: str | None = None):
        super().__init__(f"{code.name} {reason or ''}: {message}".replace("  ", " "))
        self.code = code
        self.message = message
        self.reason = reason
        self.field = field


class Unavailable(Error):
    """The ledger could not be reached or could not answer, even after the retries (UNAVAILABLE,
    DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, or the circuit breaker is open). Safe to retry later with
    the same key."""

    def __init__(self, message: str, code: grpc.StatusCode | None = grpc.StatusCode.UNAVAILABLE, reason: str | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason


class KeyReused(Error):
    """The key was first claimed with other arguments (FAILED_PRECONDITION ``KEY_REUSED``): the
    key is not stable for one intent, or the arguments include something that changes per attempt."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = "KEY_REUSED"


class LeaseLost(Error):
    """The lease was lost: another holder took the operation over (or it was settled with this
    lease's token), so this run's outcome was not recorded. ``token`` is the lost fencing token;
    ``operation_error`` the function's own exception, if it raised one."""

    code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, token: int | None, reason: str = "LEASE_LOST", operation_error: BaseException | None = None):
        super().__init__(f"the lease (token {token}) was lost before the outcome was recorded")
        self.token = token
        self.reason = reason
        self.operation_error = operation_error


class InProgress(Error):
    """Another holder is performing the operation; claim again after ``retry_after`` seconds."""

    def __init__(self, retry_after: float, record: Record | None = None):
        super().__init__(f"operation in progress elsewhere; retry after {retry_after:.3f}s")
        self.retry_after = retry_after
        self.record = record


class NeedsReconciliation(Error):
    """An at-most-once operation's holder vanished: its outcome is unknown. Check the outside world
    by the key, then reconcile (``Client.run(..., reconcile=True)`` or ``fn.reconcile(...)``)."""

    def __init__(self, message: str, record: Record | None = None):
        super().__init__(message)
        self.record = record


class OperationFailed(Error):
    """The operation had failed for good earlier; ``error`` is the stored error (nothing ran)."""

    def __init__(self, error: StoredError, record: Record | None = None):
        super().__init__(f"operation failed: {error.code} {error.message}")
        self.error = error
        self.record = record


class AwaitingApproval(Error):
    """The operation waits for an approval that did not come within the wait (nothing ran). Run it
    again once someone approved it (``Client.approve``); a rejection makes it ``OperationFailed``
    (code 403, the approver's note). ``record`` is the record (status ``AWAITING_APPROVAL``)."""

    def __init__(self, record: Record | None = None):
        where = f"{record.namespace}/{record.key}" if record is not None else "the operation"
        super().__init__(f"{where} awaits approval: run it again once approved")
        self.record = record


class NotAwaitingApproval(RpcError):
    """An Approve or Reject of an operation that does not await approval: it never did, was decided
    otherwise, or has moved on since (FAILED_PRECONDITION ``NOT_AWAITING_APPROVAL``)."""


class UnsettledAtMostOnce(RpcError):
    """A Purge of an unsettled at-most-once operation without ``force=True`` (FAILED_PRECONDITION
    ``UNSETTLED_AT_MOST_ONCE``): purging it would let its effect run again."""


class MissingScope(RpcError):
    """The token lacks the scope the call needs (PERMISSION_DENIED ``MISSING_SCOPE``): ``approve``
    for Approve and Reject, ``admin`` for Purge, ``ledger`` for the rest; the message names it."""


_TYPED_REASONS: dict[str, type[RpcError]] = {
    "NOT_AWAITING_APPROVAL": NotAwaitingApproval,
    "UNSETTLED_AT_MOST_ONCE": UnsettledAtMostOnce,
    "MISSING_SCOPE": MissingScope,
}


class EncodeError(Error):
    """The function's result (or the arguments) cannot be turned into JSON. When it is the result,
    the operation was recorded as a final failure, since its effect has happened."""


class DecodeError(Error):
    """The stored result cannot be decoded into the type the function is annotated to return
    (nothing ran; the stored result is ``result``)."""

    def __init__(self, message: str, result: object = None):
        super().__init__(message)
        self.result = result


class FinalError(Exception):
    """Raise from a wrapped function to fail the operation for good: the error is stored and
    replayed (as ``OperationFailed``) to later runs. Any other exception releases the key for a
    retry (the next run acquires it again)."""

    def __init__(self, message: str, *, code: int = 0, details: bytes = b""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class Abandon(Exception):
    """Raise from a wrapped function when nothing happened outside (e.g. validation failed before
    any side effect): the key is forgotten and may be claimed again, even with other arguments."""


def status_of(error: BaseException) -> status_pb2.Status | None:
    """The google.rpc.Status a gRPC error carries in its trailers, or None."""
    for key, value in _trailers(error):
        if key == _STATUS_DETAILS_HEADER:
            status = status_pb2.Status()
            try:
                status.ParseFromString(value)
            except Exception:  # malformed details: treat as absent
                return None
            return status
    return None


def error_info(error: BaseException) -> error_details_pb2.ErrorInfo | None:
    """The google.rpc.ErrorInfo of a server error, or None when it carries none."""
    return _detail(error, error_details_pb2.ErrorInfo)


def reason(error: BaseException) -> str | None:
    """The ErrorInfo reason of a server error (e.g. ``"KEY_REUSED"``), or None."""
    if isinstance(error, Error):
        return error.reason
    info = error_info(error)
    return info.reason if info is not None and info.domain == ERROR_DOMAIN else None


def pushback(error: BaseException) -> tuple[bool, float | None]:
    """The server's wish about retrying: ``(False, None)`` says nothing, ``(True, seconds)`` asks to
    wait that long (``grpc-retry-pushback-ms``, else google.rpc.RetryInfo), ``(True, None)`` (a
    negative or malformed pushback) asks not to retry at all."""
    for key, value in _trailers(error):
        if key == RETRY_PUSHBACK_HEADER:
            try:
                ms = int(value.decode() if isinstance(value, bytes) else value)
            except ValueError:
                return True, None
            return True, (ms / 1000.0 if ms >= 0 else None)
    info = _detail(error, error_details_pb2.RetryInfo)
    if info is not None and info.HasField("retry_delay"):
        return True, max(0.0, info.retry_delay.ToTimedelta().total_seconds())
    return False, None


def is_transient(error: BaseException) -> bool:
    """True for failures that resending the identical request may cure."""
    return isinstance(error, grpc.RpcError) and _code(error) in TRANSIENT_CODES


def classify(error: grpc.RpcError) -> Error:
    """The typed exception for a gRPC error the client gives up on."""
    code = _code(error) or grpc.StatusCode.UNKNOWN
    message = _message(error)
    why = reason(error)
    if why == "KEY_REUSED":
        return KeyReused(message)
    if why in ("LEASE_LOST", "ALREADY_SETTLED"):
        return LeaseLost(None, why)
    if code in TRANSIENT_CODES:
        return Unavailable(f"{code.name}: {message}", code, why)
    bad = _detail(error, error_details_pb2.BadRequest)
    field = bad.field_violations[0].field if bad is not None and bad.field_violations else None
    return _TYPED_REASONS.get(why or "", RpcError)(code, message, why, field)


def _code(error: BaseException) -> grpc.StatusCode | None:
    try:
        return error.code()  # type: ignore[attr-defined]
    except Exception:
        return None


def _message(error: BaseException) -> str:
    try:
        return error.details() or ""  # type: ignore[attr-defined]
    except Exception:
        return str(error)


def _trailers(error: BaseException) -> list[tuple[str, Any]]:
    try:
        trailers = error.trailing_metadata()  # type: ignore[attr-defined]
    except Exception:
        return []
    return [(k, v) for k, v in (trailers or ())]


def _detail(error: BaseException, kind: Any) -> Any:
    status = status_of(error)
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(kind.DESCRIPTOR):
            out = kind()
            detail.Unpack(out)
            return out
    return None
