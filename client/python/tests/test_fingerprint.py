"""The shared RFC 8785 vectors (tests/vectors/fingerprint.json) and native Python values."""

import json
import pathlib

import pytest

from decimal import Decimal

from oncekey import InexactNumber, InvalidJSON, canonicalize, canonicalize_json, fingerprint, fingerprint_json

VECTORS = json.loads(
    (pathlib.Path(__file__).parents[3] / "tests" / "vectors" / "fingerprint.json").read_text("utf-8")
)["vectors"]


def test_vectors_are_there():
    assert len(VECTORS) > 10


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector):
    if vector.get("error"):
        with pytest.raises(InvalidJSON) as refused:
            canonicalize_json(vector["input"])
        with pytest.raises(InvalidJSON):
            fingerprint_json(vector["input"])
        number = vector.get("refused_number")
        if number is None:
            assert not isinstance(refused.value, InexactNumber), refused.value
        else:
            assert isinstance(refused.value, InexactNumber), refused.value
            assert (refused.value.path, refused.value.why) == (number["path"], number["why"])
            assert str(refused.value).startswith(number["path"] + ": ")
            assert "send it as a string" in str(refused.value)
        return
    assert canonicalize_json(vector["input"]) == vector["canonical"]
    assert fingerprint_json(vector["input"]).hex() == vector["sha256"]


def test_python_values_fingerprint_like_their_json():
    args = {"currency": "EUR", "amount": 1250, "rate": 0.1, "lines": ("a", None, True), "max": 2**53 - 1}
    text = '{"rate":1e-1,"amount":1250.0,"currency":"EUR","lines":["a",null,true],"max":9007199254740991}'
    assert fingerprint(args) == fingerprint_json(text)
    assert len(fingerprint(args)) == 32


@pytest.mark.parametrize(
    "value, path",
    [
        ({"id": 2**53}, "$.id"),
        ({"id": -(2**53)}, "$.id"),
        ([1, {"n": [0, 2**64 - 1]}], "$[1].n[1]"),
        ({"x": 1e21}, "$.x"),
        ({"é t": 9007199254740992.0}, '$["é t"]'),
        ({"ok": 2**53 - 1, "_b9": {"c\"q": 10**400}}, '$._b9["c\\"q"]'),
    ],
)
def test_python_numbers_beyond_2_53_are_refused_naming_their_path(value, path):
    with pytest.raises(InexactNumber) as refused:
        fingerprint(value)
    assert (refused.value.path, refused.value.why) == (path, "magnitude")
    assert "send it as a string" in str(refused.value) and "9007199254740992" not in str(refused.value)
    with pytest.raises(InexactNumber):
        canonicalize(value)


def test_decimals_are_their_exact_text():
    """A Decimal is fingerprinted as its text, digit for digit, never rounded to a double."""
    assert canonicalize({"price": Decimal("4.50")}) == '{"price":"4.50"}'
    assert canonicalize([Decimal("0.1000000000000000055511151231257827")]) == '["0.1000000000000000055511151231257827"]'
    assert fingerprint(Decimal("12345678901234567890")) == fingerprint("12345678901234567890")


def test_byte_strings_are_standard_base64():
    assert canonicalize({"blob": b"\x00\x01\x02\xff"}) == '{"blob":"AAEC/w=="}'
    assert canonicalize([bytearray(b"a")]) == '["YQ=="]'


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1: "x"}, object(), "\ud800"])
def test_values_without_canonical_form(bad):
    with pytest.raises(InvalidJSON):
        fingerprint(bad)
