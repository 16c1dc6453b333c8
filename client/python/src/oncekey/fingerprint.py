"""The operation fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of an operation's
significant arguments, the same 32 bytes the server computes from ``payload_json``.

Parsing follows I-JSON (RFC 7493) as RFC 8785 requires: duplicate member names, lone surrogates
and numbers outside the IEEE 754 double range are refused. Every number is the double it denotes
(Python ints included). The canonical text itself comes from the ``rfc8785`` library; it refuses
integers beyond ±(2^53-1) (the shared vector "integers beyond 2^53 round to doubles"), so they are
turned into the doubles they denote first.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import rfc8785

from oncekey.codec import to_json_value
from oncekey.errors import EncodeError

__all__ = ["InvalidJSON", "canonicalize", "canonicalize_json", "fingerprint", "fingerprint_json"]


class InvalidJSON(EncodeError, ValueError):
    """The value or text has no canonical form: not JSON, or not I-JSON."""


def fingerprint(args: Any) -> bytes:
    """SHA-256 of the canonical JSON of ``args`` (JSON data, dataclasses, pydantic models, ...)."""
    return hashlib.sha256(canonicalize(args).encode("utf-8")).digest()


def fingerprint_json(text: str) -> bytes:
    """SHA-256 of the canonical form of a JSON text."""
    return hashlib.sha256(canonicalize_json(text).encode("utf-8")).digest()


def canonicalize_json(text: str) -> str:
    """The RFC 8785 canonical form of a JSON text."""
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise InvalidJSON(str(e)) from None
    return canonicalize(value)


def canonicalize(value: Any) -> str:
    """The RFC 8785 canonical form of a Python value (dataclasses and pydantic models included)."""
    try:
        plain = to_json_value(value)
    except EncodeError as e:
        raise InvalidJSON(str(e)) from None
    try:
        return rfc8785.dumps(_as_doubles(plain)).decode("utf-8")
    except rfc8785.CanonicalizationError as e:
        raise InvalidJSON(str(e)) from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise InvalidJSON("duplicate member name")
    return obj


def _no_constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not JSON")


def _as_doubles(value: Any) -> Any:
    """Every number as the IEEE 754 double it denotes: RFC 8785 numbers are doubles, and
    ``rfc8785`` itself refuses integers beyond ±(2^53-1) instead of rounding them."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:
            raise InvalidJSON("number out of the double range") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJSON("number out of the double range")
        return value
    if isinstance(value, list):
        return [_as_doubles(v) for v in value]
    return {name: _as_doubles(v) for name, v in value.items()}
