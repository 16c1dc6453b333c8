"""What a cancelled async call settles, against the real server. A function whose side effect runs
in a thread (``asyncio.to_thread``): cancelling the caller does not stop the thread, so the client
never releases the key while it runs, and the effect happens once however the agent retries
(counted in the thread). A function on asyncio alone is released for a retry, unless it is
at-most-once (its request may have gone out): then it is left to reconciliation."""

import asyncio
import threading

import pytest

import oncekey
from oncekey import RecordStatus, Semantics


class Outbox:
    """A blocking "send" that waits until ``release`` is set, then records one effect."""

    def __init__(self):
        self.release = threading.Event()
        self.started = threading.Event()
        self.sent = []
        self.running = 0
        self.idle = threading.Condition()

    def send(self, to):
        with self.idle:
            self.running += 1
        try:
            self.started.set()
            assert self.release.wait(30), "released by the test"
            self.sent.append(to)
            return f"sent to {to}"
        finally:
            with self.idle:
                self.running -= 1
                self.idle.notify_all()

    def wait_idle(self):
        """Until no send is running (every thread has made or skipped its effect)."""
        with self.idle:
            assert self.idle.wait_for(lambda: self.running == 0, 30)


def test_a_cancelled_call_whose_thread_is_sending_is_not_sent_again_on_retry(server, tenant):
    outbox = Outbox()

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            @client.idempotent("email.send", key=lambda to: to)
            async def send_email(to: str) -> str:
                return await asyncio.to_thread(outbox.send, to)

            call = asyncio.ensure_future(send_email("ada@example.com"))
            await asyncio.to_thread(outbox.started.wait, 30)
            call.cancel()  # the agent gives up while the thread is sending
            outbox.release.set()  # the thread goes on and sends
            with pytest.raises(asyncio.CancelledError):
                await call
            retried = await send_email.detailed("ada@example.com")  # the agent retries at once
            return retried, await client.lookup(send_email.key_of("ada@example.com"))

    retried, record = asyncio.run(main())
    outbox.wait_idle()
    assert outbox.sent == ["ada@example.com"], "one effect"
    assert (retried.value, retried.replayed) == ("sent to ada@example.com", True)
    assert record.status is RecordStatus.SUCCEEDED and record.fencing_token == 1


def test_a_cancel_that_comes_after_the_thread_sent_but_before_the_function_saw_it(server, tenant):
    """The thread has sent, its result is on its way to the function, and the cancellation comes
    first (the event loop is held, so neither has been processed): the function still gets its
    result and the outcome is recorded."""
    outbox = Outbox()

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            @client.idempotent("email.send", key=lambda to: to)
            async def send_email(to: str) -> str:
                return await asyncio.to_thread(outbox.send, to)

            call = asyncio.ensure_future(send_email("di@example.com"))
            await asyncio.to_thread(outbox.started.wait, 30)
            outbox.release.set()
            outbox.wait_idle()  # blocks the event loop: the thread's result is not delivered yet
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            return await send_email.detailed("di@example.com")

    retried = asyncio.run(main())
    assert outbox.sent == ["di@example.com"], "one effect"
    assert (retried.value, retried.replayed) == ("sent to di@example.com", True)


def test_a_thread_that_outlasts_the_grace_leaves_the_operation_unknown_never_released(server, tenant):
    """The function is left one lease length to finish; its thread is still sending then, so the
    lease is left to run out: an at-most-once operation becomes UNKNOWN (not RETRY), and the
    retry is told to reconcile instead of sending again."""
    outbox = Outbox()

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            @client.idempotent("email.send", key=lambda to: to, semantics=Semantics.AT_MOST_ONCE, lease_ttl=1.0)
            async def send_email(to: str) -> str:
                return await asyncio.to_thread(outbox.send, to)

            call = asyncio.ensure_future(send_email("bo@example.com"))
            await asyncio.to_thread(outbox.started.wait, 30)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            key = send_email.key_of("bo@example.com")
            assert (await client.lookup(key)).status in (RecordStatus.PROCESSING, RecordStatus.UNKNOWN), "not released"
            with pytest.raises(oncekey.NeedsReconciliation):
                await send_email("bo@example.com")
            outbox.release.set()
            return await client.lookup(key)

    record = asyncio.run(main())
    outbox.wait_idle()
    assert outbox.sent == ["bo@example.com"], "one effect"
    assert record.status is RecordStatus.UNKNOWN


def test_a_cancelled_at_most_once_call_is_left_to_reconciliation(server, tenant):
    runs = []

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:

            @client.idempotent("payments.charge", key=lambda order: order, semantics=Semantics.AT_MOST_ONCE, lease_ttl=1.0)
            async def charge(order: str) -> str:
                runs.append(order)
                await asyncio.sleep(60)  # the request is out; the answer has not come
                return "charged"

            call = asyncio.ensure_future(charge("order-5"))
            while not runs:
                await asyncio.sleep(0.01)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert (await client.lookup(charge.key_of("order-5"))).status is not RecordStatus.RETRY
            with pytest.raises(oncekey.NeedsReconciliation):
                await charge("order-5")  # waits for the lease to run out, then: reconcile
            return runs

    assert asyncio.run(main()) == ["order-5"], "never charged twice"


def test_a_cancelled_call_without_a_thread_is_still_released_at_once(server, tenant):
    """A function waiting on asyncio alone stops at its await: the key is released for a retry,
    which runs it."""
    runs = []

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:
            gate = asyncio.Event()

            @client.idempotent("email.send", key=lambda to: to)
            async def send_email(to: str) -> str:
                await asyncio.get_running_loop().getaddrinfo("localhost", 25)  # no effect: not tracked
                runs.append(to)
                await gate.wait()
                return "sent"

            call = asyncio.ensure_future(send_email("cy@example.com"))
            while not runs:
                await asyncio.sleep(0.01)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert (await client.lookup(send_email.key_of("cy@example.com"))).status is RecordStatus.RETRY
            gate.set()
            return await send_email("cy@example.com")

    assert asyncio.run(main()) == "sent" and len(runs) == 2
