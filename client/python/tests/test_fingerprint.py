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


def test_the_rfc8785_library_alone_refuses_integers_beyond_2_53():
    """Why ``oncekey.fingerprint`` turns integers into doubles before calling ``rfc8785``: the
    library refuses the shared vector "integers beyond 2^53 round to doubles" on its own (when it
    stops doing so, the conversion can go)."""
    import rfc8785

    vector = next(v for v in VECTORS if v["name"] == "integers beyond 2^53 round to doubles")
    with pytest.raises(rfc8785.IntegerDomainError):
        rfc8785.dumps(json.loads(vector["input"]))
    assert canonicalize_json(vector["input"]) == vector["canonical"]
