"""Native values in and out: what becomes JSON, how replayed results decode, what is refused."""

import dataclasses
import datetime as dt
import enum
import uuid

import pydantic
import pytest

from oncekey import DecodeError, EncodeError, StoredResult, fingerprint
from oncekey.codec import decode_result, encode_result, to_json_value


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Line:
    sku: str
    qty: int


@dataclasses.dataclass
class Order:
    id: str
    lines: list[Line]
    placed: dt.date


class Model(pydantic.BaseModel):
    id: uuid.UUID
    color: Color


def test_native_values_become_json():
    order = Order("o-1", [Line("a", 2)], dt.date(2026, 1, 2))
    assert to_json_value(order) == {"id": "o-1", "lines": [{"sku": "a", "qty": 2}], "placed": "2026-01-02"}
    u = uuid.UUID(int=7)
    assert to_json_value(Model(id=u, color=Color.RED)) == {"id": str(u), "color": "red"}
    assert to_json_value(({"b", "a"}, Color.RED)) == [["a", "b"], "red"]
    # The same arguments as a dataclass or as plain data: the same fingerprint.
    assert fingerprint(order) == fingerprint({"placed": "2026-01-02", "id": "o-1", "lines": [{"qty": 2, "sku": "a"}]})


@pytest.mark.parametrize("bad", [object(), b"bytes", {1: "x"}, float("nan")])
def test_values_without_json_are_refused(bad):
    with pytest.raises(EncodeError):
        encode_result(bad)


def test_replayed_results_decode_into_the_annotation():
    stored = encode_result(Order("o-1", [Line("a", 2)], dt.date(2026, 1, 2)))
    assert stored.content_type == "application/json"
    assert decode_result(stored, Order) == Order("o-1", [Line("a", 2)], dt.date(2026, 1, 2))
    assert decode_result(stored, None) == {"id": "o-1", "lines": [{"sku": "a", "qty": 2}], "placed": "2026-01-02"}
    model = Model(id=uuid.UUID(int=7), color=Color.RED)
    assert decode_result(encode_result(model), Model) == model
    assert decode_result(encode_result([model]), list[Model]) == [model]
    with pytest.raises(DecodeError):
        decode_result(encode_result({"x": 1}), Model)


def test_raw_results_are_stored_and_replayed_as_they_are():
    raw = StoredResult(body=b"\x00\xff", code=201, content_type="application/octet-stream", metadata={"k": "v"})
    assert encode_result(raw) is raw
    assert decode_result(raw, dict) is raw
