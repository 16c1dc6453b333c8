"""Reading the google.rpc.ErrorInfo reason of a server error, and the typed error of every reason."""

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

import oncekey
from oncekey import errors, reason
from oncekey.v1 import ledger_pb2 as pb


class FakeCall(grpc.RpcError, grpc.Call):
    """A grpc.RpcError as grpcio raises it, with grpc-status-details-bin trailing metadata."""

    def __init__(self, code, message, details):
        status = status_pb2.Status(code=code.value[0], message=message, details=details)
        self._code, self._message = code, message
        self._trailers = (("grpc-status-details-bin", status.SerializeToString()),)

    def code(self):
        return self._code

    def details(self):
        return self._message

    def trailing_metadata(self):
        return self._trailers

    def initial_metadata(self):
        return ()

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def cancel(self):
        return False

    def add_callback(self, callback):
        return False


def test_reason_of_key_reused():
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason="KEY_REUSED", domain="oncekey"))
    err = FakeCall(grpc.StatusCode.FAILED_PRECONDITION, "key reused", [detail])
    assert reason(err) == "KEY_REUSED"


def test_reason_without_details():
    assert reason(FakeCall(grpc.StatusCode.UNAVAILABLE, "down", [])) is None
    assert reason(ValueError("not grpc")) is None


# The gRPC code that comes with each reason (docs/api.md, "Errors").
CODES = {
    "INVALID_FIELD": grpc.StatusCode.INVALID_ARGUMENT,
    "TOO_LARGE": grpc.StatusCode.INVALID_ARGUMENT,
    "KEY_REUSED": grpc.StatusCode.FAILED_PRECONDITION,
    "LEASE_LOST": grpc.StatusCode.FAILED_PRECONDITION,
    "ALREADY_SETTLED": grpc.StatusCode.FAILED_PRECONDITION,
    "NOT_FOUND": grpc.StatusCode.NOT_FOUND,
    "UNAUTHENTICATED": grpc.StatusCode.UNAUTHENTICATED,
    "PERMISSION_DENIED": grpc.StatusCode.PERMISSION_DENIED,
    "STORE_UNAVAILABLE": grpc.StatusCode.UNAVAILABLE,
    "RATE_LIMITED": grpc.StatusCode.RESOURCE_EXHAUSTED,
    "KEEPALIVE_REPLACED": grpc.StatusCode.ABORTED,
    "NOT_AWAITING_APPROVAL": grpc.StatusCode.FAILED_PRECONDITION,
    "UNSETTLED_AT_MOST_ONCE": grpc.StatusCode.FAILED_PRECONDITION,
    "MISSING_SCOPE": grpc.StatusCode.PERMISSION_DENIED,
    "INTERNAL": grpc.StatusCode.INTERNAL,
    "BUDGET_EXHAUSTED": grpc.StatusCode.FAILED_PRECONDITION,
    "UNREADABLE_RECORD": grpc.StatusCode.DATA_LOSS,
}


def server_error(code, why):
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=why, domain="oncekey"))
    return FakeCall(code, f"{why.lower()} happened", [detail])


def test_every_reason_of_the_proto_has_its_typed_error():
    """Iterates the proto's ErrorReason (the one list of reasons): each reason but UNSPECIFIED has
    an exception class, and a server error with it becomes that class, carrying the reason."""
    reasons = [name for name in pb.ErrorReason.keys() if name != "ERROR_REASON_UNSPECIFIED"]
    assert len(reasons) >= 15
    for name in reasons:
        value = pb.ErrorReason.Value(name)
        wire = name.removeprefix("ERROR_REASON_")
        assert value in errors.REASON_ERRORS, f"{name} has no typed error in oncekey.errors.REASON_ERRORS"
        assert wire in CODES, f"{name}: add its gRPC code to this test's CODES"
        assert errors.reason_value(wire) == value and errors.reason_name(value) == wire
        typed = errors.classify(server_error(CODES[wire], wire))
        assert isinstance(typed, errors.REASON_ERRORS[value]), (name, typed)
        assert typed.reason == wire and typed.code == CODES[wire], (name, typed.reason, typed.code)
    assert set(errors.REASON_ERRORS) == {pb.ErrorReason.Value(n) for n in reasons}


def test_typed_errors_of_the_reasons_a_caller_handles():
    assert isinstance(errors.classify(server_error(grpc.StatusCode.PERMISSION_DENIED, "MISSING_SCOPE")), oncekey.MissingScope)
    assert isinstance(errors.classify(server_error(grpc.StatusCode.PERMISSION_DENIED, "MISSING_SCOPE")), oncekey.PermissionDenied)
    assert isinstance(errors.classify(server_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED")), oncekey.Unavailable)
    assert isinstance(errors.classify(server_error(grpc.StatusCode.NOT_FOUND, "NOT_FOUND")), oncekey.NotFound)
    lost = errors.classify(server_error(grpc.StatusCode.FAILED_PRECONDITION, "ALREADY_SETTLED"))
    assert isinstance(lost, oncekey.LeaseLost) and lost.reason == "ALREADY_SETTLED"
    # A reason this version does not know: classified by its code alone, reason kept.
    unknown = errors.classify(server_error(grpc.StatusCode.FAILED_PRECONDITION, "SOMETHING_NEW"))
    assert type(unknown) is oncekey.RpcError and unknown.reason == "SOMETHING_NEW"
    assert type(errors.classify(server_error(grpc.StatusCode.UNAVAILABLE, "SOMETHING_NEW"))) is oncekey.Unavailable


def test_an_unreadable_record_names_its_key_and_is_never_retried():
    detail = any_pb2.Any()
    metadata = {"key_id": "k-2026-06", "cause": "missing_key"}
    detail.Pack(error_details_pb2.ErrorInfo(reason="UNREADABLE_RECORD", domain="oncekey", metadata=metadata))
    call = FakeCall(grpc.StatusCode.DATA_LOSS, 'the record is sealed with key "k-2026-06"', [detail])
    e = errors.classify(call)
    assert isinstance(e, oncekey.UnreadableRecord) and isinstance(e, oncekey.RpcError)
    assert (e.key_id, e.cause, e.reason, e.code) == ("k-2026-06", "missing_key", "UNREADABLE_RECORD", grpc.StatusCode.DATA_LOSS)
    assert not errors.is_transient(call)
    assert oncekey.RetryPolicy().delay(call, 1) is None
