"""The operation fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of an operation's
significant arguments, the same 32 bytes the server computes from ``payload_json``.

Parsing follows I-JSON (RFC 7493) as RFC 8785 requires: duplicate member names, lone surrogates
and numbers outside the IEEE 754 double range are refused. Numbers are lossless or refused
(docs/api.md, "Numbers"): an integer or a double beyond ±(2^53−1), and in a JSON text a literal
whose canonical form would change its value (``0.1000000000000000055511151231257827``,
``1e-400``), raise ``InexactNumber`` naming the number's JSON path. The canonical text itself
comes from the ``rfc8785`` library, given only numbers it prints exactly.
"""

from __future__ import annotations

import decimal
import hashlib
import json
import math
from typing import Any

import rfc8785

from oncekey.codec import to_json_value
from oncekey.errors import EncodeError

__all__ = [
    "MAX_EXACT",
    "InexactNumber",
    "InvalidJSON",
    "canonicalize",
    "canonicalize_json",
    "fingerprint",
    "fingerprint_json",
]

MAX_EXACT = 2**53 - 1
"""The largest magnitude a fingerprinted number may have (JavaScript's ``Number.MAX_SAFE_INTEGER``):
every integer up to it is exactly a double in every language."""

_WHY = {
    "magnitude": "a number beyond ±(2^53−1) (9007199254740991) cannot be fingerprinted exactly",
    "precision": "a number with more digits than a double keeps cannot be fingerprinted exactly",
}


class InvalidJSON(EncodeError, ValueError):
    """The value or text has no canonical form: not JSON, or not I-JSON."""


class InexactNumber(InvalidJSON):
    """A number the canonical form cannot keep exactly (docs/api.md, "Numbers"): ``path`` is its
    JSON path (``$.order.id``), ``why`` is ``"magnitude"`` (beyond ±(2^53−1)) or ``"precision"``
    (more digits than a double keeps). Send such a number as a string. The message names the path,
    never the number."""

    def __init__(self, path: str, why: str):
        super().__init__(f"{path}: {_WHY[why]}; send it as a string")
        self.path = path
        self.why = why


def fingerprint(args: Any) -> bytes:
    """SHA-256 of the canonical JSON of ``args`` (JSON data, dataclasses, pydantic models, ...;
    byte strings as base64 text)."""
    return hashlib.sha256(canonicalize(args).encode("utf-8")).digest()


def fingerprint_json(text: str) -> bytes:
    """SHA-256 of the canonical form of a JSON text."""
    return hashlib.sha256(canonicalize_json(text).encode("utf-8")).digest()


def canonicalize(value: Any) -> str:
    """The RFC 8785 canonical form of a Python value (dataclasses and pydantic models included;
    byte strings as standard base64 text). An integer or float beyond ±(2^53−1) raises
    ``InexactNumber``; NaN and infinities ``InvalidJSON``."""
    try:
        plain = to_json_value(value, binary=True)
    except EncodeError as e:
        raise InvalidJSON(str(e)) from None
    _check_values(plain, _Path())
    return _dumps(plain)


def canonicalize_json(text: str) -> str:
    """The RFC 8785 canonical form of a JSON text. A number whose canonical form would not keep its
    value exactly raises ``InexactNumber`` naming the first such number in text order."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_constant=_no_constant,
            parse_float=_literal,
            parse_int=_literal,
        )
    except json.JSONDecodeError as e:
        raise InvalidJSON(str(e)) from None
    return _dumps(_check_literals(value, _Path()))


def _dumps(plain: Any) -> str:
    try:
        return rfc8785.dumps(plain).decode("utf-8")
    except rfc8785.CanonicalizationError as e:
        raise InvalidJSON(str(e)) from None


class _Literal(str):
    """A JSON number literal as written, kept until it is judged."""


def _literal(text: str) -> _Literal:
    """A number literal of a JSON text; one beyond the double range is not I-JSON (refused while
    parsing, like every other malformation, before any number is judged)."""
    if not math.isfinite(float(text)):
        raise InvalidJSON("number out of the double range")
    return _Literal(text)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise InvalidJSON("duplicate member name")
    return obj


def _no_constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not JSON")


class _Path:
    """A JSONPath being walked: members that are identifiers as ``.name``, others as ``["name"]``
    (JSON string syntax), items as ``[i]``."""

    def __init__(self) -> None:
        self.steps: list[str] = []

    def member(self, name: str) -> _Path:
        if name.isascii() and (name[:1].isalpha() or name[:1] == "_") and name.replace("_", "a").isalnum():
            self.steps.append(f".{name}")
        else:
            self.steps.append(f"[{json.dumps(name, ensure_ascii=False)}]")
        return self

    def item(self, index: int) -> _Path:
        self.steps.append(f"[{index}]")
        return self

    def pop(self) -> None:
        self.steps.pop()

    def __str__(self) -> str:
        return "$" + "".join(self.steps)


def _check_values(value: Any, path: _Path) -> None:
    """Refuses the first number of plain data (in member order) that is not exactly a double of
    magnitude at most 2^53−1."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int):
        if abs(value) > MAX_EXACT:
            raise InexactNumber(str(path), "magnitude")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidJSON(f"{path}: NaN and infinities are not JSON")
        if abs(value) > MAX_EXACT:
            raise InexactNumber(str(path), "magnitude")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_values(item, path.item(i))
            path.pop()
    else:
        for name, item in value.items():
            _check_values(item, path.member(name))
            path.pop()


def _check_literals(value: Any, path: _Path) -> Any:
    """The parsed text with every number judged (in text order: objects keep their members' order)
    and turned into the value it denotes."""
    if isinstance(value, _Literal):
        number = float(value)
        if abs(number) > MAX_EXACT:
            raise InexactNumber(str(path), "magnitude")
        if decimal.Decimal(value) != decimal.Decimal(repr(number)):
            # repr is the shortest text that reads back as the same double, as the canonical form
            raise InexactNumber(str(path), "precision")
        return number
    if isinstance(value, list):
        out = []
        for i, item in enumerate(value):
            out.append(_check_literals(item, path.item(i)))
            path.pop()
        return out
    if isinstance(value, dict):
        checked = {}
        for name, item in value.items():
            checked[name] = _check_literals(item, path.member(name))
            path.pop()
        return checked
    return value
