"""Plain Python types for the ledger's messages (records, stored results and errors, leases,
Claim answers) and their conversions from and to the generated ``oncekey.v1`` messages.

Plain data only: no I/O here. User code never needs the generated protobuf classes.
"""

from __future__ import annotations

import datetime as dt
import enum
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Union, cast

from google.protobuf import duration_pb2

from oncekey.key import OperationKey
from oncekey.v1 import ledger_pb2 as pb


class Semantics(str, enum.Enum):
    """What a lost lease means for an operation; fixed by its first Claim."""

    AT_LEAST_ONCE = "at_least_once"
    """Another caller may take over once the lease runs out (the effect may run again)."""
    AT_MOST_ONCE = "at_most_once"
    """Never run twice: a lease that ran out makes the outcome unknown until reconciled."""

    def wire(self) -> pb.Semantics:
        return pb.SEMANTICS_AT_MOST_ONCE if self is Semantics.AT_MOST_ONCE else pb.SEMANTICS_AT_LEAST_ONCE


class Disposition(str, enum.Enum):
    """How a failed attempt settles the operation."""

    RETRYABLE = "retryable"
    """Released: the next Claim acquires it again (the error is kept but not replayed)."""
    FINAL = "final"
    """Failed for good: the error is replayed to later Claims."""
    ABANDON = "abandon"
    """Forgotten: nothing happened outside; the key may be claimed again, even with other arguments."""

    def wire(self) -> pb.Disposition:
        return {
            Disposition.RETRYABLE: pb.DISPOSITION_RETRYABLE,
            Disposition.FINAL: pb.DISPOSITION_FINAL,
            Disposition.ABANDON: pb.DISPOSITION_ABANDON,
        }[self]


class RecordStatus(str, enum.Enum):
    """Where an operation stands."""

    UNSPECIFIED = "UNSPECIFIED"
    PROCESSING = "PROCESSING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    RETRY = "RETRY"
    UNKNOWN = "UNKNOWN"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    APPROVED = "APPROVED"

    @classmethod
    def from_wire(cls, value: int) -> RecordStatus:
        name = pb.RecordStatus.Name(value).removeprefix("RECORD_STATUS_") if value in pb.RecordStatus.values() else ""
        return cls.__members__.get(name, cls.UNSPECIFIED)

    def wire(self) -> pb.RecordStatus:
        return cast(pb.RecordStatus, pb.RecordStatus.Value(f"RECORD_STATUS_{self.value}"))


class Outcome(str, enum.Enum):
    """The answer to a Claim."""

    UNSPECIFIED = "UNSPECIFIED"
    ACQUIRED = "ACQUIRED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    IN_PROGRESS = "IN_PROGRESS"
    NEEDS_RECONCILIATION = "NEEDS_RECONCILIATION"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    DUPLICATE_INTENT = "DUPLICATE_INTENT"

    @classmethod
    def from_wire(cls, value: int) -> Outcome:
        name = pb.ClaimOutcome.Name(value).removeprefix("CLAIM_OUTCOME_") if value in pb.ClaimOutcome.values() else "UNSPECIFIED"
        return cls.__members__.get(name, cls.UNSPECIFIED)


class IntentGuard(str, enum.Enum):
    """What the intent guard (docs/api.md, "Intent guard") does with a Claim of a new key whose
    arguments another live key of the namespace was claimed with within the intent window. A
    Claim's mode can make the namespace's setting (the server's ``--intent-guard``, the tenant's
    limits line) stricter, never looser; pass it as the member or its value (``"refuse"``)."""

    OFF = "off"
    """No check."""
    WARN = "warn"
    """The run goes on as usual; ``Claimed.intent_matches`` / ``Done.intent_matches`` name the
    other keys."""
    REFUSE = "refuse"
    """Outcome ``DUPLICATE_INTENT`` (a run raises ``DuplicateIntent``): nothing runs and nothing is
    written for the key, unless the Claim says ``repeat_intent``."""

    def wire(self) -> pb.IntentGuard:
        return cast(pb.IntentGuard, pb.IntentGuard.Value(f"INTENT_GUARD_{self.name}"))


IntentGuardMode = Union[IntentGuard, Literal["off", "warn", "refuse"]]
"""An intent guard mode: an ``IntentGuard`` or its value."""

