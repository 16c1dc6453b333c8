"""The operator features against the real server, with the sync and asyncio clients: the approval
gate (a gated run never runs its function before an approval; a rejection replays as a 403
failure), dry runs that write nothing, the attempt cap that fails a key for good with 429, purge
and its refusal of unsettled at-most-once records, and the typed errors of these calls."""

import asyncio
import os
import pathlib
import subprocess
import sys
import hashlib
import time
import uuid

import pytest

import oncekey
from oncekey import Decision, OperationKey, Outcome, RecordStatus, Semantics
from conftest import Server, fail_reasons


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def test_a_gated_run_awaits_approval_without_running_and_runs_once_approved(server, tenant):
    sent = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        @client.idempotent("payments.refund", key=lambda order: order, require_approval=True, wait=0)
        def refund(order: str, cents: int) -> dict:
            sent.append(order)
            return {"refunded": cents}

        order = unique("order")
        with pytest.raises(oncekey.AwaitingApproval) as awaiting:
            refund(order, 500)
        assert sent == []
        assert awaiting.value.record.status is RecordStatus.AWAITING_APPROVAL
        assert awaiting.value.record.require_approval is True
        with pytest.raises(oncekey.AwaitingApproval):  # still gated: asking again runs nothing
            refund(order, 500)
        assert sent == []

        approved = client.approve("payments.refund", order, "ok: refund approved")
        assert approved.status is RecordStatus.APPROVED
        assert approved.approval.decision is Decision.APPROVED
        assert (approved.approval.decided_by, approved.approval.note) == ("dev", "ok: refund approved")
        # The same decision again is OK (a lost answer is safe to resend).
        assert client.approve(OperationKey("payments.refund", order), note="ok: refund approved").status is RecordStatus.APPROVED

        assert refund(order, 500) == {"refunded": 500}
        assert refund(order, 500) == {"refunded": 500}  # replayed
        assert sent == [order]
        record = client.lookup(refund.key_of(order, 500))
        assert (record.status, record.fencing_token, record.attempt) == (RecordStatus.SUCCEEDED, 1, 1)

        # The operation has moved on: approving (or rejecting) it again is refused, typed.
        with pytest.raises(oncekey.NotAwaitingApproval) as refused:
            client.approve("payments.refund", order)
        assert refused.value.reason == "NOT_AWAITING_APPROVAL" and isinstance(refused.value, oncekey.RpcError)
        with pytest.raises(oncekey.NotAwaitingApproval):
            client.reject("payments.refund", order, "too late")


def test_a_rejected_operation_fails_for_good_with_403_and_the_note(server, tenant):
    calls = []
    with oncekey.Client(server.target, tenant=tenant) as client:
        key = OperationKey("tasks.delete", unique("repo"))
        claimed = client.claim(key, {"repo": "prod"}, require_approval=True)
        assert claimed.outcome is Outcome.AWAITING_APPROVAL and claimed.lease is None

        rejected = client.reject(key, note="not in production", fingerprint=oncekey.fingerprint({"repo": "prod"}))
        assert rejected.status is RecordStatus.FAILED
        assert rejected.approval.decision is Decision.REJECTED
        assert (rejected.error.code, rejected.error.message) == (403, "not in production")

        with pytest.raises(oncekey.OperationFailed) as failed:
            client.run(key, {"repo": "prod"}, lambda lease: calls.append(lease))
        assert (failed.value.error.code, failed.value.error.message) == (403, "not in production")
        assert calls == []
        # A different decision on a decided operation is refused.
        with pytest.raises(oncekey.NotAwaitingApproval):
            client.approve(key)


