"""Python client of Oncekey, the shared idempotency ledger.

Make a side effect happen once per key, in one line::

    client = oncekey.Client("127.0.0.1:50051", tenant="demo")

    @client.idempotent("email.send", key=lambda to, subject: f"{to}:{subject}")
    def send_email(to: str, subject: str, body: str) -> dict: ...

``Client`` is the sync API and ``AsyncClient`` the asyncio one (``@client.idempotent`` works on
``async def`` functions with either). Calls are retried on transient failures with exponential
backoff and full jitter; the lease is kept alive by the server while the function runs; the outcome
is recorded with the client's own deadlines, also when the caller is cancelled. Errors are
``oncekey.Error`` subclasses: ``KeyReused``, ``LeaseLost``, ``InProgress``,
``NeedsReconciliation``, ``OperationFailed``, ``AwaitingApproval``, ``Unavailable``, ``RpcError``
(and its ``NotAwaitingApproval``, ``UnsettledAtMostOnce``, ``MissingScope``, ``UnreadableRecord``,
...). Operators list records with ``list_records``, reconcile them with ``reconcile``, decide on
gated operations with ``approve`` / ``reject`` and remove records with ``purge``. ``client.saga(key)`` runs steps once each
and compensates the completed ones in reverse order when one fails for good (``SagaRolledBack``,
``SagaNeedsReconciliation``). Agent safety (docs/agents.md): ``intent_guard=`` refuses (or flags) the
same arguments under a made-up new key (``DuplicateIntent``, ``Done.intent_matches``,
``list_duplicate_intents``); ``budget=RunBudget(...)`` caps a parent operation's children
(``BudgetExhausted``, ``Record.budget``).
"""

from oncekey._core import Done, Options
from oncekey._wrap import AsyncIdempotent, Idempotent
from oncekey.agents import explain
from oncekey.aio import AsyncClient
from oncekey.client import Client
from oncekey.errors import (
    ERROR_DOMAIN,
    Abandon,
    AwaitingApproval,
    BudgetExhausted,
    DecodeError,
    DuplicateIntent,
    EncodeError,
    Error,
    FinalError,
    InProgress,
    InvalidArgument,
    KeyReused,
    LeaseLost,
    MissingScope,
    NeedsReconciliation,
    NotAwaitingApproval,
    NotFound,
    OperationFailed,
    PermissionDenied,
    RateLimited,
    RpcError,
    SagaError,
    SagaNeedsReconciliation,
    SagaRolledBack,
    Unauthenticated,
    UnreadableRecord,
    UnsettledAtMostOnce,
    Unavailable,
    error_info,
    reason,
)
from oncekey.fingerprint import InexactNumber, InvalidJSON, canonicalize, canonicalize_json, fingerprint, fingerprint_json
from oncekey.key import InvalidKey, OperationKey
from oncekey.lease import Lease, current_lease
from oncekey.listing import DuplicateIntentGroup, DuplicateIntentPage, RecordPage
from oncekey.retry import BreakerPolicy, RetryPolicy
from oncekey.saga import AsyncSaga, Saga
from oncekey.types import (
    Approval,
    BudgetUsage,
    Claimed,
    Decision,
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
)

__all__ = [
    "ERROR_DOMAIN",
    "Abandon",
    "Approval",
    "AsyncClient",
    "AsyncIdempotent",
    "AsyncSaga",
    "AwaitingApproval",
    "BreakerPolicy",
    "BudgetExhausted",
    "BudgetUsage",
    "Claimed",
    "Client",
    "DecodeError",
    "Decision",
    "Disposition",
    "Done",
    "DuplicateIntent",
    "DuplicateIntentGroup",
    "DuplicateIntentPage",
    "EncodeError",
    "Error",
    "FinalError",
    "Idempotent",
    "InProgress",
    "InexactNumber",
    "IntentGuard",
    "IntentGuardMode",
    "IntentMatch",
    "InvalidArgument",
    "InvalidJSON",
    "InvalidKey",
    "KeyReused",
    "Lease",
    "LeaseGrant",
    "LeaseLost",
    "MissingScope",
    "NeedsReconciliation",
    "NotAwaitingApproval",
    "NotFound",
    "OperationFailed",
    "OperationKey",
    "Options",
    "Outcome",
    "PermissionDenied",
    "RateLimited",
    "Record",
    "RecordPage",
    "RecordStatus",
    "RetryPolicy",
    "RpcError",
    "RunBudget",
    "Saga",
    "SagaError",
    "SagaNeedsReconciliation",
    "SagaRolledBack",
    "Semantics",
    "StoredError",
    "StoredResult",
    "Unauthenticated",
    "Unavailable",
    "UnreadableRecord",
    "UnsettledAtMostOnce",
    "canonicalize",
    "canonicalize_json",
    "current_lease",
    "error_info",
    "explain",
    "fingerprint",
    "fingerprint_json",
    "reason",
]
