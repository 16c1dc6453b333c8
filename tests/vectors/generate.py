#!/usr/bin/env python3
"""Regenerates fingerprint.json: the shared RFC 8785 test vectors every Oncekey client and the server
are tested against.

The canonical text comes from an independent implementation (PyPI `rfc8785`, Trail of Bits), not from
Oncekey's own code, so the vectors check our implementations instead of echoing them. Numbers are
parsed as IEEE 754 doubles, as RFC 8785 requires; the cases whose numbers a double cannot keep
(refused: docs/api.md#numbers) are listed by hand with the JSONPath each implementation must name. Run: pip install rfc8785 && python3 generate.py
"""
import hashlib
import json
import pathlib

import rfc8785

VALID = [
    ("empty object", "{}"),
    ("empty array", "[]"),
    ("literals", "[true,false,null]"),
    ("whitespace is dropped", ' { "a" : [ 1 , 2 ] ,\n\t"b" : { } } '),
    ("members sorted", '{"b":2,"a":1,"c":{"z":0,"y":[{"d":4,"c":3}]}}'),
    ("sorting by UTF-16 code units", '{"\\u20ac":"euro","\\ud83d\\ude00":"emoji","\\ufb01":"ligature","a":"ascii","\\u00e9":"e-acute"}'),
    ("integers", "[0,-0,1,-1,42,9007199254740991,-9007199254740991]"),
    ("fractions", "[0.5,-0.25,1.0,100.0,3.14159,0.1,0.30000000000000004]"),
    ("exponents", "[1e-7,1E-6,1e+2,1.5e15,2e-308,5e-324,123e-20,9.007199254740991e15]"),
    ("number forms that denote the same double", "[1,1.0,1e0,10e-1,0.1e1]"),
    ("string escapes", '["\\"quote\\"","back\\\\slash","/slash","\\b\\f\\n\\r\\t","\\u0000\\u0001\\u001f","\\u007f"]'),
    ("unicode escapes decoded", '["\\u00e9t\\u00e9","\\u2028\\u2029","\\ud83d\\ude00"]'),
    ("raw UTF-8 kept", '["été","日本語","😀"]'),
    ("nested", '{"order":{"id":"ord-1","lines":[{"sku":"A","qty":2},{"sku":"B","qty":1}]},"amount":1250,"currency":"EUR"}'),
    ("rfc 8785 appendix example, with numbers a double keeps exactly", '{"numbers":[333333333.3333333,1E15,4.50,2e-3,0.000000000000000000000000001],"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}'),
    ("top-level scalar", '"just a string"'),
    ("top-level number", "-12.5e1"),
]

# Numbers the canonical form would change, or beyond ±(2^53−1), are refused (docs/api.md#numbers):
# (name, text, JSONPath of the first refused number in text order, why).
REFUSED_NUMBERS = [
    ("an id beyond 2^53-1", '{"id":1234567890123456789}', "$.id", "magnitude"),
    ("its neighbour, which a double cannot tell from it", '{"id":1234567890123456790}', "$.id", "magnitude"),
    ("2^53 + 1", '{"amount":9007199254740993}', "$.amount", "magnitude"),
    ("2^53, exact but beyond 2^53-1", '{"amount":9007199254740992}', "$.amount", "magnitude"),
    ("-(2^53)", "[-9007199254740992]", "$[0]", "magnitude"),
    ("2^64-1", "[18446744073709551615]", "$[0]", "magnitude"),
    ("a large double in exponent form", '{"x":[1,1e21]}', "$.x[1]", "magnitude"),
    ("more digits than a double keeps", '{"rate":0.1000000000000000055511151231257827}', "$.rate", "precision"),
    ("the rfc 8785 appendix number", '{"numbers":[333333333.33333329]}', "$.numbers[0]", "precision"),
    ("a number a double rounds to zero", "{\"tiny\":1e-400}", "$.tiny", "precision"),
    ("the first of several, in text order", '{"b":[0.5,{"c d":12345678901234567890}],"a":9007199254740993}', '$.b[1]["c d"]', "magnitude"),
    ("a member name that needs quoting", '{"\\u00e9\\"x":9007199254740993}', '$["\u00e9\\"x"]', "magnitude"),
]

INVALID = [
    ("duplicate member names", '{"a":1,"a":2}'),
    ("lone surrogate", '"\\ud800"'),
    ("number out of double range", "1e400"),
    ("truncated", '{"a":'),
    ("trailing garbage", "[1] x"),
    ("not JSON", "NaN"),
]


def main() -> None:
    vectors = []
    for name, text in VALID:
        value = json.loads(text, parse_int=float)
        canonical = rfc8785.dumps(value)
        vectors.append({
            "name": name,
            "input": text,
            "canonical": canonical.decode("utf-8"),
            "sha256": hashlib.sha256(canonical).hexdigest(),
        })
    for name, text, path, why in REFUSED_NUMBERS:
        vectors.append({"name": name, "input": text, "error": True, "refused_number": {"path": path, "why": why}})
    for name, text in INVALID:
        vectors.append({"name": name, "input": text, "error": True})
    out = pathlib.Path(__file__).with_name("fingerprint.json")
    out.write_text(json.dumps({"about": __doc__.strip().splitlines()[0], "vectors": vectors}, ensure_ascii=False, indent=2) + "\n")


if __name__ == "__main__":
    main()
