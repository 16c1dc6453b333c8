"""What the sync and async clients share: the options of one operation, the requests they send,
how a Claim's answer decides what happens next, and how an exception settles the operation.

Plain decisions only: no I/O here.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from dataclasses import dataclass, replace
from typing import Any, Generic, Mapping, Sequence, TypeVar

from oncekey.codec import decode_result
from oncekey.errors import Abandon, AwaitingApproval, DuplicateIntent, FinalError, InProgress, NeedsReconciliation, OperationFailed
from oncekey.key import OperationKey
from oncekey.types import (
    Claimed,
    Disposition,
    IntentGuard,
    IntentGuardMode,
    IntentMatch,
    LeaseGrant,
    Outcome,
    Record,
    RecordStatus,
    RunBudget,
    Semantics,
    StoredError,
    StoredResult,
    check_intent_guard,
    check_intent_window,
    duration,
)
from oncekey.v1 import ledger_pb2 as pb

T = TypeVar("T")

MAX_WAIT = 60.0
"""The longest ``wait`` the server honours per Claim, in seconds."""
DEFAULT_LEASE_TTL = 30.0
"""The server's default lease length, in seconds (a ``lease_ttl`` of None asks for it)."""
DEFAULT_WAIT = 60.0
"""How long a run waits, by default, for an operation another holder is performing."""
MAX_MESSAGE_BYTES = 16 * 1024
MAX_ATTEMPTS_LIMIT = 2**32 - 1
"""The largest attempt cap the wire carries (a uint32)."""
MAX_NOTE_BYTES = 1024
"""The longest note of an Approve or Reject the server accepts, in UTF-8 bytes."""
APPROVAL_POLL = 0.1
"""Seconds between Claims while an approval is awaited and the server's hold ran out early."""
LAPSED_PAUSE = 0.1
"""Longest pause, in seconds, before claiming again after releasing a lease that had run out
before its Claim's answer arrived (whatever made the answer late may still be going on)."""
LAPSED_MESSAGE = "the lease ran out before the Claim's answer arrived: the operation did not run"
"""The error a lease that had run out before its Claim's answer arrived is released with."""


