import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RecordStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECORD_STATUS_UNSPECIFIED: _ClassVar[RecordStatus]
    RECORD_STATUS_PROCESSING: _ClassVar[RecordStatus]
    RECORD_STATUS_SUCCEEDED: _ClassVar[RecordStatus]
    RECORD_STATUS_FAILED: _ClassVar[RecordStatus]
    RECORD_STATUS_RETRY: _ClassVar[RecordStatus]
    RECORD_STATUS_UNKNOWN: _ClassVar[RecordStatus]
    RECORD_STATUS_AWAITING_APPROVAL: _ClassVar[RecordStatus]
    RECORD_STATUS_APPROVED: _ClassVar[RecordStatus]

class Semantics(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEMANTICS_UNSPECIFIED: _ClassVar[Semantics]
    SEMANTICS_AT_LEAST_ONCE: _ClassVar[Semantics]
    SEMANTICS_AT_MOST_ONCE: _ClassVar[Semantics]

class ClaimOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CLAIM_OUTCOME_UNSPECIFIED: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_ACQUIRED: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_COMPLETED: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_FAILED: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_IN_PROGRESS: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_NEEDS_RECONCILIATION: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_AWAITING_APPROVAL: _ClassVar[ClaimOutcome]
    CLAIM_OUTCOME_DUPLICATE_INTENT: _ClassVar[ClaimOutcome]

class IntentGuard(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INTENT_GUARD_UNSPECIFIED: _ClassVar[IntentGuard]
    INTENT_GUARD_OFF: _ClassVar[IntentGuard]
    INTENT_GUARD_WARN: _ClassVar[IntentGuard]
    INTENT_GUARD_REFUSE: _ClassVar[IntentGuard]

class Disposition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISPOSITION_UNSPECIFIED: _ClassVar[Disposition]
    DISPOSITION_RETRYABLE: _ClassVar[Disposition]
    DISPOSITION_FINAL: _ClassVar[Disposition]
    DISPOSITION_ABANDON: _ClassVar[Disposition]

class ApprovalDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    APPROVAL_DECISION_UNSPECIFIED: _ClassVar[ApprovalDecision]
    APPROVAL_DECISION_APPROVED: _ClassVar[ApprovalDecision]
    APPROVAL_DECISION_REJECTED: _ClassVar[ApprovalDecision]

class EventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVENT_KIND_UNSPECIFIED: _ClassVar[EventKind]
    EVENT_KIND_CLAIM: _ClassVar[EventKind]
    EVENT_KIND_TAKEOVER: _ClassVar[EventKind]
    EVENT_KIND_COMPLETE: _ClassVar[EventKind]
    EVENT_KIND_FAIL: _ClassVar[EventKind]
    EVENT_KIND_RENEW: _ClassVar[EventKind]
    EVENT_KIND_APPROVE: _ClassVar[EventKind]
    EVENT_KIND_REJECT: _ClassVar[EventKind]

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_FIELD: _ClassVar[ErrorReason]
    ERROR_REASON_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_KEY_REUSED: _ClassVar[ErrorReason]
    ERROR_REASON_LEASE_LOST: _ClassVar[ErrorReason]
    ERROR_REASON_ALREADY_SETTLED: _ClassVar[ErrorReason]
    ERROR_REASON_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_UNAUTHENTICATED: _ClassVar[ErrorReason]
    ERROR_REASON_PERMISSION_DENIED: _ClassVar[ErrorReason]
    ERROR_REASON_STORE_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_RATE_LIMITED: _ClassVar[ErrorReason]
    ERROR_REASON_KEEPALIVE_REPLACED: _ClassVar[ErrorReason]
    ERROR_REASON_NOT_AWAITING_APPROVAL: _ClassVar[ErrorReason]
    ERROR_REASON_UNSETTLED_AT_MOST_ONCE: _ClassVar[ErrorReason]
    ERROR_REASON_MISSING_SCOPE: _ClassVar[ErrorReason]
    ERROR_REASON_INTERNAL: _ClassVar[ErrorReason]
    ERROR_REASON_BUDGET_EXHAUSTED: _ClassVar[ErrorReason]
    ERROR_REASON_UNREADABLE_RECORD: _ClassVar[ErrorReason]
RECORD_STATUS_UNSPECIFIED: RecordStatus
RECORD_STATUS_PROCESSING: RecordStatus
RECORD_STATUS_SUCCEEDED: RecordStatus
RECORD_STATUS_FAILED: RecordStatus
RECORD_STATUS_RETRY: RecordStatus
RECORD_STATUS_UNKNOWN: RecordStatus
RECORD_STATUS_AWAITING_APPROVAL: RecordStatus
RECORD_STATUS_APPROVED: RecordStatus
SEMANTICS_UNSPECIFIED: Semantics
SEMANTICS_AT_LEAST_ONCE: Semantics
SEMANTICS_AT_MOST_ONCE: Semantics
CLAIM_OUTCOME_UNSPECIFIED: ClaimOutcome
CLAIM_OUTCOME_ACQUIRED: ClaimOutcome
CLAIM_OUTCOME_COMPLETED: ClaimOutcome
CLAIM_OUTCOME_FAILED: ClaimOutcome
CLAIM_OUTCOME_IN_PROGRESS: ClaimOutcome
CLAIM_OUTCOME_NEEDS_RECONCILIATION: ClaimOutcome
CLAIM_OUTCOME_AWAITING_APPROVAL: ClaimOutcome
CLAIM_OUTCOME_DUPLICATE_INTENT: ClaimOutcome
INTENT_GUARD_UNSPECIFIED: IntentGuard
INTENT_GUARD_OFF: IntentGuard
INTENT_GUARD_WARN: IntentGuard
INTENT_GUARD_REFUSE: IntentGuard
DISPOSITION_UNSPECIFIED: Disposition
DISPOSITION_RETRYABLE: Disposition
DISPOSITION_FINAL: Disposition
DISPOSITION_ABANDON: Disposition
APPROVAL_DECISION_UNSPECIFIED: ApprovalDecision
APPROVAL_DECISION_APPROVED: ApprovalDecision
APPROVAL_DECISION_REJECTED: ApprovalDecision
EVENT_KIND_UNSPECIFIED: EventKind
EVENT_KIND_CLAIM: EventKind
EVENT_KIND_TAKEOVER: EventKind
EVENT_KIND_COMPLETE: EventKind
EVENT_KIND_FAIL: EventKind
EVENT_KIND_RENEW: EventKind
EVENT_KIND_APPROVE: EventKind
EVENT_KIND_REJECT: EventKind
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_INVALID_FIELD: ErrorReason
ERROR_REASON_TOO_LARGE: ErrorReason
ERROR_REASON_KEY_REUSED: ErrorReason
ERROR_REASON_LEASE_LOST: ErrorReason
ERROR_REASON_ALREADY_SETTLED: ErrorReason
ERROR_REASON_NOT_FOUND: ErrorReason
ERROR_REASON_UNAUTHENTICATED: ErrorReason
ERROR_REASON_PERMISSION_DENIED: ErrorReason
ERROR_REASON_STORE_UNAVAILABLE: ErrorReason
ERROR_REASON_RATE_LIMITED: ErrorReason
ERROR_REASON_KEEPALIVE_REPLACED: ErrorReason
ERROR_REASON_NOT_AWAITING_APPROVAL: ErrorReason
ERROR_REASON_UNSETTLED_AT_MOST_ONCE: ErrorReason
ERROR_REASON_MISSING_SCOPE: ErrorReason
ERROR_REASON_INTERNAL: ErrorReason
ERROR_REASON_BUDGET_EXHAUSTED: ErrorReason
ERROR_REASON_UNREADABLE_RECORD: ErrorReason

class RunBudget(_message.Message):
    __slots__ = ("max_children", "max_per_namespace")
    class MaxPerNamespaceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MAX_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    MAX_PER_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    max_children: int
    max_per_namespace: _containers.ScalarMap[str, int]
    def __init__(self, max_children: _Optional[int] = ..., max_per_namespace: _Optional[_Mapping[str, int]] = ...) -> None: ...

class BudgetUsage(_message.Message):
    __slots__ = ("budget", "children", "children_per_namespace", "refused")
    class ChildrenPerNamespaceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_PER_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    budget: RunBudget
    children: int
    children_per_namespace: _containers.ScalarMap[str, int]
    refused: int
    def __init__(self, budget: _Optional[_Union[RunBudget, _Mapping]] = ..., children: _Optional[int] = ..., children_per_namespace: _Optional[_Mapping[str, int]] = ..., refused: _Optional[int] = ...) -> None: ...

class IntentMatch(_message.Message):
    __slots__ = ("key", "status", "claimed_at", "refused")
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_AT_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    key: str
    status: RecordStatus
    claimed_at: _timestamp_pb2.Timestamp
    refused: bool
    def __init__(self, key: _Optional[str] = ..., status: _Optional[_Union[RecordStatus, str]] = ..., claimed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., refused: _Optional[bool] = ...) -> None: ...

class OperationRef(_message.Message):
    __slots__ = ("namespace", "key")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ...) -> None: ...

class ClaimRequest(_message.Message):
    __slots__ = ("namespace", "key", "fingerprint", "payload_json", "lease_ttl", "retention", "semantics", "owner", "parent", "reconcile", "wait", "require_approval", "dry_run", "max_attempts", "intent_guard", "intent_window", "repeat_intent", "budget")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    SEMANTICS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    RECONCILE_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INTENT_GUARD_FIELD_NUMBER: _ClassVar[int]
    INTENT_WINDOW_FIELD_NUMBER: _ClassVar[int]
    REPEAT_INTENT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    fingerprint: bytes
    payload_json: str
    lease_ttl: _duration_pb2.Duration
    retention: _duration_pb2.Duration
    semantics: Semantics
    owner: str
    parent: OperationRef
    reconcile: bool
    wait: _duration_pb2.Duration
    require_approval: bool
    dry_run: bool
    max_attempts: int
    intent_guard: IntentGuard
    intent_window: _duration_pb2.Duration
    repeat_intent: bool
    budget: RunBudget
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., fingerprint: _Optional[bytes] = ..., payload_json: _Optional[str] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retention: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., semantics: _Optional[_Union[Semantics, str]] = ..., owner: _Optional[str] = ..., parent: _Optional[_Union[OperationRef, _Mapping]] = ..., reconcile: _Optional[bool] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., require_approval: _Optional[bool] = ..., dry_run: _Optional[bool] = ..., max_attempts: _Optional[int] = ..., intent_guard: _Optional[_Union[IntentGuard, str]] = ..., intent_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., repeat_intent: _Optional[bool] = ..., budget: _Optional[_Union[RunBudget, _Mapping]] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ("token", "expires_at", "attempt")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    token: int
    expires_at: _timestamp_pb2.Timestamp
    attempt: int
    def __init__(self, token: _Optional[int] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., attempt: _Optional[int] = ...) -> None: ...

class ClaimResponse(_message.Message):
    __slots__ = ("outcome", "record", "lease", "retry_after", "intent_matches")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RECORD_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    INTENT_MATCHES_FIELD_NUMBER: _ClassVar[int]
    outcome: ClaimOutcome
    record: Record
    lease: Lease
    retry_after: _duration_pb2.Duration
    intent_matches: _containers.RepeatedCompositeFieldContainer[IntentMatch]
    def __init__(self, outcome: _Optional[_Union[ClaimOutcome, str]] = ..., record: _Optional[_Union[Record, _Mapping]] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., intent_matches: _Optional[_Iterable[_Union[IntentMatch, _Mapping]]] = ...) -> None: ...

class OperationResult(_message.Message):
    __slots__ = ("code", "body", "content_type", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    code: int
    body: bytes
    content_type: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[int] = ..., body: _Optional[bytes] = ..., content_type: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class OperationError(_message.Message):
    __slots__ = ("code", "message", "details")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    details: bytes
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., details: _Optional[bytes] = ...) -> None: ...

class Record(_message.Message):
    __slots__ = ("namespace", "key", "status", "fingerprint", "semantics", "fencing_token", "attempt", "dedup_hits", "lease_owner", "lease_expires_at", "result", "error", "parent", "created_at", "updated_at", "expires_at", "require_approval", "max_attempts", "approval", "budget")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    SEMANTICS_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEDUP_HITS_FIELD_NUMBER: _ClassVar[int]
    LEASE_OWNER_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    status: RecordStatus
    fingerprint: bytes
    semantics: Semantics
    fencing_token: int
    attempt: int
    dedup_hits: int
    lease_owner: str
    lease_expires_at: _timestamp_pb2.Timestamp
    result: OperationResult
    error: OperationError
    parent: OperationRef
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    require_approval: bool
    max_attempts: int
    approval: Approval
    budget: BudgetUsage
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., status: _Optional[_Union[RecordStatus, str]] = ..., fingerprint: _Optional[bytes] = ..., semantics: _Optional[_Union[Semantics, str]] = ..., fencing_token: _Optional[int] = ..., attempt: _Optional[int] = ..., dedup_hits: _Optional[int] = ..., lease_owner: _Optional[str] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., result: _Optional[_Union[OperationResult, _Mapping]] = ..., error: _Optional[_Union[OperationError, _Mapping]] = ..., parent: _Optional[_Union[OperationRef, _Mapping]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., require_approval: _Optional[bool] = ..., max_attempts: _Optional[int] = ..., approval: _Optional[_Union[Approval, _Mapping]] = ..., budget: _Optional[_Union[BudgetUsage, _Mapping]] = ...) -> None: ...

class Approval(_message.Message):
    __slots__ = ("decision", "decided_by", "note", "decided_at")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    decision: ApprovalDecision
    decided_by: str
    note: str
    decided_at: _timestamp_pb2.Timestamp
    def __init__(self, decision: _Optional[_Union[ApprovalDecision, str]] = ..., decided_by: _Optional[str] = ..., note: _Optional[str] = ..., decided_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ("namespace", "key", "lease_token", "result")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    lease_token: int
    result: OperationResult
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., lease_token: _Optional[int] = ..., result: _Optional[_Union[OperationResult, _Mapping]] = ...) -> None: ...

class CompleteResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: Record
    def __init__(self, record: _Optional[_Union[Record, _Mapping]] = ...) -> None: ...

class FailRequest(_message.Message):
    __slots__ = ("namespace", "key", "lease_token", "error", "disposition", "nothing_ran")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DISPOSITION_FIELD_NUMBER: _ClassVar[int]
    NOTHING_RAN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    lease_token: int
    error: OperationError
    disposition: Disposition
    nothing_ran: bool
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., lease_token: _Optional[int] = ..., error: _Optional[_Union[OperationError, _Mapping]] = ..., disposition: _Optional[_Union[Disposition, str]] = ..., nothing_ran: _Optional[bool] = ...) -> None: ...

class FailResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: Record
    def __init__(self, record: _Optional[_Union[Record, _Mapping]] = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ("namespace", "key", "lease_token", "lease_ttl")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    lease_token: int
    lease_ttl: _duration_pb2.Duration
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., lease_token: _Optional[int] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RenewResponse(_message.Message):
    __slots__ = ("lease",)
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: Lease
    def __init__(self, lease: _Optional[_Union[Lease, _Mapping]] = ...) -> None: ...

class KeepAliveRequest(_message.Message):
    __slots__ = ("namespace", "key", "lease_token", "lease_ttl")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    lease_token: int
    lease_ttl: _duration_pb2.Duration
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., lease_token: _Optional[int] = ..., lease_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class LookupRequest(_message.Message):
    __slots__ = ("namespace", "key", "include_history")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    include_history: bool
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., include_history: _Optional[bool] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ("record", "history")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    record: Record
    history: _containers.RepeatedCompositeFieldContainer[RecordEvent]
    def __init__(self, record: _Optional[_Union[Record, _Mapping]] = ..., history: _Optional[_Iterable[_Union[RecordEvent, _Mapping]]] = ...) -> None: ...

class RecordEvent(_message.Message):
    __slots__ = ("at", "kind", "outcome", "attempt", "fencing_token", "owner", "reason")
    AT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    FENCING_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    kind: EventKind
    outcome: str
    attempt: int
    fencing_token: int
    owner: str
    reason: str
    def __init__(self, at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., kind: _Optional[_Union[EventKind, str]] = ..., outcome: _Optional[str] = ..., attempt: _Optional[int] = ..., fencing_token: _Optional[int] = ..., owner: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ListRecordsRequest(_message.Message):
    __slots__ = ("namespace", "statuses", "parent", "page_size", "page_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    statuses: _containers.RepeatedScalarFieldContainer[RecordStatus]
    parent: OperationRef
    page_size: int
    page_token: str
    def __init__(self, namespace: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[RecordStatus, str]]] = ..., parent: _Optional[_Union[OperationRef, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRecordsResponse(_message.Message):
    __slots__ = ("records", "next_page_token")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[Record]
    next_page_token: str
    def __init__(self, records: _Optional[_Iterable[_Union[Record, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ApproveRequest(_message.Message):
    __slots__ = ("namespace", "key", "fingerprint", "note")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    fingerprint: bytes
    note: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., fingerprint: _Optional[bytes] = ..., note: _Optional[str] = ...) -> None: ...

class ApproveResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: Record
    def __init__(self, record: _Optional[_Union[Record, _Mapping]] = ...) -> None: ...

class RejectRequest(_message.Message):
    __slots__ = ("namespace", "key", "fingerprint", "note")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    fingerprint: bytes
    note: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., fingerprint: _Optional[bytes] = ..., note: _Optional[str] = ...) -> None: ...

class RejectResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: Record
    def __init__(self, record: _Optional[_Union[Record, _Mapping]] = ...) -> None: ...

class PurgeRequest(_message.Message):
    __slots__ = ("namespace", "key", "force")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    force: bool
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class PurgeResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDuplicateIntentsRequest(_message.Message):
    __slots__ = ("namespace", "page_size", "page_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    page_size: int
    page_token: str
    def __init__(self, namespace: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class DuplicateIntent(_message.Message):
    __slots__ = ("namespace", "fingerprint", "claims")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    fingerprint: bytes
    claims: _containers.RepeatedCompositeFieldContainer[IntentMatch]
    def __init__(self, namespace: _Optional[str] = ..., fingerprint: _Optional[bytes] = ..., claims: _Optional[_Iterable[_Union[IntentMatch, _Mapping]]] = ...) -> None: ...

class ListDuplicateIntentsResponse(_message.Message):
    __slots__ = ("intents", "next_page_token")
    INTENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    intents: _containers.RepeatedCompositeFieldContainer[DuplicateIntent]
    next_page_token: str
    def __init__(self, intents: _Optional[_Iterable[_Union[DuplicateIntent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RekeyRequest(_message.Message):
    __slots__ = ("page_token", "page_size")
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_token: str
    page_size: int
    def __init__(self, page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class RekeyResponse(_message.Message):
    __slots__ = ("examined", "resealed", "current", "unreadable", "unreadable_key_ids", "primary_key_id", "next_page_token")
    EXAMINED_FIELD_NUMBER: _ClassVar[int]
    RESEALED_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    UNREADABLE_FIELD_NUMBER: _ClassVar[int]
    UNREADABLE_KEY_IDS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    examined: int
    resealed: int
    current: int
    unreadable: int
    unreadable_key_ids: _containers.RepeatedScalarFieldContainer[str]
    primary_key_id: str
    next_page_token: str
    def __init__(self, examined: _Optional[int] = ..., resealed: _Optional[int] = ..., current: _Optional[int] = ..., unreadable: _Optional[int] = ..., unreadable_key_ids: _Optional[_Iterable[str]] = ..., primary_key_id: _Optional[str] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class EraseTenantRequest(_message.Message):
    __slots__ = ("confirm_tenant", "page_token", "page_size")
    CONFIRM_TENANT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    confirm_tenant: str
    page_token: str
    page_size: int
    def __init__(self, confirm_tenant: _Optional[str] = ..., page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class EraseTenantResponse(_message.Message):
    __slots__ = ("erased", "next_page_token", "receipt")
    ERASED_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    erased: int
    next_page_token: str
    receipt: ErasureReceipt
    def __init__(self, erased: _Optional[int] = ..., next_page_token: _Optional[str] = ..., receipt: _Optional[_Union[ErasureReceipt, _Mapping]] = ...) -> None: ...

class ErasureReceipt(_message.Message):
    __slots__ = ("tenant", "completed_at", "erased_by")
    TENANT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    ERASED_BY_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    completed_at: _timestamp_pb2.Timestamp
    erased_by: str
    def __init__(self, tenant: _Optional[str] = ..., completed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., erased_by: _Optional[str] = ...) -> None: ...