MIN_INTENT_WINDOW = 1.0
"""The shortest intent window a Claim may ask for, in seconds."""
MAX_INTENT_WINDOW = 86400.0
"""The longest intent window a Claim may ask for, in seconds (24 h)."""


def check_intent_guard(value: IntentGuardMode | None) -> IntentGuard | None:
    """An intent guard mode as an ``IntentGuard`` (None: the namespace's setting)."""
    if value is None or isinstance(value, IntentGuard):
        return value
    if isinstance(value, str):
        try:
            return IntentGuard(value)
        except ValueError:
            pass
    raise ValueError(f'intent_guard must be "off", "warn" or "refuse" (or None: the namespace\'s setting), not {value!r}')


def check_intent_window(value: float | None) -> float | None:
    """An intent window in seconds, checked as the server checks it: 1 ..= 86400 (None: the
    namespace's window)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"intent_window must be a number of seconds, not {type(value).__name__}")
    if not MIN_INTENT_WINDOW <= value <= MAX_INTENT_WINDOW:
        raise ValueError(
            f"intent_window must be between {MIN_INTENT_WINDOW:g} and {MAX_INTENT_WINDOW:g} seconds "
            f"(None: the namespace's window), not {value}"
        )
    return float(value)


@dataclass(frozen=True)
class IntentMatch:
    """Another key claimed with the same arguments in the same namespace within the intent window."""

    key: str
    """The other key (in the same namespace)."""
    status: RecordStatus
    """Its record's status now (``PROCESSING`` while its first Claim is under way)."""
    claimed_at: dt.datetime | None
    """When it was claimed with these arguments."""
    refused: bool = False
    """The guard refused that Claim (``DUPLICATE_INTENT``), so it has no record."""

    @classmethod
    def from_wire(cls, m: pb.IntentMatch) -> IntentMatch:
        return cls(key=m.key, status=RecordStatus.from_wire(m.status), claimed_at=_time(m, "claimed_at"), refused=m.refused)


_UINT32_MAX = 2**32 - 1
_BUDGET_FIELDS = frozenset({"max_children", "max_per_namespace"})