def check_max_attempts(value: int | None) -> int:
    """The wire value of an attempt cap: None or 0 is no cap, else 1 ..= 2**32 - 1 acquisitions."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_attempts must be an int, not {type(value).__name__}")
    if not 0 <= value <= MAX_ATTEMPTS_LIMIT:
        raise ValueError(f"max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT} (0 or None: no cap), not {value}")
    return value


def check_note(note: str) -> str:
    """A note of an Approve or Reject, checked as the server checks it."""
    if not isinstance(note, str):
        raise TypeError(f"note must be a str, not {type(note).__name__}")
    if len(note.encode("utf-8", "surrogatepass")) > MAX_NOTE_BYTES:
        raise ValueError(f"note: at most {MAX_NOTE_BYTES} bytes")
    if any((ord(c) < 0x20 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F for c in note):
        raise ValueError("note: must not contain control characters other than newline and tab")
    return note


def default_owner() -> str:
    return f"python-client/{os.getpid()}"


@dataclass(frozen=True)
class Options:
    """How one operation is claimed and settled."""

    lease_ttl: float | None = None
    """Lease length in seconds (server default 30); the server renews it every third of that."""
    retention: float | None = None
    """Seconds the outcome is kept after it settles (server default 24 h): outlast every retry."""
    semantics: Semantics = Semantics.AT_LEAST_ONCE
    wait: float = DEFAULT_WAIT
    """Seconds to wait for an operation another holder is performing before ``InProgress`` (or,
    with ``require_approval``, for the decision before ``AwaitingApproval``)."""
    owner: str | None = None
    final: tuple[type[BaseException], ...] = ()
    """Exception classes that fail the operation for good (besides ``FinalError``)."""
    abandon: tuple[type[BaseException], ...] = ()
    """Exception classes meaning nothing happened outside (besides ``Abandon``): forget the key."""
    require_approval: bool = False
    """Nobody runs the operation before someone approves it (``Client.approve``): a run waits for
    the decision up to ``wait`` seconds, then raises ``AwaitingApproval``. The first Claim of a key
    fixes this."""
    max_attempts: int | None = None
    """Caps the runs of the operation (reconciliations not counted; None or 0: no cap): past it, a
    retryable failure fails for good with code 429 ("attempts exhausted"). The first Claim of a key
    fixes this."""
    intent_guard: IntentGuardMode | None = None
    """The intent guard of the Claim (None: the namespace's setting; docs/api.md "Intent guard"):
    ``"refuse"`` raises ``DuplicateIntent`` without running when the same arguments were claimed
    under another key of the namespace within the intent window; ``"warn"`` runs and names the other
    keys in ``Done.intent_matches``. Stricter than the namespace's setting, never looser. Only the
    Claim of a new key is checked (retries and replays never are)."""
    intent_window: float | None = None
    """The intent window to ask for, in seconds (1 ..= 86400; None: the namespace's, default 10
    min): the guard looks back the longer of it and the namespace's."""
    repeat_intent: bool = False
    """The repeat is deliberate: ``"refuse"`` acts as ``"warn"`` for this run (it runs, and
    ``Done.intent_matches`` still names the other keys)."""
    budget: RunBudget | Mapping[str, Any] | None = None
    """The run budget of the operation's children (keys made with ``key.child(...)``): a
    ``RunBudget`` or a mapping (``max_children``, ``max_per_namespace``). A run of a new child
    beyond it raises ``BudgetExhausted``. The first Claim of a key fixes this."""

    def __post_init__(self) -> None:
        check_max_attempts(self.max_attempts)
        if not isinstance(self.require_approval, bool):
            raise TypeError(f"require_approval must be a bool, not {type(self.require_approval).__name__}")
        if not isinstance(self.repeat_intent, bool):
            raise TypeError(f"repeat_intent must be a bool, not {type(self.repeat_intent).__name__}")
        # Normalized here, so that a bad value is refused before anything is sent.
        object.__setattr__(self, "intent_guard", check_intent_guard(self.intent_guard))
        object.__setattr__(self, "intent_window", check_intent_window(self.intent_window))
        if self.budget is not None:
            object.__setattr__(self, "budget", RunBudget.of(self.budget))


@dataclass(frozen=True)
class Done(Generic[T]):
    """The output of an operation and where it came from."""

    value: T
    """The function's return value, or the stored one decoded (the function did not run)."""
    replayed: bool
    """True when the value is a stored result replayed from an earlier run."""
    result: StoredResult
    """The result as stored."""
    record: Record | None
    """The SUCCEEDED record."""
    intent_matches: tuple[IntentMatch, ...] = ()
    """The other keys of the namespace claimed with the same arguments within the intent window,
    when the intent guard let this new key through anyway (``"warn"``, or ``repeat_intent``): a
    hint that the key was made up for a retry. Empty otherwise (always for a replay of a key that
    existed)."""


def with_matches(done: Done[T], matches: Sequence[IntentMatch]) -> Done[T]:
    """``done`` with the intent guard's matches of its run, when there are any."""
    return replace(done, intent_matches=tuple(matches)) if matches else done


def run_owner(options: Options, client_owner: str) -> str:
    """The owner of one run: a random suffix lets a retried Claim recognize its own lease."""
    return f"{options.owner or client_owner}#{secrets.token_hex(8)}"


def claim_request(
    key: OperationKey,
    fingerprint: bytes,
    options: Options,
    owner: str,
    *,
    reconcile: bool = False,
    wait: float = 0.0,
    dry_run: bool = False,
) -> pb.ClaimRequest:
    request = pb.ClaimRequest(
        namespace=key.namespace,
        key=key.key,
        fingerprint=fingerprint,
        lease_ttl=duration(options.lease_ttl),
        retention=duration(options.retention),
        semantics=options.semantics.wire(),
        owner=owner,
        reconcile=reconcile,
        wait=duration(min(wait, MAX_WAIT)) if wait > 0 else None,
        require_approval=options.require_approval,
        max_attempts=check_max_attempts(options.max_attempts),
        dry_run=dry_run,
        repeat_intent=options.repeat_intent,
    )
    if key.parent is not None:
        request.parent.namespace = key.parent.namespace
        request.parent.key = key.parent.key
    guard = check_intent_guard(options.intent_guard)
    if guard is not None:
        request.intent_guard = guard.wire()
    window = duration(check_intent_window(options.intent_window))
    if window is not None:
        request.intent_window.CopyFrom(window)
    if options.budget is not None:
        request.budget.CopyFrom(RunBudget.of(options.budget).to_wire())
    return request


def complete_request(key: OperationKey, token: int, result: StoredResult) -> pb.CompleteRequest:
    return pb.CompleteRequest(namespace=key.namespace, key=key.key, lease_token=token, result=result.to_wire())


def fail_request(
    key: OperationKey, token: int, error: StoredError, disposition: Disposition, *, nothing_ran: bool = False
) -> pb.FailRequest:
    return pb.FailRequest(
        namespace=key.namespace,
        key=key.key,
        lease_token=token,
        error=error.to_wire(),
        disposition=disposition.wire(),
        nothing_ran=bool(nothing_ran),
    )


def lookup_request(key: OperationKey) -> pb.LookupRequest:
    return pb.LookupRequest(namespace=key.namespace, key=key.key)


def decision_target(namespace: str | OperationKey, key: str | None, note: str) -> tuple[OperationKey, str]:
    """The operation and note of an Approve or Reject: ``(namespace, key, note)``, or
    ``(operation_key, note)`` where the second argument is then the note."""
    if isinstance(namespace, OperationKey) and key is not None:
        if note:
            raise TypeError("pass an OperationKey and a note, or a namespace, a key and a note")
        return namespace, key
    return operation_key(namespace, key), note


def approve_request(key: OperationKey, note: str, fingerprint: bytes | None) -> pb.ApproveRequest:
    return pb.ApproveRequest(namespace=key.namespace, key=key.key, note=check_note(note), fingerprint=_pin(fingerprint))


def reject_request(key: OperationKey, note: str, fingerprint: bytes | None) -> pb.RejectRequest:
    return pb.RejectRequest(namespace=key.namespace, key=key.key, note=check_note(note), fingerprint=_pin(fingerprint))


def purge_request(key: OperationKey, force: bool) -> pb.PurgeRequest:
    return pb.PurgeRequest(namespace=key.namespace, key=key.key, force=bool(force))


def _pin(fingerprint: bytes | None) -> bytes:
    if fingerprint is None:
        return b""
    if not isinstance(fingerprint, (bytes, bytearray)) or len(fingerprint) != 32:
        raise ValueError("fingerprint: must be 32 bytes (the SHA-256 the approver saw), or None")
    return bytes(fingerprint)


def operation_key(namespace: str | OperationKey, key: str | None) -> OperationKey:
    """``(namespace, key)`` or an ``OperationKey`` as the operator methods accept them."""
    if isinstance(namespace, OperationKey):
        if key is not None:
            raise TypeError("pass an OperationKey alone, or a namespace and a key")
        return namespace
    if key is None:
        raise TypeError("a key is required with a namespace")
    return OperationKey(namespace, key)


def renew_request(key: OperationKey, token: int, lease_ttl: float | None) -> pb.RenewRequest:
    return pb.RenewRequest(namespace=key.namespace, key=key.key, lease_token=token, lease_ttl=duration(lease_ttl))


def lapsed_release_request(key: OperationKey, token: int) -> pb.FailRequest:
    """The Fail that releases a lease which had run out before its Claim's answer arrived: RETRYABLE
    with ``nothing_ran``, since nothing ran under it (so the release does not use up one of the
    operation's ``max_attempts``)."""
    return fail_request(key, token, StoredError(0, LAPSED_MESSAGE), Disposition.RETRYABLE, nothing_ran=True)


def lapsed(grant: LeaseGrant) -> bool:
    """True when ``grant``'s lease had already run out on this machine's clock when its Claim's
    answer arrived (an answer slower than the lease: an overloaded server, a store failing over).
    Another holder may be taking the operation over right now, so nothing may run under it: a
    holder stops acting when its lease ends on its own clock (docs/reliability.md, "Clocks"). A
    lease without an expiry counts as run out."""
    return grant.expires_at is None or grant.expires_at <= dt.datetime.now(dt.timezone.utc)


@dataclass(frozen=True)
class Next:
    """What to do after a Claim: run with ``grant``, return ``done``, release ``lapsed`` (a lease
    that had run out before the answer arrived: nothing may run under it) and claim again, or
    claim again after ``sleep``."""

    grant: LeaseGrant | None = None
    done: Done[Any] | None = None
    sleep: float | None = None
    lapsed: LeaseGrant | None = None


def _acquired(grant: LeaseGrant) -> Next:
    return Next(lapsed=grant) if lapsed(grant) else Next(grant=grant)


def after_claim(claimed: Claimed, owner: str, remaining: float, annotation: Any, key: OperationKey | None = None) -> Next:
    """Decides what a Claim's answer means for the run (of ``key``); raises the typed exception
    for the outcomes that end it without a result."""
    record = claimed.record
    if claimed.outcome is Outcome.ACQUIRED and claimed.lease is not None:
        return _acquired(claimed.lease)
    if claimed.outcome is Outcome.COMPLETED:
        result = record.result if record is not None and record.result is not None else StoredResult()
        return Next(done=Done(decode_result(result, annotation), True, result, record))
    if claimed.outcome is Outcome.FAILED:
        error = record.error if record is not None and record.error is not None else StoredError()
        raise OperationFailed(error, record)
    if claimed.outcome is Outcome.NEEDS_RECONCILIATION:
        where = f"{record.namespace}/{record.key}" if record else "the operation"
        raise NeedsReconciliation(f"{where}: outcome unknown; check the outside world, then reconcile", record)
    if claimed.outcome is Outcome.DUPLICATE_INTENT:
        # Refused by the intent guard: nothing was written for the key, and nothing runs.
        raise DuplicateIntent(key.namespace if key else "", key.key if key else "", claimed.intent_matches)
    if claimed.outcome is Outcome.AWAITING_APPROVAL:
        # The server held the Claim until the wait ran out (or it drained): nothing runs.
        if remaining <= 0:
            raise AwaitingApproval(record)
        return Next(sleep=min(APPROVAL_POLL, remaining))
    if claimed.outcome is Outcome.IN_PROGRESS:
        # Our own earlier Claim acquired it but its answer was lost, and a retry claimed again.
        if record is not None and record.lease_owner == owner and record.status is RecordStatus.PROCESSING:
            return _acquired(LeaseGrant(record.fencing_token, record.lease_expires_at, record.attempt))
        if remaining <= 0:
            raise InProgress(claimed.retry_after, record)
        return Next(sleep=min(max(claimed.retry_after, 0.05), remaining))
    raise RuntimeError(f"unexpected Claim outcome {claimed.outcome}")


def failure(exc: BaseException, options: Options) -> tuple[StoredError, Disposition]:
    """How an exception raised by the function settles the operation."""
    if isinstance(exc, Abandon) or (options.abandon and isinstance(exc, options.abandon)):
        disposition = Disposition.ABANDON
    elif isinstance(exc, FinalError) or (options.final and isinstance(exc, options.final)):
        disposition = Disposition.FINAL
    else:
        disposition = Disposition.RETRYABLE
    if isinstance(exc, FinalError):
        return StoredError(exc.code, _truncate(exc.message), exc.details), disposition
    return StoredError(0, _truncate(f"{type(exc).__name__}: {exc}")), disposition


def _truncate(text: str) -> str:
    data = text.encode("utf-8", "replace")
    if len(data) <= MAX_MESSAGE_BYTES:
        return text
    return data[:MAX_MESSAGE_BYTES].decode("utf-8", "ignore")


def note(exc: BaseException, text: str) -> None:
    """Adds ``text`` to the exception's traceback notes (Python 3.11+)."""
    add = getattr(exc, "add_note", None)
    if add is not None:
        add(text)
