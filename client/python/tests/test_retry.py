"""Retries: exponential backoff with full jitter, the server's pushback, never on permanent errors,
the circuit breaker, and the KeepAlive stream's reopen / lost / replaced verdicts (against a
scripted server that counts the calls)."""

import asyncio
import threading
import time

import grpc
import pytest
from fake import FakeServer, abort, lease

import oncekey
from oncekey import BreakerPolicy, OperationKey, RetryPolicy
from oncekey.retry import Breaker, CircuitOpen
from oncekey.v1 import ledger_pb2 as pb

FAST = RetryPolicy(max_attempts=5, initial_backoff=0.01, max_backoff=0.04)
KEY = OperationKey("retry.test", "k")


def acquired(request, context, n):
    return pb.ClaimResponse(outcome=pb.CLAIM_OUTCOME_ACQUIRED, lease=lease())


def completed(request, context, n):
    return pb.CompleteResponse(record=pb.Record(namespace=request.namespace, key=request.key, status=pb.RECORD_STATUS_SUCCEEDED))


def failing(times, code, reason="STORE_UNAVAILABLE", pushback_ms=None, then=acquired):
    def handler(request, context, n):
        if n <= times:
            abort(context, code, reason, pushback_ms)
        return then(request, context, n)

    return handler


def test_backoff_is_exponential_full_jitter_and_capped():
    p = RetryPolicy()
    assert (p.max_attempts, p.initial_backoff, p.max_backoff) == (5, 0.5, 15.0)
    assert [p.ceiling(r) for r in (1, 2, 3, 6, 60)] == [0.5, 1.0, 2.0, 15.0, 15.0]
    for retry in range(1, 10):
        assert 0 <= p.backoff(retry) <= p.ceiling(retry)
    assert len({p.backoff(3) for _ in range(20)}) > 1, "jittered"


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED])
def test_transient_failures_are_retried_with_the_identical_request(code):
    seen = []

    def claim(request, context, n):
        seen.append(request.SerializeToString())
        return failing(3, code)(request, context, n)

    with FakeServer({"Claim": claim}) as fake, oncekey.Client(fake.target, retry=FAST) as client:
        assert client.claim(KEY, {"a": 1}).outcome is oncekey.Outcome.ACQUIRED
        assert fake.ledger.calls["Claim"] == 4
        assert len(set(seen)) == 1, "every retry resends the same key, fingerprint and owner"


def test_gives_up_after_max_attempts_with_unavailable():
    with FakeServer({"Claim": failing(100, grpc.StatusCode.UNAVAILABLE)}) as fake:
        with oncekey.Client(fake.target, retry=FAST, connect_timeout=0.2) as client:
            with pytest.raises(oncekey.Unavailable) as e:
                client.claim(KEY, {})
            assert fake.ledger.calls["Claim"] == 5
            assert e.value.code == grpc.StatusCode.UNAVAILABLE and e.value.reason == "STORE_UNAVAILABLE"