def _count(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value <= _UINT32_MAX:
        raise ValueError(f"{what} must be between 0 and {_UINT32_MAX}, not {value}")
    return value


@dataclass(frozen=True)
class RunBudget:
    """At most how many child operations a parent operation (an agent run, a saga) may create
    (docs/api.md, "Run budgets"): set by the parent's first Claim, it counts the children whose
    first Claim names it as parent (``key.child(...)``), never retries or replays of a child. A
    run of a new child beyond it raises ``BudgetExhausted``. The server also checks each cap
    (at most 1000; each ``max_per_namespace`` entry at least 1, at most 64 of them)."""

    max_children: int = 0
    """The most children in all (0: no total cap)."""
    max_per_namespace: Mapping[str, int] = field(default_factory=dict)
    """The most children per child namespace, e.g. ``{"email.send": 3}``."""

    def __post_init__(self) -> None:
        _count("budget: max_children", self.max_children)
        if not isinstance(self.max_per_namespace, Mapping):
            raise TypeError("budget: max_per_namespace must be a mapping of namespace to cap")
        caps: dict[str, int] = {}
        for namespace, cap in self.max_per_namespace.items():
            if not isinstance(namespace, str):
                raise TypeError(f"budget: max_per_namespace keys must be namespaces (str), not {type(namespace).__name__}")
            caps[namespace] = _count(f"budget: max_per_namespace[{namespace!r}]", cap)
        object.__setattr__(self, "max_per_namespace", caps)  # a copy: the caller's mapping may change

    @classmethod
    def of(cls, budget: RunBudget | Mapping[str, Any]) -> RunBudget:
        """A ``RunBudget``, or a mapping with ``max_children`` and/or ``max_per_namespace``."""
        if isinstance(budget, RunBudget):
            return budget
        if not isinstance(budget, Mapping):
            raise TypeError(f"budget must be a RunBudget or a mapping (max_children, max_per_namespace), not {type(budget).__name__}")
        unknown = set(budget) - _BUDGET_FIELDS
        if unknown:
            raise ValueError(f"budget: unknown field(s) {sorted(unknown)}; expected max_children, max_per_namespace")
        return cls(max_children=budget.get("max_children") or 0, max_per_namespace=budget.get("max_per_namespace") or {})

    def to_wire(self) -> pb.RunBudget:
        return pb.RunBudget(max_children=self.max_children, max_per_namespace=dict(self.max_per_namespace))

    @classmethod
    def from_wire(cls, b: pb.RunBudget) -> RunBudget:
        return cls(max_children=b.max_children, max_per_namespace=dict(b.max_per_namespace))


@dataclass(frozen=True)
class BudgetUsage:
    """A parent operation's run budget and what its children used of it (``Record.budget``)."""

    budget: RunBudget
    """The budget the parent's first Claim set."""
    children: int = 0
    """How many child operations were created under it."""
    children_per_namespace: dict[str, int] = field(default_factory=dict)
    """Of those, how many per child namespace."""
    refused: int = 0
    """How many Claims of new children it refused (``BudgetExhausted``)."""

    @classmethod
    def from_wire(cls, u: pb.BudgetUsage) -> BudgetUsage:
        return cls(
            budget=RunBudget.from_wire(u.budget),
            children=u.children,
            children_per_namespace=dict(u.children_per_namespace),
            refused=u.refused,
        )


JSON_CONTENT_TYPE = "application/json"


@dataclass(frozen=True)
class StoredResult:
    """The successful outcome of an operation as stored by Complete and replayed byte for byte.

    Return one from a wrapped function to store exactly these bytes instead of JSON."""

    body: bytes = b""
    code: int = 0
    content_type: str = ""
    metadata: dict[str, str] = field(default_factory=dict)

    def to_wire(self) -> pb.OperationResult:
        return pb.OperationResult(code=self.code, body=self.body, content_type=self.content_type, metadata=self.metadata)

    @classmethod
    def from_wire(cls, r: pb.OperationResult) -> StoredResult:
        return cls(body=bytes(r.body), code=r.code, content_type=r.content_type, metadata=dict(r.metadata))


@dataclass(frozen=True)
class StoredError:
    """The error of a failed attempt, as stored in the ledger."""

    code: int = 0
    message: str = ""
    details: bytes = b""

    def to_wire(self) -> pb.OperationError:
        return pb.OperationError(code=self.code, message=self.message, details=self.details)

    @classmethod
    def from_wire(cls, e: pb.OperationError) -> StoredError:
        return cls(code=e.code, message=e.message, details=bytes(e.details))


@dataclass(frozen=True)
class LeaseGrant:
    """A lease on an acquired operation."""

    token: int
    """The fencing token: +1 on every acquisition; pass it to downstream systems that fence."""
    expires_at: dt.datetime | None
    attempt: int

    @classmethod
    def from_wire(cls, lease: pb.Lease) -> LeaseGrant:
        return cls(token=lease.token, expires_at=_time(lease, "expires_at"), attempt=lease.attempt)


class Decision(str, enum.Enum):
    """What an approver decided."""

    UNSPECIFIED = "UNSPECIFIED"
    APPROVED = "APPROVED"
    """The operation may be acquired."""
    REJECTED = "REJECTED"
    """The operation failed for good (error code 403, message = the approver's note)."""

    @classmethod
    def from_wire(cls, value: int) -> Decision:
        name = pb.ApprovalDecision.Name(value).removeprefix("APPROVAL_DECISION_") if value in pb.ApprovalDecision.values() else ""
        return cls.__members__.get(name, cls.UNSPECIFIED)


@dataclass(frozen=True)
class Approval:
    """The decision on an operation that awaited approval."""

    decision: Decision
    decided_by: str
    """The approver's token label ("dev" on a dev-mode server)."""
    note: str
    decided_at: dt.datetime | None

    @classmethod
    def from_wire(cls, a: pb.Approval) -> Approval:
        return cls(Decision.from_wire(a.decision), a.decided_by, a.note, _time(a, "decided_at"))


@dataclass(frozen=True)
class Record:
    """One operation's entry in the ledger."""

    namespace: str
    key: str
    status: RecordStatus
    fingerprint: bytes
    semantics: Semantics
    fencing_token: int
    attempt: int
    dedup_hits: int
    lease_owner: str
    lease_expires_at: dt.datetime | None
    result: StoredResult | None
    error: StoredError | None
    parent: tuple[str, str] | None
    created_at: dt.datetime | None
    updated_at: dt.datetime | None
    expires_at: dt.datetime | None
    require_approval: bool = False
    """Whether the operation waits for an approval before anyone acquires it."""
    max_attempts: int = 0
    """The most acquisitions allowed, reconciliations not counted (0: no cap)."""
    approval: Approval | None = None
    """The approval decision, once made."""
    budget: BudgetUsage | None = None
    """The run budget its first Claim set and what its children used of it (None: no budget)."""

    @property
    def operation_key(self) -> OperationKey:
        """The record's operation (namespace, key and parent), e.g. to reconcile, approve or purge
        a listed record."""
        parent = OperationKey(*self.parent) if self.parent is not None else None
        return OperationKey(self.namespace, self.key, parent)

    @classmethod
    def from_wire(cls, r: pb.Record) -> Record:
        return cls(
            namespace=r.namespace,
            key=r.key,
            status=RecordStatus.from_wire(r.status),
            fingerprint=bytes(r.fingerprint),
            semantics=Semantics.AT_MOST_ONCE if r.semantics == pb.SEMANTICS_AT_MOST_ONCE else Semantics.AT_LEAST_ONCE,
            fencing_token=r.fencing_token,
            attempt=r.attempt,
            dedup_hits=r.dedup_hits,
            lease_owner=r.lease_owner,
            lease_expires_at=_time(r, "lease_expires_at"),
            result=StoredResult.from_wire(r.result) if r.HasField("result") else None,
            error=StoredError.from_wire(r.error) if r.HasField("error") else None,
            parent=(r.parent.namespace, r.parent.key) if r.HasField("parent") else None,
            created_at=_time(r, "created_at"),
            updated_at=_time(r, "updated_at"),
            expires_at=_time(r, "expires_at"),
            require_approval=r.require_approval,
            max_attempts=r.max_attempts,
            approval=Approval.from_wire(r.approval) if r.HasField("approval") else None,
            budget=BudgetUsage.from_wire(r.budget) if r.HasField("budget") else None,
        )


@dataclass(frozen=True)
class Claimed:
    """The answer to a Claim: ``outcome`` says which of the other fields are set."""

    outcome: Outcome
    record: Record | None
    lease: LeaseGrant | None
    retry_after: float
    """Seconds to wait before claiming again (IN_PROGRESS)."""
    intent_matches: tuple[IntentMatch, ...] = ()
    """Other live keys of the namespace claimed with the same arguments within the intent window,
    most recent first (at most 8): set when the intent guard warned, refused (``DUPLICATE_INTENT``)
    or let a deliberate repeat through (docs/api.md, "Intent guard")."""
    dry_run: bool = False
    """True for the answer to a dry run: ``outcome`` is what a Claim would get now, ``record`` the
    record as stored (None when the key has none); nothing was written and ``lease`` is None."""

    @classmethod
    def from_wire(cls, r: pb.ClaimResponse, dry_run: bool = False) -> Claimed:
        return cls(
            dry_run=dry_run,
            outcome=Outcome.from_wire(r.outcome),
            record=Record.from_wire(r.record) if r.HasField("record") else None,
            lease=LeaseGrant.from_wire(r.lease) if r.HasField("lease") else None,
            retry_after=r.retry_after.ToTimedelta().total_seconds() if r.HasField("retry_after") else 0.0,
            intent_matches=tuple(IntentMatch.from_wire(m) for m in r.intent_matches),
        )


def duration(seconds: float | None) -> duration_pb2.Duration | None:
    """A protobuf Duration of ``seconds`` (None stays None: the server's default)."""
    if seconds is None:
        return None
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative: {seconds}")
    d = duration_pb2.Duration()
    d.FromNanoseconds(round(seconds * 1e9))
    return d


def _time(message: object, name: str) -> dt.datetime | None:
    if not message.HasField(name):  # type: ignore[attr-defined]
        return None
    value: dt.datetime = getattr(message, name).ToDatetime(tzinfo=dt.timezone.utc)
    return value
