"""The default fingerprinted arguments and key of a wrapped function (docs/api.md, "Default arguments
and key"), checked against every case of the shared vectors (tests/vectors/arguments.json), so that
a call from Python and the same call from Go, TypeScript or Rust claim one operation; and the
Python-only forms: keyword calls, defaults, ``*args`` / ``**kwargs``, methods."""

import asyncio
import base64
import json
import pathlib

import pytest

import oncekey
from oncekey import InexactNumber, OperationKey

CASES = json.loads((pathlib.Path(__file__).parents[3] / "tests" / "vectors" / "arguments.json").read_text("utf-8"))["cases"]

# Decorating does not connect: no server is needed to derive keys.
client = oncekey.Client("127.0.0.1:1")


def native(value):
    """A vector's call value as Python passes it: ``{"$bytes": b64}`` is a byte string."""
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return base64.b64decode(value["$bytes"])
        return {name: native(item) for name, item in value.items()}
    if isinstance(value, list):
        return [native(item) for item in value]
    return value


def function_of(arity, asynchronous=False):
    """A function with ``arity`` positional parameters ``p0, p1, ...``."""
    params = ", ".join(f"p{i}" for i in range(arity))
    source = f"{'async ' if asynchronous else ''}def fn({params}):\n    return None\n"
    scope = {}
    exec(source, scope)
    return scope["fn"]


def test_every_case_is_here():
    assert len(CASES) >= 10 and any("refused_number" in c for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_vector(case, asynchronous):
    call = [native(v) for v in case["call"]]
    wrapped = client.idempotent("vectors.case")(function_of(len(call), asynchronous))
    if "refused_number" in case:
        with pytest.raises(InexactNumber) as refused:
            wrapped.key_of(*call)
        assert refused.value.path == case["refused_number"]["path"]
        assert "send it as a string" in str(refused.value)
        return
    assert wrapped.key_of(*call) == OperationKey("vectors.case", case["key"])
    assert case["key"] == f"sha256:{case['sha256']}"
    assert oncekey.canonicalize(case["arguments"]) == case["canonical"]
    assert oncekey.fingerprint(case["arguments"]).hex() == case["sha256"]
    # The same call by keyword names the same operation.
    assert wrapped.key_of(**{f"p{i}": v for i, v in enumerate(call)}) == OperationKey("vectors.case", case["key"])


def key(fn, *args, **kwargs):
    return client.idempotent("vectors.case")(fn).key_of(*args, **kwargs).key


def expected(arguments):
    return f"sha256:{oncekey.fingerprint(arguments).hex()}"


def test_declared_defaults_are_filled_in_before_trailing_nulls_are_dropped():
    def send(to, subject, body="hi", cc=None):
        return None

    assert key(send, "a@x", "s") == key(send, "a@x", "s", "hi") == key(send, "a@x", "s", body="hi", cc=None)
    assert key(send, "a@x", "s") == expected(["a@x", "s", "hi"])
    assert key(send, "a@x", "s", cc="b@x") == expected(["a@x", "s", "hi", "b@x"])
    assert key(send, "a@x", "s", None) == expected(["a@x", "s"]), "an explicit None replaces the default"
    assert key(send, "a@x", None) == expected(["a@x", None, "hi"])


def test_star_args_in_their_place_and_kwargs_as_one_object_after_them():
    def log(level, *lines, sep="\n", **fields):
        return None

    assert key(log, "info") == expected(["info", "\n"])
    assert key(log, "info", "a", "b") == expected(["info", "a", "b", "\n"])
    assert key(log, "info", "a", sep=None) == expected(["info", "a"])
    assert key(log, "info", "a", user="ada", n=2) == expected(["info", "a", "\n", {"user": "ada", "n": 2}])
    assert key(log, "info", sep=None, user=None) == expected(["info", None, {"user": None}])


def test_methods_leave_out_their_receiver():
    class Mailer:
        @client.idempotent("vectors.case")
        def send(self, to, subject):
            return None

        @classmethod
        def plain(cls):
            return cls

    mailer = Mailer()
    assert mailer.send.key_of("ada@example.com", "Your ticket #481").key == CASES[0]["key"]
    assert Mailer.send.key_of(mailer, "ada@example.com", "Your ticket #481").key == CASES[0]["key"]
    assert Mailer().send.key_of("ada@example.com", "Your ticket #481") == mailer.send.key_of("ada@example.com", "Your ticket #481")


def test_async_methods_leave_out_their_receiver():
    class Mailer:
        @client.idempotent("vectors.case")
        async def send(self, to, subject):
            return None

    assert Mailer().send.key_of("ada@example.com", "Your ticket #481").key == CASES[0]["key"]


def test_an_explicit_key_still_fingerprints_the_default_arguments(server, tenant):
    """The same key claimed with other arguments is KEY_REUSED; the stored fingerprint is the one
    of the default arguments array."""
    with oncekey.Client(server.target, tenant=tenant) as live:

        @live.idempotent("email.send", key=lambda to: to)
        def send(to: str, subject: str, blob: bytes = b"\x00\x01\x02\xff") -> str:
            return "sent"

        assert send("ada@example.com", "Your ticket #481") == "sent"
        record = live.lookup(send.key_of("ada@example.com", "Your ticket #481"))
        assert record.fingerprint == oncekey.fingerprint(["ada@example.com", "Your ticket #481", "AAEC/w=="])
        with pytest.raises(oncekey.KeyReused):
            send("ada@example.com", "Another subject")

        with pytest.raises(InexactNumber) as refused:
            send("ada@example.com", "s", {"id": 2**60})
        assert refused.value.path == "$[2].id"

        async def main():
            async with oncekey.AsyncClient(server.target, tenant=tenant) as aclient:

                @aclient.idempotent("email.send", key=lambda to: to)
                async def send_async(to: str, subject: str, blob: bytes = b"\x00\x01\x02\xff") -> str:
                    return "other"

                return await send_async.detailed("ada@example.com", "Your ticket #481")

        done = asyncio.run(main())
        assert (done.value, done.replayed) == ("sent", True), "one operation from either wrapper"
