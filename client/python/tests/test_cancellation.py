"""Cancellation and lost leases against the real server: a cancelled or timed-out async call still
releases its key, a claim cancelled in flight releases what it acquired, a lost lease cancels an
async function (``LeaseLost``) and sets ``lease.lost`` for a sync one, a lease that had run out
before its Claim's answer arrived runs nothing, and the lease and the outcome survive a server
restart."""

import asyncio
import threading
import time

import pytest

import oncekey
from oncekey import Disposition, OperationKey, RecordStatus


def test_a_cancelled_async_call_releases_its_key(server, tenant):
    started = []

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            @client.idempotent("email.send", key=lambda to: to)
            async def send(to: str) -> str:
                started.append(to)
                await asyncio.sleep(60)
                return "sent"

            call = asyncio.ensure_future(send("d@x"))
            while not started:
                await asyncio.sleep(0.01)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            return await client.lookup(send.key_of("d@x"))

    record = asyncio.run(main())
    assert record.status is RecordStatus.RETRY, "released at once, not PROCESSING for the lease"
    assert "cancelled" in record.error.message


def test_a_timed_out_async_call_releases_its_key_and_times_out(server, tenant):
    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            @client.idempotent("reports.build", key=lambda n: str(n))
            async def build(n: int) -> int:
                await asyncio.sleep(60)
                return n

            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(build(1), 2.0)
            return await client.lookup(build.key_of(1))

    assert asyncio.run(main()).status is RecordStatus.RETRY


def test_a_claim_cancelled_in_flight_releases_what_it_acquired(server, tenant):
    """The Claim is held by the server (wait) while another holder runs; the caller gives up;
    then the holder releases the key, so the abandoned Claim acquires it: the client releases it
    again instead of leaving it PROCESSING."""
    key = OperationKey("jobs.run", "j-1")
    holder_running = threading.Event()
    release_holder = threading.Event()

    with oncekey.Client(server.target, tenant=tenant) as sync_client:

        def holder():
            def effect(lease):
                holder_running.set()
                release_holder.wait(30)
                raise ConnectionError("released for a retry")

            with pytest.raises(ConnectionError):
                sync_client.run(key, {}, effect)

        thread = threading.Thread(target=holder)
        thread.start()
        assert holder_running.wait(30)

        async def main():
            async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

                async def never(lease):
                    raise AssertionError("must not run")

                call = asyncio.ensure_future(client.run(key, {}, never, wait=30))
                await asyncio.sleep(0.5)  # the Claim is now held by the server
                call.cancel()
                release_holder.set()  # the held Claim now acquires
                with pytest.raises(asyncio.CancelledError):
                    await call
                return await client.lookup(key)

        record = asyncio.run(main())
        thread.join()
    assert record.status is RecordStatus.RETRY and record.fencing_token == 2, record


def settle_behind_its_back(target, tenant, key, token, args=None):
    """Someone settles the lease's record with its own token: the lease is gone."""
    with oncekey.Client(target, tenant=tenant) as other:
        other.fail(key, token, "settled elsewhere", Disposition.RETRYABLE)
        assert other.claim(key, {} if args is None else args).outcome is oncekey.Outcome.ACQUIRED


def test_a_lost_lease_cancels_the_async_function(server, tenant):
    key = OperationKey("email.send", "lost-async")
    stopped = []

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            async def effect(lease):
                try:
                    await asyncio.to_thread(settle_behind_its_back, server.target, tenant, key, lease.token)
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    stopped.append(lease.lost.is_set())
                    raise
                return "must not get here"

            with pytest.raises(oncekey.LeaseLost) as e:
                await client.run(key, {}, effect, lease_ttl=1.0)
            return e.value

    lost = asyncio.run(main())
    assert lost.token == 1 and stopped == [True]


def test_a_lost_lease_is_signalled_to_a_sync_function(server, tenant):
    key = OperationKey("email.send", "lost-sync")
    with oncekey.Client(server.target, tenant=tenant) as client:

        def effect(lease):
            settle_behind_its_back(server.target, tenant, key, lease.token)
            assert lease.lost.wait(30), "lease.lost is set"
            return "finished anyway"

        with pytest.raises(oncekey.LeaseLost):
            client.run(key, {}, effect, lease_ttl=1.0)


def test_a_sync_function_that_stops_on_a_lost_lease_raises_lease_lost(server, tenant):
    """The README's pattern (check ``lease.lost``, raise) gives the typed ``LeaseLost``, as asyncio
    does, with the function's own exception as ``operation_error``."""
    with oncekey.Client(server.target, tenant=tenant) as client:
        key = OperationKey("reports.build", "lost-sync-raise")

        def effect(lease):
            settle_behind_its_back(server.target, tenant, key, lease.token)
            assert lease.lost.wait(30), "lease.lost is set"
            if lease.lost.is_set():
                raise RuntimeError("lease lost: another worker took over")
            return "must not get here"

        with pytest.raises(oncekey.LeaseLost) as lost:
            client.run(key, {}, effect, lease_ttl=1.0)
        assert lost.value.token == 1 and lost.value.reason == "LEASE_LOST"
        assert isinstance(lost.value.operation_error, RuntimeError)
        assert client.lookup(key).fencing_token == 2, "the new holder's record is untouched"

        @client.idempotent("reports.build", key=lambda report: report, lease_ttl=1.0)
        def build(report: str) -> str:
            lease = oncekey.current_lease()
            settle_behind_its_back(server.target, tenant, build.key_of(report), lease.token, [report])
            assert lease.lost.wait(30)
            lease.raise_if_lost()
            return "must not get here"

        with pytest.raises(oncekey.LeaseLost) as lost:
            build("r-1")
        assert lost.value.token == 1 and lost.value.operation_error is None


