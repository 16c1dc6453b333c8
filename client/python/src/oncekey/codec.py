"""Native Python values in and out: arguments and results become JSON (dataclasses, pydantic
models, enums, dates, UUIDs, tuples and sets included), and a replayed result is decoded back into
the type the wrapped function is annotated to return.

Plain data only: no I/O here.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Any

from oncekey.errors import DecodeError, EncodeError
from oncekey.types import JSON_CONTENT_TYPE, StoredResult


def to_json_value(value: Any, *, binary: bool = False) -> Any:
    """``value`` as plain JSON data (dict, list, str, int, float, bool, None). A ``Decimal`` becomes
    its exact text (a string: a JSON number would round it to a double). Byte strings are refused
    unless ``binary``, which turns them into standard base64 text with padding (how fingerprinted
    arguments carry them: docs/api.md, "Default arguments and key")."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        out = {}
        for name, item in value.items():
            if isinstance(name, enum.Enum):
                name = name.value
            if not isinstance(name, str):
                raise EncodeError(f"member name {name!r} is not a string")
            out[name] = to_json_value(item, binary=binary)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json_value(item, binary=binary) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [to_json_value(item, binary=binary) for item in value]
        return sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
    dump = getattr(value, "model_dump", None)
    if callable(dump) and hasattr(type(value), "model_fields"):  # a pydantic v2 model
        return to_json_value(dump(mode="json"), binary=binary)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json_value(getattr(value, f.name), binary=binary) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return to_json_value(value.value, binary=binary)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        if binary:
            return base64.b64encode(bytes(value)).decode("ascii")
        raise EncodeError("bytes are not JSON: return oncekey.StoredResult(body=...) to store raw bytes")
    raise EncodeError(f"{type(value).__name__} is not JSON")


def encode_result(value: Any) -> StoredResult:
    """The stored result of a function's return value: a ``StoredResult`` as is, anything else as
    JSON (content type ``application/json``)."""
    if isinstance(value, StoredResult):
        return value
    try:
        body = json.dumps(to_json_value(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as e:
        raise EncodeError(str(e)) from None
    return StoredResult(body=body.encode("utf-8"), content_type=JSON_CONTENT_TYPE)


def decode_result(result: StoredResult, annotation: Any = None) -> Any:
    """A stored result as the value the function returned: JSON bodies decoded (into
    ``annotation`` when it names a dataclass, a pydantic model or a container of them); any other
    content type is returned as the ``StoredResult`` itself."""
    if result.content_type.split(";")[0].strip().lower() != JSON_CONTENT_TYPE:
        return result
    if not result.body:
        return None
    try:
        return convert(json.loads(result.body), annotation)
    except Exception as e:
        raise DecodeError(f"the stored result cannot be decoded as {annotation!r}: {e}", result) from e


def convert(value: Any, annotation: Any) -> Any:
    """Plain JSON ``value`` converted to ``annotation`` (best effort without pydantic; exact with)."""
    if annotation is None or annotation is Any or annotation is type(None):
        return value
    adapter = _pydantic_adapter(annotation)
    if adapter is not None:
        return adapter.validate_python(value)
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation) and isinstance(value, dict):
        return _dataclass(annotation, value)
    return value


def _pydantic_adapter(annotation: Any) -> Any:
    try:
        import pydantic
    except ImportError:
        return None
    try:
        return pydantic.TypeAdapter(annotation)
    except Exception:  # not a type pydantic understands: leave the value as it is
        return None


def _dataclass(cls: type, value: dict[str, Any]) -> Any:
    import typing

    hints = typing.get_type_hints(cls)
    kwargs = {f.name: convert(value[f.name], hints.get(f.name)) for f in dataclasses.fields(cls) if f.name in value}
    return cls(**kwargs)
