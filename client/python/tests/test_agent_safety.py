"""Agent safety (docs/api.md "Agent safety", docs/agents.md "Intent guard and run budgets"): the
intent guard (``intent_guard``, ``intent_window``, ``repeat_intent``; ``DuplicateIntent``,
``Done.intent_matches``, ``list_duplicate_intents``) and run budgets (``budget=RunBudget(...)``;
``BudgetExhausted``, ``Record.budget``). The mappings to and from the wire first, then against the
real server, started with ``--intent-guard 'guarded.*=refuse'``."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import pathlib
import subprocess
import sys
import time
import uuid

import grpc
import pytest
from conftest import Server
from google.protobuf import any_pb2
from google.rpc import error_details_pb2
from test_errors import FakeCall

import oncekey
from oncekey import (
    BudgetExhausted,
    BudgetUsage,
    DuplicateIntent,
    DuplicateIntentGroup,
    IntentGuard,
    IntentMatch,
    OperationKey,
    RecordStatus,
    RunBudget,
)
from oncekey import _core
from oncekey.errors import classify
from oncekey.listing import duplicates_page_of, duplicates_request
from oncekey.retry import RetryPolicy
from oncekey.types import Claimed, Outcome, Record
from oncekey.v1 import ledger_pb2 as pb

GUARD = ("--intent-guard", "guarded.*=refuse")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# The mappings (no server).


def test_options_take_the_intent_guard_and_a_budget_and_refuse_bad_values_before_sending():
    options = _core.Options(intent_guard="refuse", intent_window=90, repeat_intent=True, budget={"max_children": 3})
    assert options.intent_guard is IntentGuard.REFUSE and options.intent_window == 90.0
    assert options.budget == RunBudget(max_children=3)
    assert _core.Options(intent_guard=IntentGuard.WARN).intent_guard is IntentGuard.WARN
    assert _core.Options().intent_guard is None and _core.Options().budget is None
    for bad in ("REFUSE", "strict", 2):
        with pytest.raises(ValueError, match="intent_guard"):
            _core.Options(intent_guard=bad)  # type: ignore[arg-type]
    for window in (0, 0.5, 86400.5, -1):
        with pytest.raises(ValueError, match="intent_window"):
            _core.Options(intent_window=window)
    with pytest.raises(TypeError, match="intent_window"):
        _core.Options(intent_window=True)
    with pytest.raises(TypeError, match="repeat_intent"):
        _core.Options(repeat_intent="yes")  # type: ignore[arg-type]
    assert _core.Options(intent_window=1).intent_window == 1.0 and _core.Options(intent_window=86400).intent_window == 86400.0


def test_run_budgets_are_checked_as_the_wire_carries_them():
    budget = RunBudget(max_children=8, max_per_namespace={"email.send": 2})
    assert RunBudget.of({"max_children": 8, "max_per_namespace": {"email.send": 2}}) == budget
    assert RunBudget.of(budget) is budget
    assert RunBudget.of({"max_per_namespace": {"email.send": 2}}) == RunBudget(0, {"email.send": 2})
    caps = {"email.send": 2}
    copied = RunBudget(max_per_namespace=caps)
    caps["email.send"] = 9
    assert copied.max_per_namespace == {"email.send": 2}, "the budget keeps a copy"
    with pytest.raises(ValueError, match="unknown field"):
        RunBudget.of({"children": 1})
    with pytest.raises(TypeError):
        RunBudget.of([("max_children", 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_children"):
        RunBudget(max_children=True)
    with pytest.raises(ValueError, match="max_children"):
        RunBudget(max_children=-1)
    with pytest.raises(ValueError, match="max_per_namespace"):
        RunBudget(max_per_namespace={"email.send": 2**32})
    with pytest.raises(TypeError, match="max_per_namespace"):
        RunBudget(max_per_namespace={"email.send": "2"})  # type: ignore[dict-item]
    assert budget.to_wire() == pb.RunBudget(max_children=8, max_per_namespace={"email.send": 2})
    assert RunBudget.from_wire(budget.to_wire()) == budget


def test_a_claim_request_carries_the_intent_guard_and_the_budget():
    key = OperationKey("email.send", "k")
    options = _core.Options(intent_guard="warn", intent_window=600, repeat_intent=True, budget=RunBudget(4, {"a.b": 1}))
    request = _core.claim_request(key, b"\0" * 32, options, "me")
    assert request.intent_guard == pb.INTENT_GUARD_WARN and request.repeat_intent is True
    assert request.intent_window.ToTimedelta() == dt.timedelta(minutes=10)
    assert request.budget == pb.RunBudget(max_children=4, max_per_namespace={"a.b": 1})
    plain = _core.claim_request(key, b"\0" * 32, _core.Options(), "me")
    assert plain.intent_guard == pb.INTENT_GUARD_UNSPECIFIED and not plain.HasField("intent_window")
    assert not plain.HasField("budget") and plain.repeat_intent is False
    for mode, wire in (("off", pb.INTENT_GUARD_OFF), ("refuse", pb.INTENT_GUARD_REFUSE)):
        assert _core.claim_request(key, b"", _core.Options(intent_guard=mode), "me").intent_guard == wire


def test_claim_refuses_an_intent_window_out_of_range_before_sending():
    # Nothing listens there: the check happens before any request.
    with oncekey.Client("127.0.0.1:1", retry=RetryPolicy.never()) as client:
        with pytest.raises(ValueError, match="intent_window"):
            client.claim(OperationKey("email.send", "k"), [1], intent_window=0.5)
        with pytest.raises(ValueError, match="intent_guard"):
            client.claim(OperationKey("email.send", "k"), [1], intent_guard="loud")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="intent_window"):
            client.run(OperationKey("email.send", "k"), [1], lambda lease: None, intent_window=86401)
        with pytest.raises(ValueError, match="unknown field"):
            client.idempotent("email.send", budget={"max": 1})


def _match(key: str, status: int, refused: bool = False) -> pb.IntentMatch:
    m = pb.IntentMatch(key=key, status=status, refused=refused)
    m.claimed_at.FromDatetime(dt.datetime(2030, 1, 2, 3, 4, 5))
    return m


def test_claim_answers_and_records_read_into_plain_types():
    response = pb.ClaimResponse(
        outcome=pb.CLAIM_OUTCOME_DUPLICATE_INTENT,
        intent_matches=[_match("k1", pb.RECORD_STATUS_SUCCEEDED), _match("k0", pb.RECORD_STATUS_UNSPECIFIED, True)],
    )
    claimed = Claimed.from_wire(response)
    assert claimed.outcome is Outcome.DUPLICATE_INTENT
    when = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    assert claimed.intent_matches == (
        IntentMatch("k1", RecordStatus.SUCCEEDED, when, False),
        IntentMatch("k0", RecordStatus.UNSPECIFIED, when, True),
    )
    assert Claimed.from_wire(pb.ClaimResponse(outcome=pb.CLAIM_OUTCOME_ACQUIRED)).intent_matches == ()

    record = pb.Record(namespace="agent.run", key="r1", status=pb.RECORD_STATUS_PROCESSING)
    assert Record.from_wire(record).budget is None
    record.budget.CopyFrom(
        pb.BudgetUsage(
            budget=pb.RunBudget(max_children=5, max_per_namespace={"email.send": 2}),
            children=3,
            children_per_namespace={"email.send": 2, "agent.run": 1},
            refused=4,
        )
    )
    assert Record.from_wire(record).budget == BudgetUsage(
        budget=RunBudget(5, {"email.send": 2}), children=3, children_per_namespace={"email.send": 2, "agent.run": 1}, refused=4
    )


def test_a_refused_claim_raises_duplicate_intent_naming_the_other_keys():
    key = OperationKey("email.send", "k2")
    claimed = Claimed.from_wire(
        pb.ClaimResponse(outcome=pb.CLAIM_OUTCOME_DUPLICATE_INTENT, intent_matches=[_match("k1", pb.RECORD_STATUS_PROCESSING)])
    )
    with pytest.raises(DuplicateIntent) as refused:
        _core.after_claim(claimed, "me", 10.0, None, key)
    e = refused.value
    assert (e.namespace, e.key, e.keys) == ("email.send", "k2", ("k1",))
    assert e.matches[0].status is RecordStatus.PROCESSING
    assert "k1 (PROCESSING)" in str(e) and "repeat_intent" in str(e)
    assert isinstance(e, oncekey.Error) and e.code is None and e.reason is None


def _budget_error(code: grpc.StatusCode, metadata: dict[str, str]) -> FakeCall:
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason="BUDGET_EXHAUSTED", domain="oncekey", metadata=metadata))
    return FakeCall(code, "the parent operation's run budget is spent (max_children: 2 of 2)", [detail])


def test_budget_exhausted_carries_the_error_info_metadata_and_is_never_retried():
    metadata = {"parent_namespace": "agent.run", "parent_key": "r1", "limit": "max_children", "spent": "2", "max": "2"}
    call = _budget_error(grpc.StatusCode.FAILED_PRECONDITION, metadata)
    e = classify(call)
    assert isinstance(e, BudgetExhausted) and isinstance(e, oncekey.RpcError)
    assert (e.parent_namespace, e.parent_key, e.limit, e.spent, e.max) == ("agent.run", "r1", "max_children", 2, 2)
    assert e.parent == OperationKey("agent.run", "r1") and e.limit == BudgetExhausted.MAX_CHILDREN
    assert e.code is grpc.StatusCode.FAILED_PRECONDITION and e.reason == "BUDGET_EXHAUSTED"
    assert RetryPolicy().delay(call, 1) is None
    # Whatever the code it came with: a spent budget stays spent.
    odd = _budget_error(grpc.StatusCode.UNAVAILABLE, {**metadata, "limit": "email.send", "spent": "x"})
    assert RetryPolicy().delay(odd, 1) is None
    typed = classify(odd)
    assert isinstance(typed, BudgetExhausted) and (typed.limit, typed.spent, typed.max) == ("email.send", 0, 2)
    # Without metadata (an older server): the fields are empty, the error still typed.
    bare = FakeCall(grpc.StatusCode.FAILED_PRECONDITION, "spent", [_info_only("BUDGET_EXHAUSTED")])
    plain = classify(bare)
    assert isinstance(plain, BudgetExhausted) and plain.parent is None and (plain.limit, plain.spent, plain.max) == ("", 0, 0)


def _info_only(why: str) -> any_pb2.Any:
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=why, domain="oncekey"))
    return detail


def test_explain_tells_an_agent_what_a_duplicate_intent_and_a_spent_budget_mean():
    when = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    dup = DuplicateIntent("email.send", "k2", [IntentMatch("k1", RecordStatus.SUCCEEDED, when)])
    text = oncekey.explain(dup)
    assert "Nothing was done" in text and "k1 (SUCCEEDED)" in text and "DUPLICATE_INTENT" in text
    assert "new key" in text and "repeat_intent" in text
    spent = BudgetExhausted(
        grpc.StatusCode.FAILED_PRECONDITION, "spent", parent_namespace="agent.run", parent_key="r1",
        limit="email.send", spent=3, max=3,
    )  # fmt: skip
    text = oncekey.explain(spent)
    assert "Nothing was done" in text and "email.send actions" in text and "3 of 3 used" in text
    assert "agent.run/r1" in text and "Do not retry" in text and "BUDGET_EXHAUSTED" in text
    assert "child actions in all" in oncekey.explain(BudgetExhausted(limit="max_children", spent=2, max=2))


def test_duplicate_intent_listing_requests_and_pages():
    request = duplicates_request("email.send", 50, "tok")
    assert (request.namespace, request.page_size, request.page_token) == ("email.send", 50, "tok")
    assert duplicates_request(None, None, None) == pb.ListDuplicateIntentsRequest()
    with pytest.raises(ValueError, match="page_size"):
        duplicates_request(None, 1001, None)
    with pytest.raises(TypeError, match="page_size"):
        duplicates_request(None, True, None)  # type: ignore[arg-type]
    with pytest.raises(oncekey.InvalidKey):
        duplicates_request("Not A Namespace!", None, None)
    response = pb.ListDuplicateIntentsResponse(
        intents=[pb.DuplicateIntent(namespace="email.send", fingerprint=b"\1" * 32, claims=[_match("a", 2), _match("b", 0, True)])],
        next_page_token="next",
    )
    page = duplicates_page_of(response)
    assert page.next_page_token == "next" and len(page.intents) == 1
    group = page.intents[0]
    assert isinstance(group, DuplicateIntentGroup) and group.keys == ("a", "b") and group.fingerprint == b"\1" * 32
    assert group.claims[1].refused and duplicates_page_of(pb.ListDuplicateIntentsResponse()).next_page_token is None


# Against the real server.


@pytest.fixture
def guarded(tmp_path):
    """A server whose ``guarded.*`` namespaces refuse duplicate intents."""
    s = Server(tmp_path / "data", GUARD).start()
    yield s
    s.kill()


def eventually(read, done, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if done(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_refuse_raises_duplicate_intent_and_runs_nothing_until_the_repeat_is_deliberate(guarded, tenant):
    sent: list[str] = []
    with oncekey.Client(guarded.target, tenant=tenant) as client:

        @client.idempotent("guarded.email", key=lambda to, call_id: call_id, arguments=lambda to: [to])
        def send(to: str, call_id: str) -> str:
            sent.append(call_id)
            return f"sent {call_id}"

        assert send("ada@example.com", "call-1") == "sent call-1"
        # The agent made up a new key for the retry: refused, nothing runs, nothing is written.
        with pytest.raises(DuplicateIntent) as refused:
            send("ada@example.com", "call-2")
        e = refused.value
        assert (e.namespace, e.key, e.keys) == ("guarded.email", "call-2", ("call-1",))
        assert e.matches[0].status is RecordStatus.SUCCEEDED and not e.matches[0].refused
        assert isinstance(e.matches[0].claimed_at, dt.datetime)
        assert sent == ["call-1"] and client.lookup(OperationKey("guarded.email", "call-2")) is None
        # A retry of the first key is never checked: it replays.
        assert send.detailed("ada@example.com", "call-1").replayed
        # Other arguments are another intent.
        assert send("bo@example.com", "call-3") == "sent call-3"

        # A deliberate repeat runs, and says what it repeats.
        done = client.run(OperationKey("guarded.email", "call-4"), ["ada@example.com"], lambda lease: "again", repeat_intent=True)
        assert done.value == "again" and not done.replayed
        # The live keys (the refused call-2 has no record, so it is not one).
        assert [(m.key, m.status, m.refused) for m in done.intent_matches] == [("call-1", RecordStatus.SUCCEEDED, False)]

        # client.claim answers the outcome instead of raising.
        claimed = client.claim(OperationKey("guarded.email", "call-5"), ["ada@example.com"])
        assert claimed.outcome is Outcome.DUPLICATE_INTENT and claimed.lease is None
        assert [m.key for m in claimed.intent_matches] == ["call-4", "call-1"]  # most recent first
        assert all(isinstance(m, IntentMatch) for m in claimed.intent_matches)

        # The guard saw the pair (and the refused keys), listed oldest first.
        def groups():
            return [g for g in client.list_duplicate_intents("guarded.email") if "call-1" in g.keys]

        listed = eventually(groups, lambda g: len(g) == 1 and "call-5" in g[0].keys)
        assert len(listed) == 1
        group = listed[0]
        assert group.namespace == "guarded.email" and group.fingerprint == oncekey.fingerprint(["ada@example.com"])
        assert group.keys[0] == "call-1" and {"call-2", "call-4", "call-5"} <= set(group.keys)
        refused_keys = {c.key for c in group.claims if c.refused}
        assert refused_keys == {"call-2", "call-5"}
        assert [g.keys for g in client.list_duplicate_intents(page_size=1) if "call-1" in g.keys] == [group.keys]
        assert list(client.list_duplicate_intents("guarded.other")) == []
    assert sent == ["call-1", "call-3"]


def test_the_claim_field_turns_the_guard_on_where_the_server_has_none(server, tenant):
    ran: list[str] = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        def run(key: str, **options):
            return client.run(OperationKey("tickets.open", key), {"title": "printer"}, lambda lease: ran.append(key) or key, **options)

        assert run("a").intent_matches == ()
        # Unguarded ("off": nothing checked, nothing indexed): a new key simply runs, unflagged.
        assert run("b").intent_matches == ()
        # warn: runs; the next key claimed with warn is named to the one after it.
        assert run("c", intent_guard="warn").intent_matches == ()
        warned = run("d", intent_guard="warn")
        assert warned.value == "d" and [(m.key, m.status, m.refused) for m in warned.intent_matches] == [
            ("c", RecordStatus.SUCCEEDED, False)
        ]
        # refuse with a window of its own: nothing runs.
        with pytest.raises(DuplicateIntent) as refused:
            run("e", intent_guard=IntentGuard.REFUSE, intent_window=3600)
        assert refused.value.keys == ("d", "c")  # most recent first
        assert ran == ["a", "b", "c", "d"]
        # The replay of a key that exists is never checked, and carries no matches.
        replay = run("d", intent_guard="refuse")
        assert replay.replayed and replay.intent_matches == ()


def test_a_budget_of_two_refuses_the_third_new_child_but_not_a_retry(server, tenant):
    ran: list[str] = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        def child(key: OperationKey) -> oncekey.Done:
            return client.run(key, {"step": key.key}, lambda lease: ran.append(key.key) or key.key)

        run_key = OperationKey("agent.run", unique("run"))
        parent = client.claim(run_key, budget=RunBudget(max_children=2))
        assert parent.outcome is Outcome.ACQUIRED
        first = child(run_key.child("plan"))
        child(run_key.child("search"))
        with pytest.raises(BudgetExhausted) as total:
            child(run_key.child("act"))
        e = total.value
        assert (e.parent_namespace, e.parent_key, e.limit, e.spent, e.max) == ("agent.run", run_key.key, "max_children", 2, 2)
        assert e.parent == run_key and "BUDGET_EXHAUSTED" in str(e) and "Do not retry" in oncekey.explain(e)
        # A retry of an existing child is not a new child: it replays.
        again = child(run_key.child("plan"))
        assert again.replayed and again.value == first.value
        assert ran == [run_key.child("plan").key, run_key.child("search").key]
        assert client.lookup(run_key.child("act")) is None

        usage = client.lookup(run_key).budget
        assert isinstance(usage, BudgetUsage)
        assert usage.budget == RunBudget(max_children=2)
        # Refused once: the client did not retry the refused Claim.
        assert (usage.children, usage.refused, usage.children_per_namespace) == (2, 1, {"agent.run": 2})

        # A cap per child namespace.
        run_key = OperationKey("agent.run", unique("run"))
        client.claim(run_key, budget={"max_per_namespace": {"email.send": 1}})
        child(run_key.child_in("email.send", "notify"))
        child(run_key.child("plan"))
        with pytest.raises(BudgetExhausted) as per_namespace:
            child(run_key.child_in("email.send", "notify-again"))
        e = per_namespace.value
        assert (e.parent, e.limit, e.spent, e.max) == (run_key, "email.send", 1, 1)
        usage = client.lookup(run_key).budget
        assert usage is not None and usage.budget == RunBudget(0, {"email.send": 1})
        assert (usage.children, usage.refused, usage.children_per_namespace) == (2, 1, {"email.send": 1, "agent.run": 1})


def test_a_decorated_parent_sets_its_budget_from_the_decorator_options(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        tools: list[str] = []

        @client.idempotent("agent.run", key=lambda run_id: run_id, budget={"max_children": 1})
        def agent(run_id: str) -> list[str]:
            parent = oncekey.current_lease().key
            for tool in ("search", "search-again"):
                try:
                    client.run(parent.child(tool), [tool], lambda lease: tools.append(tool))
                except BudgetExhausted as e:
                    return [*tools, f"stopped: {e.limit} {e.spent}/{e.max}"]
            return tools

        run_id = unique("run")
        assert agent(run_id) == ["search", "stopped: max_children 1/1"]
        record = client.lookup(OperationKey("agent.run", run_id))
        assert record is not None and record.budget is not None
        assert (record.budget.budget.max_children, record.budget.children, record.budget.refused) == (1, 1, 1)


def test_sagas_run_in_a_guarded_namespace_and_take_a_run_budget(guarded, tenant):
    with oncekey.Client(guarded.target, tenant=tenant) as client:
        # Every saga's own Claim carries its own arguments ({"saga": KEY}): not a repeat.
        for i in range(3):
            key = OperationKey("guarded.trips", unique("trip"))
            assert client.saga(key, budget=RunBudget(max_children=4)).run(lambda saga: saga.step("book", lambda n: n, i)) == i
            record = client.lookup(key)
            assert record is not None and record.budget is not None and record.budget.children == 1


def test_rollbacks_in_a_guarded_namespace_are_never_refused(guarded, tenant):
    """Two sagas whose steps return the same output (None): their compensations have the same
    arguments, yet each rollback runs (a compensation is a deliberate repeat, never a made-up key)."""
    undone: list[int] = []

    def declined() -> None:
        raise ValueError("card declined")

    with oncekey.Client(guarded.target, tenant=tenant) as client:
        for i in range(2):
            key = OperationKey("guarded.trips", unique("trip"))

            def body(saga: oncekey.Saga, i: int = i) -> None:
                saga.step("hold", lambda n: None, i, compensate=lambda _out, i=i: undone.append(i))
                saga.step("charge", declined)

            with pytest.raises(oncekey.SagaRolledBack):
                client.saga(key).run(body)
    assert undone == [0, 1]


def test_the_async_client_guards_intents_budgets_and_lists(guarded, tenant):
    async def main() -> None:
        async with oncekey.AsyncClient(guarded.target, tenant=tenant) as client:

            @client.idempotent("guarded.charge", key=lambda order, call_id: call_id, arguments=lambda order: [order])
            async def charge(order: str, call_id: str) -> str:
                return f"charged {order}"

            assert await charge("o-1", "c-1") == "charged o-1"
            with pytest.raises(DuplicateIntent) as refused:
                await charge("o-1", "c-2")
            assert refused.value.keys == ("c-1",)
            done = await client.run(OperationKey("guarded.charge", "c-3"), ["o-1"], _async_value("again"), repeat_intent=True)
            assert done.value == "again" and "c-1" in {m.key for m in done.intent_matches}
            claimed = await client.claim(OperationKey("guarded.charge", "c-4"), ["o-1"], intent_window=7200)
            assert claimed.outcome is Outcome.DUPLICATE_INTENT

            listed: list[DuplicateIntentGroup] = []
            deadline = time.monotonic() + 15
            while not listed and time.monotonic() < deadline:
                listed = [g async for g in client.list_duplicate_intents(namespace="guarded.charge", page_size=10)]
                if not listed:
                    await asyncio.sleep(0.2)
            assert len(listed) == 1 and listed[0].keys[0] == "c-1" and {"c-2", "c-3", "c-4"} <= set(listed[0].keys)
            page = await client.list_duplicate_intents_page(namespace="guarded.charge")
            assert [g.keys for g in page.intents] == [listed[0].keys]

            run_key = OperationKey("agent.run", unique("run"))
            await client.claim(run_key, budget={"max_children": 1})
            await client.run(run_key.child("one"), [1], _async_value(1))
            with pytest.raises(BudgetExhausted) as spent:
                await client.run(run_key.child("two"), [2], _async_value(2))
            assert (spent.value.parent, spent.value.spent, spent.value.max) == (run_key, 1, 1)
            assert (await client.run(run_key.child("one"), [1], _async_value(1))).replayed
            record = await client.lookup(run_key)
            assert record is not None and record.budget is not None and (record.budget.children, record.budget.refused) == (1, 1)

    asyncio.run(main())


def _async_value(value):
    async def fn(lease):
        return value

    return fn


def test_an_unguarded_window_check_refuses_out_of_range_windows_on_the_server_too(server, tenant):
    """The client's range is the server's: the bounds themselves are accepted."""
    with oncekey.Client(server.target, tenant=tenant) as client:
        for window in (1, 86400):
            claimed = client.claim(OperationKey("tickets.open", unique("t")), [window], intent_guard="warn", intent_window=window)
            assert claimed.outcome is Outcome.ACQUIRED


def test_the_readme_example_runs_as_written(server, tenant, tmp_path):
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    code = readme.split("## Intent guard and run budgets", 1)[1].split("```python\n", 1)[1].split("```\n", 1)[0]
    assert 'oncekey.Client("127.0.0.1:50051", tenant="demo")' in code
    script = tmp_path / "agent_safety.py"
    script.write_text(code.replace('"127.0.0.1:50051", tenant="demo"', f'"{server.target}", tenant="{tenant}"'))
    src = str(pathlib.Path(__file__).parents[1] / "src")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": src})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    ticket = lines[2].removeprefix("refused: already claimed as ").removesuffix("-call-1 (SUCCEEDED)")
    assert ticket.startswith("ticket-")
    assert lines == [
        "sending to ada@example.com",
        "sent",
        f"refused: already claimed as {ticket}-call-1 (SUCCEEDED)",
        "['look-up', 'draft', 'stopped at send: max_children 2/2']",
        "2",
    ]