@pytest.mark.parametrize(
    "code,reason,error",
    [
        (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_FIELD", oncekey.RpcError),
        (grpc.StatusCode.FAILED_PRECONDITION, "KEY_REUSED", oncekey.KeyReused),
        (grpc.StatusCode.FAILED_PRECONDITION, "LEASE_LOST", oncekey.LeaseLost),
        (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", oncekey.RpcError),
        (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", oncekey.RpcError),
    ],
)
def test_permanent_failures_are_never_retried(code, reason, error):
    with FakeServer({"Claim": failing(100, code, reason)}) as fake, oncekey.Client(fake.target, retry=FAST) as client:
        with pytest.raises(error) as e:
            client.claim(KEY, {})
        assert fake.ledger.calls["Claim"] == 1
        assert (e.value.code, e.value.reason) == (code, reason)
        assert isinstance(e.value, oncekey.Error)


def test_pushback_is_honoured_and_a_negative_one_stops_retrying():
    handler = failing(1, grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", pushback_ms=300)
    with FakeServer({"Claim": handler}) as fake, oncekey.Client(fake.target, retry=FAST) as client:
        started = time.monotonic()
        client.claim(KEY, {})
        assert time.monotonic() - started >= 0.3, "waited the pushback, not the 10 ms backoff"
        assert fake.ledger.calls["Claim"] == 2
    handler = failing(100, grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED", pushback_ms=-1)
    with FakeServer({"Claim": handler}) as fake, oncekey.Client(fake.target, retry=FAST) as client:
        with pytest.raises(oncekey.Unavailable):
            client.claim(KEY, {})
        assert fake.ledger.calls["Claim"] == 1


def test_settling_is_retried_so_the_outcome_is_not_lost():
    handlers = {
        "Claim": acquired,
        "Complete": failing(2, grpc.StatusCode.UNAVAILABLE, then=completed),
        "KeepAlive": lambda request, context, n: iter([lease()]),
    }
    with FakeServer(handlers) as fake:

        async def main():
            async with oncekey.AsyncClient(fake.target, retry=FAST) as client:

                async def effect(lease):
                    return {"sent": True}

                return await client.run(KEY, {}, effect)

        done = asyncio.run(main())
        assert done.value == {"sent": True} and not done.replayed
        assert fake.ledger.calls["Complete"] == 3


def test_breaker_opens_after_consecutive_failures_and_probes_after_the_cool_down():
    breaker = Breaker(BreakerPolicy(failure_threshold=3, cool_down=0.2))
    for _ in range(3):
        assert breaker.admit() is False
        breaker.record(failed=True)
    assert breaker.state == "open"
    with pytest.raises(CircuitOpen):
        breaker.admit()
    time.sleep(0.25)
    assert breaker.admit() is True, "one probe after the cool-down"
    with pytest.raises(CircuitOpen):
        breaker.admit()
    breaker.record(failed=True)
    assert breaker.state == "open"
    time.sleep(0.25)
    assert breaker.admit() is True
    breaker.record(failed=False)
    assert breaker.state == "closed"


def test_an_open_breaker_fails_fast_with_unavailable():
    policy = BreakerPolicy(failure_threshold=2, cool_down=60)
    with FakeServer({"Claim": failing(100, grpc.StatusCode.UNAVAILABLE)}) as fake:
        with oncekey.Client(fake.target, retry=RetryPolicy.never(), breaker=policy) as client:
            for _ in range(2):
                with pytest.raises(oncekey.Unavailable):
                    client.claim(KEY, {})
            with pytest.raises(oncekey.Unavailable, match="circuit open"):
                client.claim(KEY, {})
            assert fake.ledger.calls["Claim"] == 2


def keep_alive_scenario(keep_alive_handler, run_for: float):
    """Runs one sync operation for ``run_for`` seconds against a KeepAlive scripted by
    ``keep_alive_handler``; returns (the lease, how often KeepAlive was opened)."""
    handlers = {"Claim": acquired, "Complete": completed, "KeepAlive": keep_alive_handler}
    with FakeServer(handlers) as fake, oncekey.Client(fake.target, retry=FAST) as client:
        seen = {}

        def effect(lease):
            seen["lease"] = lease
            lease.lost.wait(run_for)
            return "ok"

        try:
            client.run(KEY, {}, effect, lease_ttl=1.0)
        except oncekey.LeaseLost:
            pass
        return seen["lease"], fake.ledger.calls["KeepAlive"]


def test_keep_alive_is_reopened_after_a_transport_failure():
    def handler(request, context, n):
        if n == 1:
            abort(context, grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE")
        return iter([lease()])

    held, opens = keep_alive_scenario(handler, 1.5)
    assert opens >= 2 and not held.lost.is_set()


def test_keep_alive_lease_lost_sets_lost_and_is_not_reopened():
    held, opens = keep_alive_scenario(lambda r, c, n: abort(c, grpc.StatusCode.FAILED_PRECONDITION, "LEASE_LOST"), 10)
    assert held.lost.is_set() and opens == 1


def test_keep_alive_replaced_stops_without_losing_the_lease():
    held, opens = keep_alive_scenario(lambda r, c, n: abort(c, grpc.StatusCode.ABORTED, "KEEPALIVE_REPLACED"), 1.5)
    assert not held.lost.is_set() and opens == 1, "a replaced stream is neither lost nor reopened"


def test_async_keep_alive_replaced_stops_without_losing_the_lease():
    handlers = {
        "Claim": acquired,
        "Complete": completed,
        "KeepAlive": lambda r, c, n: abort(c, grpc.StatusCode.ABORTED, "KEEPALIVE_REPLACED"),
    }
    with FakeServer(handlers) as fake:

        async def main():
            async with oncekey.AsyncClient(fake.target, retry=FAST) as client:

                async def effect(lease):
                    await asyncio.sleep(1.5)
                    return lease.lost.is_set()

                return (await client.run(KEY, {}, effect, lease_ttl=1.0)).value

        assert asyncio.run(main()) is False
        assert fake.ledger.calls["KeepAlive"] == 1


def test_sync_client_is_usable_from_threads():
    with FakeServer({"Claim": acquired}) as fake, oncekey.Client(fake.target) as client:
        errors = []

        def claim():
            try:
                client.claim(KEY, {})
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=claim) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and fake.ledger.calls["Claim"] == 8
