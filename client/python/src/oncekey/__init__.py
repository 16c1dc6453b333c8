"""Python client of Oncekey, the shared idempotency ledger.

``Client.run`` claims a key, runs the side effect only when the claim acquired it (keeping the lease
alive over the KeepAlive stream meanwhile), then completes or fails the key; later runs with the same
key get the stored outcome. ``fingerprint`` computes the RFC 8785 fingerprint of an operation's
arguments; ``reason`` reads the google.rpc.ErrorInfo reason of a ``grpc.RpcError``.
"""

from oncekey.client import Client, Held, Outcome
from oncekey.errors import (
    ERROR_DOMAIN,
    Error,
    FinalError,
    InProgress,
    NeedsReconciliation,
    OperationFailed,
    error_info,
    reason,
)
from oncekey.fingerprint import InvalidJSON, canonicalize, canonicalize_json, fingerprint, fingerprint_json
from oncekey.v1.ledger_pb2 import OperationError, OperationResult

__all__ = [
    "ERROR_DOMAIN",
    "Client",
    "Error",
    "FinalError",
    "Held",
    "InProgress",
    "InvalidJSON",
    "NeedsReconciliation",
    "OperationError",
    "OperationFailed",
    "OperationResult",
    "Outcome",
    "canonicalize",
    "canonicalize_json",
    "error_info",
    "fingerprint",
    "fingerprint_json",
    "reason",
]
