"""The typed exceptions of the Python client, and how a gRPC error becomes one of them.

Every exception the client raises on its own is an ``oncekey.Error``: catch that to catch them all.
The exceptions a wrapped function raises itself are never replaced by these: the caller sees the
function's own exception.

This module only classifies errors; whether to retry one is ``oncekey.retry``'s decision.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import grpc
from google.rpc import error_details_pb2, status_pb2

from oncekey.key import OperationKey
from oncekey.v1 import ledger_pb2 as pb

if TYPE_CHECKING:
    from oncekey.types import IntentMatch, Record, StoredError

ERROR_DOMAIN = "oncekey"
_REASON_PREFIX = "ERROR_REASON_"
RETRY_PUSHBACK_HEADER = "grpc-retry-pushback-ms"
_STATUS_DETAILS_HEADER = "grpc-status-details-bin"


def reason_value(name: str | None) -> int | None:
    """The ``ErrorReason`` of a wire reason string (``"KEY_REUSED"`` →
    ``ERROR_REASON_KEY_REUSED``), or None for a reason this version does not know."""
    if not name:
        return None
    try:
        value = pb.ErrorReason.Value(_REASON_PREFIX + name)
    except ValueError:
        return None
    return None if value == pb.ERROR_REASON_UNSPECIFIED else value


def reason_name(value: int) -> str:
    """The wire reason string of an ``ErrorReason`` (``ERROR_REASON_KEY_REUSED`` → ``"KEY_REUSED"``)."""
    return pb.ErrorReason.Name(value).removeprefix(_REASON_PREFIX)


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
    """A server error the client does not retry: ``code``, ``message``, ``reason`` and, for
    INVALID_ARGUMENT, ``field`` (the offending request field). Subclasses name the reasons:
    ``InvalidArgument``, ``NotFound``, ``Unauthenticated``, ``PermissionDenied`` (and its
    ``MissingScope``), ``NotAwaitingApproval``, ``UnsettledAtMostOnce``, ``UnreadableRecord``."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str | None = None, field: str | None = None):
        super().__init__(f"{code.name} {reason or ''}: {message}".replace("  ", " "))
        self.code = code
        self.message = message
        self.reason = reason
        self.field = field


class InvalidArgument(RpcError):
    """The server refused a malformed request (INVALID_ARGUMENT ``INVALID_FIELD`` or ``TOO_LARGE``);
    ``field`` names the offending request field. Nothing changed; do not retry it as it is."""


class NotFound(RpcError):
    """No such record: absent or expired (NOT_FOUND ``NOT_FOUND``)."""


class Unauthenticated(RpcError):
    """A missing, unknown or revoked bearer token (UNAUTHENTICATED ``UNAUTHENTICATED``)."""


class PermissionDenied(RpcError):
    """Valid credentials that do not allow the request (PERMISSION_DENIED), e.g. a tenant header
    naming another tenant than the token's."""


