"""Reading the google.rpc.ErrorInfo reason of a server error."""

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from oncekey import reason


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