def test_a_lease_that_ran_out_before_the_answer_arrived_runs_nothing(tmp_path, tenant):
    """A server whose clock runs 2 s behind grants 1 s leases that have ended on this machine's
    clock when the answer arrives, as a Claim answered after its lease would: another holder may be
    taking the operation over, so the function must not run. Each such lease is released as RETRY
    saying ``nothing_ran``, so an operation capped at one attempt keeps it (a plain release would
    use it up: the next Claim would fail the operation with 429), and once the wait is over the
    call raises ``LeaseLost`` with no operation error."""
    from conftest import Server, fail_reasons

    behind = Server(tmp_path / "behind", env={"ONCEKEY_TEST_CLOCK_SKEW_MS": "-2000"}).start()
    runs = []
    try:
        with oncekey.Client(behind.target, tenant=tenant) as client:
            key = OperationKey("email.send", "late-sync")
            with pytest.raises(oncekey.LeaseLost) as lost:
                client.run(key, {}, lambda lease: runs.append(lease.token), lease_ttl=1.0, wait=0.5, max_attempts=1)
            assert runs == [], "nothing may run under a lapsed lease"
            assert lost.value.token >= 1 and lost.value.operation_error is None
            record = client.lookup(key)
            assert record.status is RecordStatus.RETRY, "released, not left held"
            assert record.error.message == "the lease ran out before the Claim's answer arrived: the operation did not run"
            releases = fail_reasons(behind.target, tenant, key.namespace, key.key)
            assert releases and releases == [("RETRYABLE", "NOTHING_RAN")] * len(releases)
            # A lease long enough to outlast the skew: acquired, the one attempt still there.
            assert client.claim(key, {}, max_attempts=1, lease_ttl=10.0).outcome is oncekey.Outcome.ACQUIRED

        async def main():
            async with oncekey.AsyncClient(behind.target, tenant=tenant) as client:
                key = OperationKey("email.send", "late-async")

                async def effect(lease):
                    runs.append(lease.token)

                with pytest.raises(oncekey.LeaseLost) as lost:
                    await client.run(key, {}, effect, lease_ttl=1.0, wait=0.5, max_attempts=1)
                record = await client.lookup(key)
                releases = fail_reasons(behind.target, tenant, key.namespace, key.key)
                again = await client.claim(key, {}, max_attempts=1, lease_ttl=10.0)
                return lost.value, record, releases, again.outcome

        lost_async, record, releases, again = asyncio.run(main())
        assert runs == [], "nothing may run under a lapsed lease"
        assert lost_async.token >= 1 and lost_async.operation_error is None
        assert record.status is RecordStatus.RETRY, "released, not left held"
        assert releases and releases == [("RETRYABLE", "NOTHING_RAN")] * len(releases)
        assert again is oncekey.Outcome.ACQUIRED, "the one attempt is still there"
    finally:
        behind.kill()


def test_lease_and_outcome_survive_a_server_restart(server, tenant):
    key = OperationKey("email.send", "restart")
    with oncekey.Client(server.target, tenant=tenant) as client:

        def effect(lease):
            server.kill()
            server.start()  # same port, same data
            time.sleep(5.0)  # 2.5 lease lengths: only a reopened KeepAlive keeps the lease
            with oncekey.Client(server.target, tenant=tenant) as rival:
                assert rival.claim(key, {}).outcome is oncekey.Outcome.IN_PROGRESS
            server.kill()
            threading.Timer(1.0, server.start).start()  # back after the effect: Complete retries
            return "sent"

        assert client.run(key, {}, effect, lease_ttl=2.0).value == "sent"
        record = client.lookup(key)
        assert record.status is RecordStatus.SUCCEEDED and record.fencing_token == 1


def test_a_server_that_comes_up_late_is_waited_for(tmp_path, tenant):
    from conftest import Server

    late = Server(tmp_path / "late").start()
    late.kill()  # its port is known; nothing listens there now
    calls = []
    with oncekey.Client(late.target, tenant=tenant) as client:
        threading.Timer(1.5, late.start).start()
        done = client.run(OperationKey("jobs.run", "late"), {}, lambda lease: calls.append(1) or "ran")
        assert done.value == "ran" and calls == [1]
    late.kill()


def test_a_function_that_is_not_async_releases_the_key(server, tenant):
    key = OperationKey("jobs.run", "not-async")

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:
            with pytest.raises(TypeError):
                await client.run(key, {}, lambda lease: "not a coroutine")
            return await client.lookup(key)

    assert asyncio.run(main()).status is RecordStatus.RETRY
