"""Listing against the real server, with the sync and asyncio clients: every page of what the
filters select (namespace, statuses, parent), typed records, the reconciliation loop over listed
UNKNOWN records, approval of listed gated records, and the checks and retries of ListRecords.

A listing may lag a change by a few seconds (docs/api.md, "Listing"): tests wait, bounded, until
what they wrote shows."""

import asyncio
import os
import pathlib
import subprocess
import sys
import time

import grpc
import pytest
from fake import FakeServer, abort

import oncekey
from oncekey import OperationKey, RecordPage, RecordStatus, Semantics
from oncekey.v1 import ledger_pb2 as pb


def eventually(read, want, timeout=30.0):
    """``read()`` once it equals ``want`` (listings lag changes by a few seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        got = read()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.25)


def keys(records):
    return sorted(r.key for r in records)


def test_listing_walks_every_page_of_what_the_filters_select(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        sent = [f"s-{i}" for i in range(7)]
        for key in sent:
            client.run(OperationKey("email.send", key), [key], lambda lease: "sent")
        for key in ("r-1", "r-2"):
            with pytest.raises(ConnectionError):
                client.run(OperationKey("email.send", key), [key], lambda lease: (_ for _ in ()).throw(ConnectionError("down")))
        order = OperationKey("orders.place", "o-1")
        client.run(order.child_in("payments.charge", "charge"), [], lambda lease: "charged")

        listed = eventually(lambda: keys(client.list_records(namespace="email.send", statuses=[RecordStatus.SUCCEEDED], page_size=3)), sent)
        assert listed == sent
        records = list(client.list_records(namespace="email.send", statuses=["RETRY"]))
        assert keys(records) == ["r-1", "r-2"]
        assert all(r.status is RecordStatus.RETRY and r.namespace == "email.send" for r in records)
        assert eventually(lambda: len(list(client.list_records(page_size=1))), 10) == 10

        children = list(client.list_records(parent=order))
        assert [r.key for r in children] == ["o-1/charge"] and children[0].parent == ("orders.place", "o-1")
        assert list(client.list_records(parent=("orders.place", "o-2"))) == []

        # Page by page: each page at most page_size records, a token until the last.
        pages, token = [], None
        while True:
            page = client.list_page(namespace="email.send", statuses=[RecordStatus.SUCCEEDED], page_size=3, page_token=token)
            assert isinstance(page, RecordPage) and len(page.records) <= 3
            pages.append(page)
            if page.next_page_token is None:
                break
            token = page.next_page_token
        assert len(pages) >= 3 and keys(r for p in pages for r in p.records) == sent
        first = pages[0].records[0]
        assert first.result is not None and first.result.body == b"", "listed records carry no result body"
        assert client.lookup(first.operation_key).result.body == b'"sent"'


def test_async_listing_walks_every_page(server, tenant):
    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            async def effect(lease):
                return "done"

            wanted = [f"job-{i}" for i in range(5)]
            for key in wanted:
                await client.run(OperationKey("jobs.run", key), [key], effect)
            deadline = time.monotonic() + 30
            while True:
                got = [r.key async for r in client.list_records(namespace="jobs.run", page_size=2)]
                if sorted(got) == wanted or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.25)
            assert sorted(got) == wanted
            page = await client.list_page(namespace="jobs.run", page_size=2)
            assert len(page.records) <= 2 and page.next_page_token is not None

    asyncio.run(main())


def test_the_reconciliation_loop_settles_every_listed_unknown_record(server, tenant):
    """At-most-once holders that vanished mid-effect leave UNKNOWN records; the reconciler lists
    them, checks the outside world by the key, and records what it found."""
    charged_outside = {"order-1": "ch-1"}  # what the payment provider says happened
    with oncekey.Client(server.target, tenant=tenant) as client:
        for order in ("order-1", "order-2"):
            claimed = client.claim(OperationKey("payments.charge", order), [order, 500], semantics=Semantics.AT_MOST_ONCE, lease_ttl=1.0)
            assert claimed.outcome is oncekey.Outcome.ACQUIRED
        unknown = eventually(lambda: keys(client.list_records(statuses=[RecordStatus.UNKNOWN])), ["order-1", "order-2"])
        assert unknown == ["order-1", "order-2"]

        def check(record):
            def look(lease):
                charge = charged_outside.get(record.key)
                if charge is None:
                    raise oncekey.Abandon("never charged: the next run charges it")
                return {"charge": charge}

            return look

        for record in client.list_records(statuses=[RecordStatus.UNKNOWN]):
            if record.key == "order-2":
                with pytest.raises(oncekey.Abandon):
                    client.reconcile(record, check(record))
            else:
                done = client.reconcile(record, check(record))
                assert done.value == {"charge": "ch-1"} and not done.replayed

        assert client.lookup(OperationKey("payments.charge", "order-1")).status is RecordStatus.SUCCEEDED
        assert client.lookup(OperationKey("payments.charge", "order-2")) is None
        assert eventually(lambda: keys(client.list_records(statuses=[RecordStatus.UNKNOWN])), []) == []

        @client.idempotent("payments.charge", key=lambda order: order, semantics=Semantics.AT_MOST_ONCE)
        def charge(order: str, cents: int) -> dict:
            return {"charge": f"new-{order}"}

        assert charge("order-1", 500) == {"charge": "ch-1"}, "replayed from the reconciliation"
        assert charge("order-2", 500) == {"charge": "new-order-2"}, "abandoned: runs now"


def test_listed_gated_operations_are_approved_by_their_fingerprint(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        key = OperationKey("payments.refund", "refund-9")
        client.claim(key, {"cents": 900}, require_approval=True)
        awaiting = eventually(lambda: [r.key for r in client.list_records(statuses=[RecordStatus.AWAITING_APPROVAL])], ["refund-9"])
        assert awaiting == ["refund-9"]
        record = next(client.list_records(statuses=[RecordStatus.AWAITING_APPROVAL]))
        approved = client.approve(record.operation_key, note="ok", fingerprint=record.fingerprint)
        assert approved.status is RecordStatus.APPROVED and record.fingerprint == oncekey.fingerprint({"cents": 900})


def test_filters_are_checked_before_anything_is_sent():
    client = oncekey.Client("127.0.0.1:1")
    with pytest.raises(ValueError, match="page_size"):
        client.list_page(page_size=1001)
    with pytest.raises(ValueError, match="statuses"):
        client.list_page(statuses=[RecordStatus.UNSPECIFIED])
    with pytest.raises(ValueError, match="statuses"):
        client.list_page(statuses=["DONE"])
    with pytest.raises(oncekey.InvalidKey):
        client.list_page(namespace="Not A Namespace")
    client.close()


def test_list_records_is_retried_and_its_errors_are_typed():
    seen = []

    def list_records(request, context, n):
        seen.append(request.SerializeToString())
        if n <= 2:
            abort(context, grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")
        if request.page_token == "":
            return pb.ListRecordsResponse(records=[pb.Record(namespace="a.b", key="1", status=pb.RECORD_STATUS_UNKNOWN)], next_page_token="p2")
        if request.page_token == "p2":
            return pb.ListRecordsResponse(records=[pb.Record(namespace="a.b", key="2", status=pb.RECORD_STATUS_PROCESSING)])
        abort(context, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD")

    fast = oncekey.RetryPolicy(initial_backoff=0.01, max_backoff=0.02)
    with FakeServer({"ListRecords": list_records}) as fake, oncekey.Client(fake.target, retry=fast) as client:
        records = list(client.list_records(namespace="a.b", statuses=[RecordStatus.UNKNOWN, RecordStatus.PROCESSING]))
        assert [(r.key, r.status) for r in records] == [("1", RecordStatus.UNKNOWN), ("2", RecordStatus.PROCESSING)]
        assert fake.ledger.calls["ListRecords"] == 4 and len(set(seen[:3])) == 1, "retried with the identical request"
        sent = pb.ListRecordsRequest.FromString(seen[0])
        assert list(sent.statuses) == [pb.RECORD_STATUS_UNKNOWN, pb.RECORD_STATUS_PROCESSING]
        with pytest.raises(oncekey.InvalidArgument):
            client.list_page(page_token="forged")


def test_the_readme_reconciliation_example_runs_as_written(server, tenant, tmp_path):
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    code = readme.split("## Listing and reconciliation", 1)[1].split("```python\n", 1)[1].split("```\n", 1)[0]
    assert 'oncekey.Client("127.0.0.1:50051", tenant="demo")' in code
    with oncekey.Client(server.target, tenant=tenant) as client:
        for order in ("order-1", "order-2"):  # two at-most-once holders that vanished mid-charge
            client.claim(OperationKey("payments.charge", order), [order], semantics=Semantics.AT_MOST_ONCE, lease_ttl=1.0)
        client.claim(OperationKey("payments.refund", "refund-1"), [900], require_approval=True)
        listed = eventually(lambda: keys(client.list_records(statuses=[RecordStatus.UNKNOWN, RecordStatus.AWAITING_APPROVAL])), ["order-1", "order-2", "refund-1"])
        assert listed == ["order-1", "order-2", "refund-1"]
    script = tmp_path / "reconcile.py"
    script.write_text(code.replace('"127.0.0.1:50051", tenant="demo"', f'"{server.target}", tenant="{tenant}"'))
    src = str(pathlib.Path(__file__).parents[1] / "src")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": src})
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["reconciled order-1", "released order-2", "awaiting approval: payments.refund refund-1"]
    with oncekey.Client(server.target, tenant=tenant) as client:
        assert client.lookup(OperationKey("payments.charge", "order-1")).status is RecordStatus.SUCCEEDED
        assert client.lookup(OperationKey("payments.charge", "order-2")) is None