def test_approving_a_key_that_never_awaited_approval_is_a_typed_error(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        key = OperationKey("email.send", unique("plain"))
        client.run(key, {"to": "ada"}, lambda lease: "sent")
        with pytest.raises(oncekey.NotAwaitingApproval) as e:
            client.approve(key, note="why not")
        assert e.value.code.name == "FAILED_PRECONDITION"
        with pytest.raises(oncekey.RpcError) as absent:
            client.approve("email.send", unique("absent"))
        assert absent.value.code.name == "NOT_FOUND"


def test_async_run_waits_for_the_approval_then_runs_once(server, tenant):
    sent = []

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            @client.idempotent("email.send", key=lambda to: to, require_approval=True, wait=0)
            async def send(to: str) -> str:
                sent.append(to)
                return f"sent to {to}"

            to = unique("ada")
            with pytest.raises(oncekey.AwaitingApproval):
                await send(to)
            assert sent == []

            # A run that waits (wait=30) is held by the server until the approval comes.
            key = send.key_of(to)
            waiting = asyncio.ensure_future(
                client.run(key, [to], lambda lease: send.__wrapped__(to), require_approval=True, wait=30)
            )
            for _ in range(200):  # until the waiting run's Claim is in (its dedup hit is counted)
                if (await client.lookup(key)).dedup_hits >= 2:
                    break
                await asyncio.sleep(0.05)
            assert not waiting.done() and sent == []
            assert (await client.approve(key, note="go")).status is RecordStatus.APPROVED
            done = await waiting
            assert (done.value, done.replayed) == (f"sent to {to}", False)
            assert await send(to) == f"sent to {to}"
            assert sent == [to]
            with pytest.raises(oncekey.NotAwaitingApproval):
                await client.reject(key, "late")

    asyncio.run(main())


def test_a_dry_run_answers_without_writing_anything(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        key = OperationKey("email.send", unique("dry"))
        dry = client.claim(key, {"to": "ada"}, dry_run=True)
        assert (dry.dry_run, dry.outcome, dry.record, dry.lease) == (True, Outcome.ACQUIRED, None, None)
        assert client.lookup(key) is None  # nothing was created

        client.run(key, {"to": "ada"}, lambda lease: "sent")
        before = client.lookup(key)
        dry = client.claim(key, {"to": "ada"}, dry_run=True)
        assert dry.outcome is Outcome.COMPLETED and dry.lease is None
        assert dry.record.status is RecordStatus.SUCCEEDED
        assert client.lookup(key).dedup_hits == before.dedup_hits  # no dedup hit either

    async def gated():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as aclient:
            gate = OperationKey("email.send", unique("dry-gated"))
            await aclient.claim(gate, {"to": "bo"}, require_approval=True)
            dry = await aclient.claim(gate, {"to": "bo"}, dry_run=True)
            assert (dry.dry_run, dry.outcome) == (True, Outcome.AWAITING_APPROVAL)
            assert dry.record.status is RecordStatus.AWAITING_APPROVAL and dry.lease is None

    asyncio.run(gated())


def test_the_attempt_cap_fails_the_key_for_good_with_429(server, tenant):
    runs = []
    with oncekey.Client(server.target, tenant=tenant) as client:

        @client.idempotent("webhook.deliver", key=lambda hook: hook, max_attempts=2)
        def deliver(hook: str) -> str:
            runs.append(hook)
            raise ConnectionError("upstream down")

        hook = unique("hook")
        for _ in range(2):
            with pytest.raises(ConnectionError):  # the function's own error, released for a retry
                deliver(hook)
        with pytest.raises(oncekey.OperationFailed) as exhausted:
            deliver(hook)
        assert (exhausted.value.error.code, exhausted.value.error.message) == (429, "attempts exhausted")
        assert len(runs) == 2
        record = client.lookup(deliver.key_of(hook))
        assert (record.status, record.attempt, record.max_attempts) == (RecordStatus.FAILED, 2, 2)
        with pytest.raises(oncekey.OperationFailed):  # replayed from now on
            deliver(hook)
        assert len(runs) == 2


def test_a_release_saying_nothing_ran_leaves_the_attempt_and_a_plain_one_spends_it(server, tenant):
    """With ``max_attempts=1``: a lease released with ``nothing_ran`` (``release_unused``, or
    ``fail(..., nothing_ran=True)``) is acquired again and its receipt says ``NOTHING_RAN``; released
    by a plain RETRYABLE Fail, the one attempt is spent and the next Claim fails with 429."""
    with oncekey.Client(server.target, tenant=tenant) as client:
        ways = {
            "release_unused": lambda key, token: client.release_unused(key, token, "not started"),
            "fail_nothing_ran": lambda key, token: client.fail(
                key, token, "not started", oncekey.Disposition.RETRYABLE, nothing_ran=True
            ),
            "fail": lambda key, token: client.fail(key, token, "not started", oncekey.Disposition.RETRYABLE),
        }
        for name, release in ways.items():
            key = OperationKey("jobs.run", unique(name))
            first = client.claim(key, {}, max_attempts=1)
            assert first.outcome is Outcome.ACQUIRED and first.lease is not None
            assert release(key, first.lease.token).status is RecordStatus.RETRY
            again = client.claim(key, {}, max_attempts=1)
            if name == "fail":
                assert again.outcome is Outcome.FAILED, name
                assert again.record.error.code == 429
                assert fail_reasons(server.target, tenant, key.namespace, key.key)[0] == ("RETRYABLE", "")
            else:
                assert again.outcome is Outcome.ACQUIRED, name
                assert (again.lease.token, again.record.attempt) == (2, 2)
                assert fail_reasons(server.target, tenant, key.namespace, key.key) == [("RETRYABLE", "NOTHING_RAN")]

    async def main() -> None:
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:
            for name in ("release_unused", "fail_nothing_ran", "fail"):
                key = OperationKey("jobs.run", unique(f"async-{name}"))
                first = await client.claim(key, {}, max_attempts=1)
                assert first.lease is not None
                if name == "release_unused":
                    released = await client.release_unused(key, first.lease.token, "not started")
                else:
                    released = await client.fail(
                        key, first.lease.token, "not started", oncekey.Disposition.RETRYABLE, nothing_ran=name != "fail"
                    )
                assert released is not None and released.status is RecordStatus.RETRY
                again = await client.claim(key, {}, max_attempts=1)
                assert again.outcome is (Outcome.FAILED if name == "fail" else Outcome.ACQUIRED), name
                reason = "" if name == "fail" else "NOTHING_RAN"
                assert fail_reasons(server.target, tenant, key.namespace, key.key)[0] == ("RETRYABLE", reason)

    asyncio.run(main())


def test_the_attempt_cap_is_checked_before_anything_is_sent(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        for bad, kind in [(-1, ValueError), (2**32, ValueError), ("3", TypeError), (2.0, TypeError), (True, TypeError)]:
            with pytest.raises(kind, match="max_attempts"):
                client.idempotent("x.y", max_attempts=bad)
            with pytest.raises(kind, match="max_attempts"):
                client.claim(OperationKey("x.y", "k"), {}, max_attempts=bad)
        with pytest.raises(ValueError, match="note"):
            client.approve("x.y", "k", "n" * 1025)
        with pytest.raises(ValueError, match="note"):
            client.reject("x.y", "k", "bell\a")
        with pytest.raises(ValueError, match="fingerprint"):
            client.approve("x.y", "k", fingerprint=b"short")
        assert client.lookup(OperationKey("x.y", "k")) is None
        # The largest cap is accepted as is; 0 means no cap.
        capped = client.claim(OperationKey("x.y", "big"), {}, max_attempts=2**32 - 1)
        assert capped.record.max_attempts == 2**32 - 1


def test_purge_removes_a_record_and_refuses_unsettled_at_most_once_without_force(server, tenant):
    with oncekey.Client(server.target, tenant=tenant) as client:
        done = OperationKey("email.send", unique("purge"))
        client.run(done, {"to": "ada"}, lambda lease: "sent")
        assert client.purge(done) is True
        assert client.lookup(done) is None
        assert client.purge("email.send", done.key) is False  # gone: nothing to purge

        held = OperationKey("payments.charge", unique("amo"))
        claimed = client.claim(held, {"cents": 1}, semantics=Semantics.AT_MOST_ONCE)
        assert claimed.outcome is Outcome.ACQUIRED
        with pytest.raises(oncekey.UnsettledAtMostOnce) as refused:
            client.purge(held)
        assert refused.value.reason == "UNSETTLED_AT_MOST_ONCE"
        assert client.lookup(held).status is RecordStatus.PROCESSING  # nothing changed
        assert client.purge(held, force=True) is True
        # The fencing sequence goes on: the old holder's outcome is refused.
        with pytest.raises(oncekey.LeaseLost):
            client.complete(held, claimed.lease.token, {"charged": True})
        again = client.claim(held, {"cents": 1}, semantics=Semantics.AT_MOST_ONCE)
        assert again.lease.token > claimed.lease.token

    async def purge_async():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as aclient:
            key = OperationKey("email.send", unique("apurge"))
            await aclient.run(key, {}, _async_value)
            assert await aclient.purge(key) is True
            assert await aclient.purge(key) is False

    asyncio.run(purge_async())


async def _async_value(lease):
    return "ok"


def test_missing_scopes_are_typed_and_not_retried(tmp_path):
    ledger_token, approver_token = "ledger-only-token-0123456789", "approver-token-0123456789"
    tokens = tmp_path / "tokens"
    tokens.write_text(
        f"acme:worker:{hashlib.sha256(ledger_token.encode()).hexdigest()}\n"
        f"acme:alice:{hashlib.sha256(approver_token.encode()).hexdigest()}:approve\n"
    )
    scoped = Server(tmp_path / "data", ("--tokens-file", str(tokens))).start()
    try:
        with oncekey.Client(scoped.target, token=ledger_token) as worker, oncekey.Client(scoped.target, token=approver_token) as alice:
            key = OperationKey("payments.refund", unique("scoped"))
            assert worker.claim(key, {"cents": 5}, require_approval=True).outcome is Outcome.AWAITING_APPROVAL
            with pytest.raises(oncekey.MissingScope) as missing:
                worker.approve(key, note="self-approved")
            assert missing.value.code.name == "PERMISSION_DENIED" and "approve" in missing.value.message
            with pytest.raises(oncekey.MissingScope) as missing:
                worker.reject(key, note="self-rejected")
            assert isinstance(missing.value, oncekey.PermissionDenied)
            with pytest.raises(oncekey.MissingScope):
                alice.purge(key)
            with pytest.raises(oncekey.MissingScope) as missing:
                alice.claim(OperationKey("payments.refund", unique("not-hers")), {})
            assert "ledger" in missing.value.message
            # Every scope may list: the approver finds what awaits her decision.
            deadline = time.monotonic() + 30
            while not [r for r in alice.list_records(statuses=[RecordStatus.AWAITING_APPROVAL]) if r.key == key.key]:
                assert time.monotonic() < deadline, "the gated record is listed"
                time.sleep(0.25)
            approved = alice.approve(key, note="checked")
            assert approved.approval.decided_by == "alice"
            assert worker.run(key, {"cents": 5}, lambda lease: lease.token).value == 1
    finally:
        scoped.kill()


def test_the_readme_approval_example_runs_as_written(server, tmp_path):
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    section = readme.split("## Approval gate", 1)[1]
    code = section.split("```python\n", 1)[1].split("```\n", 1)[0]
    assert '"127.0.0.1:50051"' in code
    script = tmp_path / "example.py"
    script.write_text(code.replace("127.0.0.1:50051", server.target))
    src = str(pathlib.Path(__file__).parents[1] / "src")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": src})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "awaiting approval: AWAITING_APPROVAL"
    assert lines[1].startswith("refunding 1500 on order-")
    assert lines[2] == "{'refunded': 1500}"