class Unavailable(Error):
    """The ledger could not be reached or could not answer, even after the retries (UNAVAILABLE,
    DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, or the circuit breaker is open). Safe to retry later with
    the same key."""

    def __init__(self, message: str, code: grpc.StatusCode | None = grpc.StatusCode.UNAVAILABLE, reason: str | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason


class RateLimited(Unavailable):
    """The tenant is over an admission limit (RESOURCE_EXHAUSTED ``RATE_LIMITED``), even after the
    retries, which waited as the server asked. Safe to retry later with the same key."""


class KeyReused(Error):
    """The key was first claimed with other arguments (FAILED_PRECONDITION ``KEY_REUSED``): the
    key is not stable for one intent, or the arguments include something that changes per attempt."""

    code = grpc.StatusCode.FAILED_PRECONDITION
    reason = reason_name(pb.ERROR_REASON_KEY_REUSED)


class LeaseLost(Error):
    """The lease was lost: another holder took the operation over (or it was settled with this
    lease's token), so this run's outcome was not recorded. ``token`` is the lost fencing token;
    ``operation_error`` the function's own exception, if it raised one."""

    code = grpc.StatusCode.FAILED_PRECONDITION

    def __init__(self, token: int | None, reason: str | None = None, operation_error: BaseException | None = None):
        super().__init__(f"the lease (token {token}) was lost before the outcome was recorded")
        self.token = token
        self.reason = reason or reason_name(pb.ERROR_REASON_LEASE_LOST)
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


class SagaError(Error):
    """Base class of the errors a saga raises about itself (``Client.saga``): ``key`` is the saga's
    key, ``step`` the step concerned (None when none)."""

    def __init__(self, message: str, key: OperationKey | None = None, step: str | None = None):
        super().__init__(message)
        self.key = key
        self.step = step


class SagaRolledBack(SagaError):
    """The saga failed for good and was rolled back: ``step`` failed (None when the saga's own code
    raised outside a step), the compensations of the steps completed before it ran, in reverse
    order, and the saga is recorded as FAILED (code 409, ``rolled back: step STEP failed: CAUSE``),
    which every later run with its key replays. ``cause`` is the failure's text; in the run that
    failed, the exception itself is ``__cause__``. ``error`` is the saga's stored error."""

    def __init__(
        self,
        message: str,
        key: OperationKey | None,
        step: str | None,
        cause: str,
        error: StoredError,
        record: Record | None = None,
    ):
        super().__init__(message, key, step)
        self.cause = cause
        self.error = error
        self.record = record


class SagaNeedsReconciliation(SagaError, NeedsReconciliation):
    """The saga cannot go on by itself: the compensation of ``step`` failed for good
    (``compensation`` True), or an at-most-once step or compensation's outcome is unknown. The
    saga is left to lapse into UNKNOWN, listed for operators (the console's Needs attention).
    Running the saga again with its key resumes it (completed steps and compensations replay); it
    raises this again until the cause is settled. ``cause`` is the failure's text."""

    def __init__(
        self,
        message: str,
        key: OperationKey | None,
        step: str | None,
        cause: str,
        compensation: bool,
        record: Record | None = None,
    ):
        SagaError.__init__(self, message, key, step)
        self.cause = cause
        self.compensation = compensation
        self.record = record


class NotAwaitingApproval(RpcError):
    """An Approve or Reject of an operation that does not await approval: it never did, was decided
    otherwise, or has moved on since (FAILED_PRECONDITION ``NOT_AWAITING_APPROVAL``)."""


class UnsettledAtMostOnce(RpcError):
    """A Purge of an unsettled at-most-once operation without ``force=True`` (FAILED_PRECONDITION
    ``UNSETTLED_AT_MOST_ONCE``): purging it would let its effect run again."""


class BudgetExhausted(RpcError):
    """A Claim of a new child operation beyond its parent's run budget (FAILED_PRECONDITION
    ``BUDGET_EXHAUSTED``; docs/api.md, "Run budgets"): nothing ran and nothing was written for the
    child; the same run fails again while the parent's record lives. Never retried. The fields are
    the server's ErrorInfo metadata: ``parent_namespace`` and ``parent_key`` name the parent whose
    budget is spent, ``limit`` the cap that was hit (``"max_children"``, or the child namespace whose
    ``max_per_namespace`` cap it was), ``spent`` how many children that cap had counted, ``max``
    the cap."""

    MAX_CHILDREN = "max_children"
    """``limit`` when the total cap (``RunBudget.max_children``) was hit."""

    def __init__(
        self,
        code: grpc.StatusCode = grpc.StatusCode.FAILED_PRECONDITION,
        message: str = "",
        reason: str | None = None,
        field: str | None = None,
        *,
        parent_namespace: str = "",
        parent_key: str = "",
        limit: str = "",
        spent: int = 0,
        max: int = 0,
    ):
        super().__init__(code, message, reason or reason_name(pb.ERROR_REASON_BUDGET_EXHAUSTED), field)
        self.parent_namespace = parent_namespace
        self.parent_key = parent_key
        self.limit = limit
        self.spent = spent
        self.max = max

    @property
    def parent(self) -> OperationKey | None:
        """The parent operation whose budget is spent (None when the server did not say)."""
        if not self.parent_namespace or not self.parent_key:
            return None
        return OperationKey(self.parent_namespace, self.parent_key)

    @classmethod
    def from_metadata(cls, code: grpc.StatusCode, message: str, reason: str | None, metadata: Mapping[str, str]) -> BudgetExhausted:
        """The error of a ``BUDGET_EXHAUSTED`` answer, from its ErrorInfo metadata (a count that
        does not parse reads as 0)."""

        def count(name: str) -> int:
            try:
                return max(int(metadata.get(name, "")), 0)
            except ValueError:
                return 0

        return cls(
            code, message, reason,
            parent_namespace=metadata.get("parent_namespace", ""), parent_key=metadata.get("parent_key", ""),
            limit=metadata.get("limit", ""), spent=count("spent"), max=count("max"),
        )  # fmt: skip


class UnreadableRecord(RpcError):
    """The record's sealed fields cannot be opened (DATA_LOSS ``UNREADABLE_RECORD``; docs/api.md,
    "Encryption at rest"): the key they were sealed with is not in the server's key ring, or the
    ciphertext was altered or moved. ``key_id`` names that key and ``cause`` says why
    (``"missing_key"`` or ``"tampered"``), from the server's ErrorInfo metadata. Never retried: the
    same read fails the same way until the key ring changes."""

    def __init__(
        self,
        code: grpc.StatusCode = grpc.StatusCode.DATA_LOSS,
        message: str = "",
        reason: str | None = None,
        field: str | None = None,
        *,
        key_id: str = "",
        cause: str = "",
    ):
        super().__init__(code, message, reason or reason_name(pb.ERROR_REASON_UNREADABLE_RECORD), field)
        self.key_id = key_id
        self.cause = cause


class DuplicateIntent(Error):
    """The intent guard refused the operation (outcome ``DUPLICATE_INTENT``; docs/api.md, "Intent
    guard"): the same arguments were claimed under the keys in ``matches`` (``IntentMatch``: key,
    status, claimed_at, refused; most recent first) within the namespace's window — a made-up key?
    Nothing ran and nothing was written for ``namespace``/``key``. Use the other key (its outcome
    is that intent's), or run again with ``repeat_intent=True`` if the repeat is deliberate."""

    def __init__(self, namespace: str, key: str, matches: Sequence[IntentMatch]) -> None:
        self.namespace = namespace
        self.key = key
        self.matches: tuple[IntentMatch, ...] = tuple(matches)
        where = f"{namespace}/{key}: " if namespace else ""
        others = ", ".join(f"{m.key} ({'refused' if m.refused else m.status.value})" for m in self.matches) or "another key"
        super().__init__(
            f"{where}the same arguments were claimed under {others} within the intent window "
            "(DUPLICATE_INTENT): use that key, or run again with repeat_intent=True if the repeat is deliberate"
        )

    @property
    def keys(self) -> tuple[str, ...]:
        """The other keys, most recent first."""
        return tuple(m.key for m in self.matches)


class MissingScope(PermissionDenied):
    """The token lacks the scope the call needs (PERMISSION_DENIED ``MISSING_SCOPE``): ``approve``
    for Approve and Reject, ``admin`` for Purge, ``ledger`` for the rest; the message names it."""


REASON_ERRORS: dict[int, type[Error]] = {
    pb.ERROR_REASON_INVALID_FIELD: InvalidArgument,
    pb.ERROR_REASON_TOO_LARGE: InvalidArgument,
    pb.ERROR_REASON_KEY_REUSED: KeyReused,
    pb.ERROR_REASON_LEASE_LOST: LeaseLost,
    pb.ERROR_REASON_ALREADY_SETTLED: LeaseLost,
    pb.ERROR_REASON_NOT_FOUND: NotFound,
    pb.ERROR_REASON_UNAUTHENTICATED: Unauthenticated,
    pb.ERROR_REASON_PERMISSION_DENIED: PermissionDenied,
    pb.ERROR_REASON_STORE_UNAVAILABLE: Unavailable,
    pb.ERROR_REASON_RATE_LIMITED: RateLimited,
    # Only ever on a KeepAlive stream, which the lease handles (it stops renewing, the lease is
    # not lost); never raised to the caller.
    pb.ERROR_REASON_KEEPALIVE_REPLACED: RpcError,
    pb.ERROR_REASON_NOT_AWAITING_APPROVAL: NotAwaitingApproval,
    pb.ERROR_REASON_UNSETTLED_AT_MOST_ONCE: UnsettledAtMostOnce,
    pb.ERROR_REASON_MISSING_SCOPE: MissingScope,
    # The server could not read a stored record: a bug or damaged data, reported as it is.
    pb.ERROR_REASON_INTERNAL: RpcError,
    pb.ERROR_REASON_BUDGET_EXHAUSTED: BudgetExhausted,
    pb.ERROR_REASON_UNREADABLE_RECORD: UnreadableRecord,
}
"""The exception class of each ErrorInfo reason, by the proto's ``ErrorReason`` (the one list of
reasons, docs/api.md "Errors"); every reason but ``ERROR_REASON_UNSPECIFIED`` is here."""


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
    """The typed exception for a gRPC error the client gives up on: by its ErrorInfo reason
    (``REASON_ERRORS``), else by its code (transient codes: ``Unavailable``; others: ``RpcError``)."""
    code = _code(error) or grpc.StatusCode.UNKNOWN
    message = _message(error)
    why = reason(error)
    kind = REASON_ERRORS.get(reason_value(why) or pb.ERROR_REASON_UNSPECIFIED)
    if kind is KeyReused:
        return KeyReused(message)
    if kind is LeaseLost:
        return LeaseLost(None, why)
    if kind is RateLimited:
        return RateLimited(f"{code.name} {why}: {message}", code, why)
    if kind is BudgetExhausted:  # never retried, whatever its code (oncekey.retry.NEVER_RETRIED)
        info = error_info(error)
        return BudgetExhausted.from_metadata(code, message, why, dict(info.metadata) if info is not None else {})
    if kind is UnreadableRecord:  # DATA_LOSS: never retried
        info = error_info(error)
        metadata = dict(info.metadata) if info is not None else {}
        return UnreadableRecord(code, message, why, key_id=metadata.get("key_id", ""), cause=metadata.get("cause", ""))
    if (kind is not None and issubclass(kind, Unavailable)) or code in TRANSIENT_CODES:
        return Unavailable(f"{code.name}: {message}", code, why)
    bad = _detail(error, error_details_pb2.BadRequest)
    field = bad.field_violations[0].field if bad is not None and bad.field_violations else None
    rpc_kind = kind if kind is not None and issubclass(kind, RpcError) else RpcError
    return rpc_kind(code, message, why, field)


def _code(error: BaseException) -> grpc.StatusCode | None:
    try:
        code: grpc.StatusCode = error.code()  # type: ignore[attr-defined]
        return code
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
