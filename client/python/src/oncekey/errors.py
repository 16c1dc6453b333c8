"""Errors of the Python client, and the google.rpc.ErrorInfo that every server error carries."""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from oncekey.v1 import ledger_pb2

ERROR_DOMAIN = "oncekey"


def error_info(error: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """The google.rpc.ErrorInfo of a server error, or None when it carries none."""
    if not isinstance(error, grpc.Call):
        return None
    status = rpc_status.from_call(error)
    if status is None:
        return None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info
    return None


def reason(error: BaseException) -> str | None:
    """The ErrorInfo reason of a server error (e.g. ``"KEY_REUSED"``), or None."""
    info = error_info(error) if isinstance(error, grpc.RpcError) else None
    return info.reason if info is not None else None


class Error(Exception):
    """Base class of the outcomes that ``Client.run`` raises instead of returning a result."""


class OperationFailed(Error):
    """The operation failed for good, now or earlier; ``error`` is the stored OperationError."""

    def __init__(self, error: ledger_pb2.OperationError):
        super().__init__(f"operation failed: {error.code} {error.message}")
        self.error = error


class InProgress(Error):
    """Another holder is performing the operation; claim again after ``retry_after`` seconds."""

    def __init__(self, retry_after: float):
        super().__init__(f"operation in progress elsewhere; retry after {retry_after:.3f}s")
        self.retry_after = retry_after


class NeedsReconciliation(Error):
    """An at-most-once operation's outcome is unknown: check the outside world, then reconcile."""


class FinalError(Exception):
    """Raise from ``run``'s function to fail the key for good: the error is replayed to later runs.

    Any other exception releases the key for a retry (the next run acquires it again).
    """

    def __init__(self, message: str, *, code: int = 0, details: bytes = b""):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
