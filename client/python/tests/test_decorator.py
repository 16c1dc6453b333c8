"""``@client.idempotent`` on sync and async functions against the real server: one effect per key,
replays, native values in and out, typed errors, dispositions, waiting for an in-flight duplicate,
at-most-once and reconciliation."""

import asyncio
import dataclasses
import threading

import pydantic
import pytest

import oncekey
from oncekey import OperationKey, RecordStatus


@dataclasses.dataclass
class Email:
    to: str
    subject: str


@dataclasses.dataclass
class Receipt:
    message_id: str
    recipients: list[str]


class Charge(pydantic.BaseModel):
    order: str
    cents: int


class Charged(pydantic.BaseModel):
    charge_id: str
    cents: int


def test_sync_function_runs_once_and_replays_its_result(server, tenant):
    sent = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        @client.idempotent("email.send", key=lambda to, subject: f"{to}:{subject}")
        def send_email(to: str, subject: str, body: str) -> dict:
            sent.append(to)
            return {"id": f"msg-{len(sent)}", "token": oncekey.current_lease().token}

        first = send_email("ada@example.com", "Welcome", "Hi Ada")
        again = send_email("ada@example.com", "Welcome", "Hi Ada")
        assert first == again == {"id": "msg-1", "token": 1}
        assert sent == ["ada@example.com"]
        assert send_email.detailed("ada@example.com", "Welcome", "Hi Ada").replayed is True
        assert send_email.__name__ == "send_email" and "body" in str(__import__("inspect").signature(send_email))

        record = client.lookup(send_email.key_of("ada@example.com", "Welcome", "Hi Ada"))
        assert record.status is RecordStatus.SUCCEEDED and record.key == "ada@example.com:Welcome"
        assert record.dedup_hits == 2

        # Same key, other arguments: the key is not stable for one intent.
        with pytest.raises(oncekey.KeyReused):
            send_email("ada@example.com", "Welcome", "Hi again")
        assert sent == ["ada@example.com"]


def test_async_function_runs_once_with_either_client(server, tenant):
    sent = []

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            @client.idempotent("email.send", key=lambda to: to)
            async def send_email(to: str) -> dict:
                await asyncio.sleep(0.01)
                sent.append(to)
                return {"to": to}

            assert await send_email("a@x") == await send_email("a@x") == {"to": "a@x"}

        with oncekey.Client(server.target, tenant=tenant) as sync_client:

            @sync_client.idempotent("email.send", key=lambda to: to)
            async def send_again(to: str) -> dict:
                sent.append(to)
                return {"to": to}

            done = await send_again.detailed("a@x")
            assert done.replayed and done.value == {"to": "a@x"}

    asyncio.run(main())
    assert sent == ["a@x"]


def test_dataclasses_and_pydantic_models_in_and_out(server, tenant):
    calls = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        @client.idempotent("email.send", key=lambda email: (email.to, email.subject, "v1"))
        def send(email: Email) -> Receipt:
            calls.append(email)
            return Receipt("m-1", [email.to])

        @client.idempotent("payments.charge", key=lambda charge: charge.order)
        def charge(charge: Charge) -> Charged:
            calls.append(charge)
            return Charged(charge_id="ch-1", cents=charge.cents)

        email = Email("b@x", "Hello")
        assert send(email) == send(email) == Receipt("m-1", ["b@x"])
        assert isinstance(send(email), Receipt), "the replay is decoded into the annotated type"
        assert send.key_of(email).key == "b@x:Hello:v1"
        assert charge(Charge(order="o-9", cents=1250)) == charge(Charge(order="o-9", cents=1250))
        assert isinstance(charge(Charge(order="o-9", cents=1250)), Charged)
        assert len(calls) == 2


def test_default_key_is_a_hash_of_the_arguments(server, tenant):
    calls = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        @client.idempotent("tasks.create")
        def create(title: str, assignee: str = "nobody") -> str:
            calls.append(title)
            return title.upper()

        assert create("fix it") == create("fix it", assignee="nobody") == "FIX IT"
        assert create("other") == "OTHER"
        assert calls == ["fix it", "other"]
        assert create.key_of("fix it").key.startswith("sha256:")


