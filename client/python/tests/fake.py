"""A scripted ``oncekey.v1.Ledger`` server in-process, for what the real server cannot be made to do
on demand: fail a given number of times, answer with a pushback, replace a KeepAlive stream. It
counts the calls it gets, so tests can assert exactly how often the client retried.
"""

from __future__ import annotations

import collections
import threading
from concurrent import futures
from typing import Callable

import grpc
from google.protobuf import any_pb2, timestamp_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from oncekey.v1 import ledger_pb2 as pb
from oncekey.v1 import ledger_pb2_grpc


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, reason: str, pushback_ms: int | None = None) -> None:
    """Ends the call with ``code`` and an ErrorInfo ``reason`` (and a pushback trailer)."""
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=reason, domain="oncekey"))
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=reason.lower(), details=[detail])
    trailers = [("grpc-status-details-bin", status.SerializeToString())]
    if pushback_ms is not None:
        trailers.append(("grpc-retry-pushback-ms", str(pushback_ms)))
    context.set_trailing_metadata(trailers)
    context.abort(code, reason.lower())


def lease(token: int = 1) -> pb.Lease:
    expires = timestamp_pb2.Timestamp()
    expires.GetCurrentTime()
    expires.seconds += 30
    return pb.Lease(token=token, expires_at=expires, attempt=1)


Handler = Callable[[object, grpc.ServicerContext, int], object]


class FakeLedger(ledger_pb2_grpc.LedgerServicer):
    """Answers each RPC with ``handlers[name](request, context, n)`` (n: the call's number, from 1)."""

    def __init__(self, handlers: dict[str, Handler]):
        self.handlers = handlers
        self.calls: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def _handle(self, name: str, request: object, context: grpc.ServicerContext) -> object:
        with self.lock:
            self.calls[name] += 1
            n = self.calls[name]
        return self.handlers[name](request, context, n)

    def Claim(self, request, context):
        return self._handle("Claim", request, context)

    def Complete(self, request, context):
        return self._handle("Complete", request, context)

    def Fail(self, request, context):
        return self._handle("Fail", request, context)

    def Lookup(self, request, context):
        return self._handle("Lookup", request, context)

    def ListRecords(self, request, context):
        return self._handle("ListRecords", request, context)

    def KeepAlive(self, request_iterator, context):
        first = next(request_iterator)
        return self._handle("KeepAlive", first, context)


class FakeServer:
    def __init__(self, handlers: dict[str, Handler]):
        self.ledger = FakeLedger(handlers)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        ledger_pb2_grpc.add_LedgerServicer_to_server(self.ledger, self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.target = f"127.0.0.1:{port}"
        self.server.start()

    def stop(self) -> None:
        self.server.stop(grace=None)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
