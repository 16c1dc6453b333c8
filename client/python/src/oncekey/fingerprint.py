"""The operation fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of an operation's
significant arguments, the same 32 bytes the server computes from ``payload_json``.

Parsing follows I-JSON (RFC 7493) as RFC 8785 requires: duplicate member names, lone surrogates
and numbers outside the IEEE 754 double range are refused. Every number is the double it denotes
(Python ints included), printed the way ECMAScript's ``Number.prototype.toString`` prints it.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

__all__ = ["InvalidJSON", "canonicalize", "canonicalize_json", "fingerprint", "fingerprint_json"]


class InvalidJSON(ValueError):
    """The value or text has no canonical form: not JSON, or not I-JSON."""


def fingerprint(args: Any) -> bytes:
    """SHA-256 of the canonical JSON of ``args`` (dicts, lists, str, int, float, bool, None)."""
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
    """The RFC 8785 canonical form of a Python value."""
    out: list[str] = []
    _write(value, out)
    return "".join(out)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise InvalidJSON("duplicate member name")
    return obj


def _no_constant(name: str) -> Any:
    raise InvalidJSON(f"{name} is not JSON")


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, (int, float)):
        out.append(_number(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(value, dict):
        for name in value:
            if not isinstance(name, str):
                raise InvalidJSON(f"member name {name!r} is not a string")
        out.append("{")
        # RFC 8785 §3.2.3: sorted by UTF-16 code units (big-endian bytes compare the same way).
        for i, name in enumerate(sorted(value, key=_utf16)):
            if i:
                out.append(",")
            out.append(_string(name))
            out.append(":")
            _write(value[name], out)
        out.append("}")
    else:
        raise InvalidJSON(f"{type(value).__name__} is not JSON")


def _utf16(name: str) -> bytes:
    try:
        return name.encode("utf-16-be")
    except UnicodeEncodeError:
        raise InvalidJSON("lone surrogate") from None


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(s: str) -> str:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidJSON("lone surrogate") from None
    parts = ['"']
    for c in s:
        if c in _ESCAPES:
            parts.append(_ESCAPES[c])
        elif c < " ":
            parts.append(f"\\u{ord(c):04x}")
        else:
            parts.append(c)
    parts.append('"')
    return "".join(parts)


def _number(n: int | float) -> str:
    """ECMAScript Number-to-String of the double ``n`` denotes (RFC 8785 §3.2.2.3)."""
    try:
        x = float(n)
    except OverflowError:
        raise InvalidJSON("number out of the double range") from None
    if not math.isfinite(x):
        raise InvalidJSON("number out of the double range")
    if x == 0:
        return "0"  # also -0
    sign = "-" if x < 0 else ""
    # repr gives the shortest round-trip digits; rewrite them as 0.DIGITS × 10^n.
    mantissa, _, exp = repr(abs(x)).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    n_ = len(whole) + int(exp or 0) - (len(whole + frac) - len((whole + frac).lstrip("0")))
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n_ <= 21:
        return sign + digits + "0" * (n_ - k)
    if 0 < n_ <= 21:
        return sign + digits[:n_] + "." + digits[n_:]
    if -6 < n_ <= 0:
        return sign + "0." + "0" * -n_ + digits
    e = n_ - 1
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{head}e{'+' if e >= 0 else '-'}{abs(e)}"