def test_methods_fingerprint_their_arguments_not_the_instance(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:

        class Mailer:
            def __init__(self):
                self.sent = 0

            @client.idempotent("email.send", key=lambda to: f"mailer:{to}")
            def send(self, to: str) -> int:
                self.sent += 1
                return self.sent

        a, b = Mailer(), Mailer()
        assert a.send("e@x") == b.send("e@x") == 1
        assert (a.sent, b.sent) == (1, 0), "another instance replays the same operation"


def test_the_callers_own_exception_is_raised_and_the_key_released_for_a_retry(server, tenant):
    attempts = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        @client.idempotent("email.send", key=lambda to: to)
        def send(to: str) -> str:
            attempts.append(to)
            if len(attempts) == 1:
                raise ConnectionError("smtp down")
            return "sent"

        with pytest.raises(ConnectionError, match="smtp down"):
            send("c@x")
        assert client.lookup(send.key_of("c@x")).status is RecordStatus.RETRY
        assert send("c@x") == "sent"
        assert len(attempts) == 2
        assert client.lookup(send.key_of("c@x")).fencing_token == 2


def test_final_errors_are_replayed_and_abandon_forgets_the_key(server, tenant):
    calls = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        @client.idempotent("payments.charge", key=lambda order: order, final=(PermissionError,), abandon=(ValueError,))
        def charge(order: str, cents: int) -> str:
            calls.append(order)
            if cents < 0:
                raise ValueError("negative amount")
            if order == "declined":
                raise PermissionError("card declined")
            if order == "final":
                raise oncekey.FinalError("insufficient funds", code=402)
            return "ok"

        with pytest.raises(PermissionError):
            charge("declined", 100)
        with pytest.raises(oncekey.OperationFailed) as failed:
            charge("declined", 100)
        assert "card declined" in failed.value.error.message
        with pytest.raises(oncekey.FinalError):
            charge("final", 100)
        with pytest.raises(oncekey.OperationFailed) as failed:
            charge("final", 100)
        assert (failed.value.error.code, failed.value.error.message) == (402, "insufficient funds")

        with pytest.raises(ValueError):
            charge("o-1", -5)
        assert client.lookup(charge.key_of("o-1", -5)) is None, "abandoned: forgotten"
        assert charge("o-1", 500) == "ok", "the key may be claimed again, even with other arguments"
        assert calls == ["declined", "final", "o-1", "o-1"]


def test_a_duplicate_waits_for_the_call_in_flight_and_gets_its_result(server, tenant):
    release = threading.Event()
    calls = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        @client.idempotent("reports.build", key=lambda n: str(n))
        def build(n: int) -> int:
            calls.append(n)
            release.wait(30)
            return n * 2

        @client.idempotent("reports.build", key=lambda n: str(n), wait=0)
        def build_no_wait(n: int) -> int:
            return -1

        first = threading.Thread(target=build, args=(21,))
        first.start()
        while not calls:
            threading.Event().wait(0.01)
        with pytest.raises(oncekey.InProgress) as e:
            build_no_wait(21)
        assert e.value.retry_after > 0
        threading.Timer(0.5, release.set).start()
        assert build(21) == 42, "the duplicate waited and got the holder's result"
        first.join()
        assert calls == [21]


def test_at_most_once_needs_reconciliation_after_a_lost_holder(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        key = OperationKey.of("payments.charge", "order-7", "v1")
        # A holder that vanished: acquired, never settled, lease run out.
        claimed = client.claim(key, ["order-7"], semantics=oncekey.Semantics.AT_MOST_ONCE, lease_ttl=1.0)
        assert claimed.outcome is oncekey.Outcome.ACQUIRED
        threading.Event().wait(1.5)

        @client.idempotent("payments.charge", key=lambda order: key, semantics=oncekey.Semantics.AT_MOST_ONCE)
        def charge(order: str) -> dict:
            raise AssertionError("an at-most-once effect must not run again")

        with pytest.raises(oncekey.NeedsReconciliation):
            charge("order-7")
        # The reconciler looks the charge up by the key and records what it found.
        assert charge.reconcile(lambda order: {"found": f"ch-{order}"}, "order-7") == {"found": "ch-order-7"}
        assert client.lookup(key).status is RecordStatus.SUCCEEDED
        assert charge("order-7") == {"found": "ch-order-7"}


def test_child_keys_record_their_parent(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        order = OperationKey.of("orders.place", "order-9", "v2")
        charge = order.child_in("payments.charge", "charge")
        client.run(charge, {"cents": 5}, lambda lease: "ok")
        record = client.lookup(charge)
        assert record.key == "order-9:v2/charge"
        assert record.parent == ("orders.place", "order-9:v2")


def test_bad_input_is_refused_with_the_field(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        with pytest.raises(oncekey.RpcError) as e:
            client.run(OperationKey("a.b", "k"), {}, lambda lease: 1, lease_ttl=0.1)
        assert e.value.reason == "INVALID_FIELD" and e.value.field == "lease_ttl"
        with pytest.raises(oncekey.InvalidKey):
            OperationKey("Bad Namespace", "k")
        with pytest.raises(oncekey.EncodeError):
            client.run(OperationKey("a.b", "k"), {"when": object()}, lambda lease: 1)


def test_frameworks_see_the_original_signature_and_an_async_callable():
    """MCP servers, FastAPI and agent tool registries read the signature and await async tools."""
    import inspect

    from mcp.server.mcpserver import MCPServer

    client = oncekey.Client("127.0.0.1:1")

    @client.idempotent("email.send", key=lambda to: to)
    async def send(to: str, subject: str, body: str = "") -> dict:
        """Sends an email."""
        return {}

    @client.idempotent("email.send", key=lambda to: to)
    def send_sync(to: str, cc: list[str] | None = None) -> dict:
        return {}

    assert str(inspect.signature(send)) == "(to: str, subject: str, body: str = '') -> dict"
    assert str(inspect.signature(send_sync)) == "(to: str, cc: list[str] | None = None) -> dict"
    assert (send.__name__, send.__doc__) == ("send", "Sends an email.")
    assert asyncio.iscoroutinefunction(send) and not asyncio.iscoroutinefunction(send_sync)
    assert isinstance(send, oncekey.AsyncIdempotent) and isinstance(send_sync, oncekey.Idempotent)

    server = MCPServer("t")
    server.tool()(send)
    tools = asyncio.run(server.list_tools())
    assert set(tools[0].input_schema["properties"]) == {"to", "subject", "body"}
    client.close()
