#!/usr/bin/env python3
"""Regenerates arguments.json: the shared vectors of the default fingerprinted arguments and the
default key that every Oncekey client library derives from a wrapped function's call
(docs/api.md#default-arguments-and-key), so that one operation claimed from two languages is one
operation.

Each case lists the values a call passes, positionally (`call`); an argument written
{"$bytes": "<base64>"} stands for a byte string with those bytes. `arguments` is the JSON array
the call's default fingerprinted arguments are, `canonical` its RFC 8785 text, `sha256` the
fingerprint and `key` the default key; a case with `refused_number` is refused by every client
with its fingerprint error naming that JSONPath. The canonical text comes from PyPI `rfc8785`,
not from Oncekey's code. Run: pip install rfc8785 && python3 generate_arguments.py
"""
import hashlib
import json
import pathlib

import rfc8785

CASES = [
    ("two strings", ["ada@example.com", "Your ticket #481"]),
    ("a trailing null is dropped", ["ada@example.com", "Your ticket #481", None]),
    ("every trailing null is dropped", ["a", None, None]),
    ("a null before a passed argument is kept", ["a", None, "c"]),
    ("no arguments", []),
    ("only nulls", [None]),
    ("an object and unicode", [{"order": 481, "lines": [{"sku": "A", "qty": 2}], "note": "été 😀"}, "€"]),
    ("numbers", [1250, 0.1, -0.0, 9007199254740991, -2.5e-7]),
    ("booleans and empty containers", [True, False, [], {}]),
    ("a byte string is standard base64 with padding", [{"$bytes": "AAEC/w=="}, "x"]),
    ("an empty byte string", [{"$bytes": ""}]),
]

REFUSED = [
    ("an integer beyond 2^53-1", [9007199254740992], "$[0]"),
    ("an id beyond 2^53-1 inside an object", ["ok", {"id": 1234567890123456789}], "$[1].id"),
]


def as_json(value):
    """The JSON value a call's argument becomes: byte strings as standard base64 text."""
    if isinstance(value, dict) and set(value) == {"$bytes"}:
        return value["$bytes"]
    if isinstance(value, list):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value


def arguments(call):
    args = [as_json(v) for v in call]
    while args and args[-1] is None:
        args.pop()
    return args


def main() -> None:
    cases = []
    for name, call in CASES:
        args = arguments(call)
        canonical = rfc8785.dumps(args)
        digest = hashlib.sha256(canonical).hexdigest()
        cases.append({
            "name": name,
            "call": call,
            "arguments": args,
            "canonical": canonical.decode("utf-8"),
            "sha256": digest,
            "key": f"sha256:{digest}",
        })
    for name, call, path in REFUSED:
        cases.append({"name": name, "call": call, "refused_number": {"path": path}})
    out = pathlib.Path(__file__).with_name("arguments.json")
    about = __doc__.strip().split("\n\n")[0].replace("\n", " ")
    out.write_text(json.dumps({"about": about, "cases": cases}, ensure_ascii=False, indent=2) + "\n")


if __name__ == "__main__":
    main()
