"""The shared RFC 8785 vectors (tests/vectors/fingerprint.json) and native Python values."""

import json
import pathlib

import pytest

from oncekey import InvalidJSON, canonicalize_json, fingerprint, fingerprint_json

VECTORS = json.loads(
    (pathlib.Path(__file__).parents[3] / "tests" / "vectors" / "fingerprint.json").read_text("utf-8")
)["vectors"]


def test_vectors_are_there():
    assert len(VECTORS) > 10


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector(vector):
    if vector.get("error"):
        with pytest.raises(InvalidJSON):
            canonicalize_json(vector["input"])
        return
    assert canonicalize_json(vector["input"]) == vector["canonical"]
    assert fingerprint_json(vector["input"]).hex() == vector["sha256"]


def test_python_values_fingerprint_like_their_json():
    args = {"currency": "EUR", "amount": 1250, "rate": 0.1, "lines": ("a", None, True), "big": 2**64}
    text = '{"rate":1e-1,"amount":1250.0,"currency":"EUR","lines":["a",null,true],"big":18446744073709551616}'
    assert fingerprint(args) == fingerprint_json(text)
    assert len(fingerprint(args)) == 32


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 10**400, {1: "x"}, object(), "\ud800"])
def test_values_without_canonical_form(bad):
    with pytest.raises(InvalidJSON):
        fingerprint(bad)
