"""Sagas against the real server (``client.saga``): steps run once each and replay on a re-run; a
step that fails for good rolls the completed steps back in reverse order (the saga then FAILED,
code 409); a compensation that fails for good leaves the saga UNKNOWN for operators; a run that
died is resumed from the ledger; the asyncio client does the same. The kill -9 trials run
tests/saga_driver.py in a process that SIGKILLs itself between steps, inside a step and in the
middle of compensating, then run it again with the same key: every effect and every compensation
happens exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid

import pytest

import oncekey
from oncekey import OperationKey, RecordStatus, Semantics

DRIVER = pathlib.Path(__file__).with_name("saga_driver.py")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Ledger:
    """What the steps and compensations did, in order."""

    def __init__(self):
        self.effects: list[str] = []

    def step(self, name: str, fail: Exception | None = None):
        def act(*args, **kwargs):
            self.effects.append(f"do {name}")
            if fail is not None:
                raise fail
            return {"step": name, "args": list(args), **kwargs}

        return act

    def undo(self, fail: Exception | None = None):
        def compensate(output):
            self.effects.append(f"undo {output['step']}")
            if fail is not None:
                raise fail

        return compensate


def wait_for_status(client, key: OperationKey, status: RecordStatus, within: float = 10.0):
    deadline = time.monotonic() + within
    while True:
        record = client.lookup(key)
        if record is not None and record.status is status:
            return record
        assert time.monotonic() < deadline, f"{key}: {record.status if record else None}, not {status}"
        time.sleep(0.1)


def test_a_saga_runs_each_step_once_and_a_rerun_replays_its_result(server, tenant):
    ledger = Ledger()
    key = OperationKey.of("orders.place", unique("order"), "v1")
    calls = []

    def body(saga: oncekey.Saga) -> dict:
        calls.append("body")
        hold = saga.step("reserve", ledger.step("reserve"), "sku-1", 2, compensate=ledger.undo())
        charge = saga.step("charge", ledger.step("charge"), 1500, currency="EUR", compensate=ledger.undo())
        return {"hold": hold["step"], "charged": charge["currency"]}

    with oncekey.Client(server.target, tenant=tenant) as client:
        saga = client.saga(key)
        assert saga.run(body) == {"hold": "reserve", "charged": "EUR"}
        assert ledger.effects == ["do reserve", "do charge"]
        assert saga.replayed is False

        parent = client.lookup(key)
        assert parent.status is RecordStatus.SUCCEEDED and parent.semantics is Semantics.AT_MOST_ONCE
        # The saga's own arguments are {"saga": KEY} in every client library (Rust's too), so a
        # saga started in one language resumes in another.
        assert parent.fingerprint == oncekey.fingerprint({"saga": key.key})
        assert json.loads(parent.result.body) == {"hold": "reserve", "charged": "EUR"}
        # Each step is a child of the saga, its arguments fingerprinted, its output stored.
        step = client.lookup(key.child("charge"))
        assert step.status is RecordStatus.SUCCEEDED and step.parent == (key.namespace, key.key)
        assert step.fingerprint == oncekey.fingerprint([1500, {"currency": "EUR"}])
        assert json.loads(step.result.body) == {"step": "charge", "args": [1500], "currency": "EUR"}
        # The saga's lease outlived nothing: it settled, and its retention is 7 days by default.
        assert 6.9 * 86400 < (parent.expires_at - parent.updated_at).total_seconds() <= 7 * 86400
        assert 6.9 * 86400 < (step.expires_at - step.updated_at).total_seconds() <= 7 * 86400

        # Run again: the stored result, without calling the body.
        again = client.saga(key)
        assert again.run(body) == {"hold": "reserve", "charged": "EUR"}
        assert again.replayed is True and calls == ["body"]

        # A with block of a finished saga runs, but its steps only replay their stored outputs.
        with client.saga(key) as saga:
            assert saga.replayed is True
            assert saga.step("reserve", ledger.step("reserve"), "sku-1", 2)["args"] == ["sku-1", 2]
            with pytest.raises(oncekey.SagaError, match="nothing runs in a finished saga"):
                saga.step("never-ran", ledger.step("never-ran"))
        assert saga.result == {"hold": "reserve", "charged": "EUR"}
        assert ledger.effects == ["do reserve", "do charge"]
        assert client.lookup(key.child("never-ran")) is None


def test_a_with_block_stores_the_result_it_sets(server, tenant):
    ledger = Ledger()
    key = OperationKey("orders.place", unique("order"))
    with oncekey.Client(server.target, tenant=tenant) as client:
        with client.saga(key) as saga:
            saga.step("reserve", ledger.step("reserve"), compensate=ledger.undo())
            saga.result = {"order": key.key}
        assert saga.record.status is RecordStatus.SUCCEEDED
        assert client.saga(key).run(lambda s: pytest.fail("replayed, not run")) == {"order": key.key}


def test_a_step_that_fails_for_good_rolls_back_the_completed_steps_in_reverse(server, tenant):
    ledger = Ledger()
    key = OperationKey("orders.place", unique("order"))
    declined = ValueError("card declined")

    def body(saga: oncekey.Saga) -> None:
        saga.step("reserve", ledger.step("reserve"), "sku-1", compensate=ledger.undo())
        saga.step("notify", ledger.step("notify"))  # nothing to undo
        saga.step("hold", ledger.step("hold"), compensate=ledger.undo())
        saga.step("charge", ledger.step("charge", fail=declined), 1500, compensate=ledger.undo())
        pytest.fail("a failed step stops the saga")

    with oncekey.Client(server.target, tenant=tenant) as client:
        with pytest.raises(oncekey.SagaRolledBack) as rolled:
            client.saga(key).run(body)
        assert ledger.effects == ["do reserve", "do notify", "do hold", "do charge", "undo hold", "undo reserve"]
        e = rolled.value
        assert (e.step, e.cause, e.key) == ("charge", "ValueError: card declined", key)
        assert e.__cause__ is declined
        assert (e.error.code, e.error.message) == (409, "rolled back: step charge failed: ValueError: card declined")

        parent = client.lookup(key)
        assert parent.status is RecordStatus.FAILED
        assert (parent.error.code, parent.error.message) == (409, "rolled back: step charge failed: ValueError: card declined")
        assert client.lookup(key.child("charge")).status is RecordStatus.FAILED
        # The compensations are children too, run once with the step's output as their arguments.
        undo = client.lookup(key.child("compensate-reserve"))
        assert undo.status is RecordStatus.SUCCEEDED and undo.parent == (key.namespace, key.key)
        assert undo.fingerprint == oncekey.fingerprint({"step": "reserve", "args": ["sku-1"]})
        assert client.lookup(key.child("compensate-notify")) is None

        # Every later run replays the failure, running nothing.
        with pytest.raises(oncekey.SagaRolledBack) as replayed:
            client.saga(key).run(body)
        assert (replayed.value.step, replayed.value.cause, replayed.value.error.code) == ("charge", "ValueError: card declined", 409)
        with pytest.raises(oncekey.SagaRolledBack):
            with client.saga(key):
                pytest.fail("a rolled-back saga's block does not run")
        assert len(ledger.effects) == 6


def test_a_failure_of_the_sagas_own_code_rolls_back_too(server, tenant):
    ledger = Ledger()
    key = OperationKey("orders.place", unique("order"))
    with oncekey.Client(server.target, tenant=tenant) as client:
        with pytest.raises(oncekey.SagaRolledBack) as rolled:
            with client.saga(key) as saga:
                saga.step("reserve", ledger.step("reserve"), compensate=ledger.undo())
                raise oncekey.FinalError("over the limit", code=422)
        assert ledger.effects == ["do reserve", "undo reserve"]
        assert (rolled.value.step, rolled.value.cause) == (None, "over the limit")
        assert client.lookup(key).error.message == "rolled back: over the limit"
        with pytest.raises(oncekey.SagaRolledBack) as replayed:
            client.saga(key).run(lambda saga: pytest.fail("a rolled-back saga does not run"))
        assert (replayed.value.step, replayed.value.cause) == (None, "over the limit")


def test_a_compensation_that_fails_for_good_leaves_the_saga_unknown_and_a_rerun_redoes_nothing(server, tenant):
    ledger = Ledger()
    key = OperationKey("orders.place", unique("order"))

    def body(saga: oncekey.Saga) -> None:
        saga.step("reserve", ledger.step("reserve"), compensate=ledger.undo())
        saga.step("charge", ledger.step("charge"), compensate=ledger.undo(fail=RuntimeError("refund API gone")))
        saga.step("ship", ledger.step("ship", fail=ValueError("no courier")), compensate=ledger.undo())

    with oncekey.Client(server.target, tenant=tenant) as client:
        started = time.monotonic()
        with pytest.raises(oncekey.SagaNeedsReconciliation) as stuck:
            client.saga(key, lease_ttl=30).run(body)
        e = stuck.value
        assert (e.step, e.compensation, e.cause) == ("charge", True, "RuntimeError: refund API gone")
        assert isinstance(e, oncekey.NeedsReconciliation) and "compensation of step charge failed" in str(e)
        # Compensating stops at the failure: the earlier steps' compensations wait for an operator.
        assert ledger.effects == ["do reserve", "do charge", "do ship", "undo charge"]
        assert client.lookup(key.child("compensate-charge")).status is RecordStatus.FAILED

        # The saga's 30 s lease was cut to 1 s: it turns UNKNOWN at once, listed for operators.
        wait_for_status(client, key, RecordStatus.UNKNOWN, within=5)
        assert time.monotonic() - started < 5
        deadline = time.monotonic() + 10
        while key.key not in {r.key for r in client.list_records(namespace=key.namespace, statuses=[RecordStatus.UNKNOWN])}:
            assert time.monotonic() < deadline, "the stuck saga is listed as UNKNOWN"
            time.sleep(0.2)

        # Running it again is harmless: it resumes, replays everything, and stops at the same place.
        with pytest.raises(oncekey.SagaNeedsReconciliation) as again:
            client.saga(key).run(body)
        assert (again.value.step, again.value.compensation) == ("charge", True)
        assert ledger.effects == ["do reserve", "do charge", "do ship", "undo charge"]
        wait_for_status(client, key, RecordStatus.UNKNOWN, within=5)


def test_a_saga_whose_run_died_is_resumed_from_the_ledger(server, tenant):
    ledger = Ledger()
    key = OperationKey("orders.place", unique("order"))
    with oncekey.Client(server.target, tenant=tenant) as client:
        # A run that died after its first step: the saga claimed, the step done, the lease lapsed.
        claimed = client.claim(key, {"saga": key.key}, lease_ttl=1, semantics=Semantics.AT_MOST_ONCE)
        assert claimed.outcome is oncekey.Outcome.ACQUIRED
        client.run(key.child("reserve"), ["sku-1"], lambda lease: ledger.step("reserve")("sku-1"))
        wait_for_status(client, key, RecordStatus.UNKNOWN)

        def body(saga: oncekey.Saga) -> list:
            a = saga.step("reserve", ledger.step("reserve"), "sku-1", compensate=ledger.undo())
            b = saga.step("charge", ledger.step("charge"), 1500, compensate=ledger.undo())
            return [a["step"], b["step"]]

        assert client.saga(key).run(body) == ["reserve", "charge"]
        assert ledger.effects == ["do reserve", "do charge"]  # reserve replayed, not redone
        parent = client.lookup(key)
        assert parent.status is RecordStatus.SUCCEEDED and parent.fencing_token == 2  # reconciled


def test_a_saga_running_elsewhere_is_waited_for_or_refused(server, tenant):
    key = OperationKey("orders.place", unique("order"))
    with oncekey.Client(server.target, tenant=tenant) as client:
        with client.saga(key) as saga:
            saga.step("reserve", lambda: "held")
            with pytest.raises(oncekey.InProgress):
                client.saga(key, wait=0).run(lambda s: pytest.fail("the saga runs elsewhere"))
            saga.result = "placed"
        assert client.saga(key, wait=0).run(lambda s: pytest.fail("done")) == "placed"


def test_a_retryable_failure_releases_the_saga_for_a_later_run(server, tenant):
    ledger = Ledger()
    key = OperationKey("orders.place", unique("order"))
    flaky = [ConnectionError("courier API timed out")]

    def ship():
        ledger.effects.append("try ship")
        if flaky:
            raise flaky.pop()
        return "shipped"

    def body(saga: oncekey.Saga) -> str:
        saga.step("reserve", ledger.step("reserve"), compensate=ledger.undo())
        return saga.step("ship", ship)

    with oncekey.Client(server.target, tenant=tenant) as client:
        with pytest.raises(ConnectionError):
            client.saga(key, retryable=(ConnectionError,)).run(body)
        assert client.lookup(key).status is RecordStatus.RETRY
        assert client.lookup(key.child("ship")).status is RecordStatus.RETRY
        assert client.saga(key, retryable=(ConnectionError,)).run(body) == "shipped"
        assert ledger.effects == ["do reserve", "try ship", "try ship"]  # nothing compensated


def test_a_step_done_with_other_arguments_releases_the_saga_instead_of_rolling_it_back(server, tenant):
    ledger = Ledger()
    key = OperationKey("orders.place", unique("order"))
    with oncekey.Client(server.target, tenant=tenant) as client:
        # A run that died after its first step, with the saga's code then changed (2 items, not 1).
        client.claim(key, {"saga": key.key}, lease_ttl=1, semantics=Semantics.AT_MOST_ONCE)
        client.run(key.child("reserve"), ["sku-1", 1], lambda lease: ledger.step("reserve")("sku-1", 1))
        wait_for_status(client, key, RecordStatus.UNKNOWN)

        def body(saga: oncekey.Saga, count: int) -> str:
            saga.step("reserve", ledger.step("reserve"), "sku-1", count, compensate=ledger.undo())
            return saga.step("charge", ledger.step("charge"), compensate=ledger.undo())["step"]

        with pytest.raises(oncekey.KeyReused):
            client.saga(key).run(lambda saga: body(saga, 2))
        assert client.lookup(key).status is RecordStatus.RETRY  # not rolled back: reserve stays done
        assert client.saga(key).run(lambda saga: body(saga, 1)) == "charge"
        assert ledger.effects == ["do reserve", "do charge"]


def test_step_names_are_unique_and_not_a_compensations(server, tenant):
    key = OperationKey("orders.place", unique("order"))
    with oncekey.Client(server.target, tenant=tenant) as client:
        with client.saga(key) as saga:
            saga.step("reserve", lambda: 1)
            with pytest.raises(ValueError, match="unique"):
                saga.step("reserve", lambda: 2)
            with pytest.raises(ValueError, match="compensate-"):
                saga.step("compensate-reserve", lambda: 3)
        with pytest.raises(TypeError):
            client.saga("orders.place/1")  # type: ignore[arg-type]
        with pytest.raises(oncekey.SagaError, match="runs once"):
            saga.run(lambda s: None)
        with pytest.raises(oncekey.SagaError, match="not running"):
            saga.step("late", lambda: pytest.fail("a step after the saga ended does not run"))
        with pytest.raises(oncekey.SagaError, match="enter it"):
            client.saga(key).step("early", lambda: pytest.fail("nor one before it starts"))
        assert client.lookup(key.child("late")) is None


def test_explain_tells_an_agent_what_a_saga_error_means():
    key = OperationKey("orders.place", "o-1")
    error = oncekey.StoredError(409, "rolled back: step charge failed: declined")
    rolled = oncekey.SagaRolledBack("saga: rolled back", key, "charge", "declined", error)
    assert "rolled back" in oncekey.explain(rolled) and "do not retry" in oncekey.explain(rolled)
    stuck = oncekey.SagaNeedsReconciliation("saga: stuck", key, "reserve", "refund API gone", True)
    text = oncekey.explain(stuck)
    assert "undoing step reserve failed (refund API gone)" in text and "stop and report" in text
    assert isinstance(stuck, oncekey.NeedsReconciliation) and isinstance(stuck, oncekey.SagaError)


def test_a_budget_caps_the_sagas_children_compensations_included(server, tenant):
    ledger = Ledger()
    with oncekey.Client(server.target, tenant=tenant) as client:
        with pytest.raises(ValueError, match="unknown field"):
            client.saga(OperationKey("orders.place", unique("order")), budget={"children": 1}).run(lambda s: None)

        def body(saga: oncekey.Saga, undo=None) -> None:
            saga.step("reserve", ledger.step("reserve"), compensate=undo)
            saga.step("charge", ledger.step("charge"))
            saga.step("ship", ledger.step("ship"))

        # Two children allowed: the third step is refused, and the saga rolls back.
        capped = OperationKey("orders.place", unique("order"))
        try:
            client.saga(capped, budget={"max_children": 2}).run(body)
        except oncekey.SagaRolledBack as e:
            rolled: oncekey.SagaRolledBack | None = e
        else:
            rolled = None
        record = _raw_record(server.target, tenant, capped)
        if not record.HasField("budget"):
            pytest.skip("this server predates run budgets (Record.budget): the budget went unread")
        assert rolled is not None and rolled.step == "ship" and "BUDGET_EXHAUSTED" in rolled.cause
        assert ledger.effects == ["do reserve", "do charge"]
        assert (record.budget.budget.max_children, record.budget.children, record.budget.refused) == (2, 2, 1)

        # Compensations are children too: with no room left for one, the saga needs an operator.
        ledger.effects.clear()
        tight = OperationKey("orders.place", unique("order"))
        with pytest.raises(oncekey.SagaNeedsReconciliation) as stuck:
            client.saga(tight, budget={"max_children": 2}).run(lambda saga: body(saga, ledger.undo()))
        assert (stuck.value.step, stuck.value.compensation) == ("reserve", True)
        assert "BUDGET_EXHAUSTED" in stuck.value.cause
        assert ledger.effects == ["do reserve", "do charge"]


def _raw_record(target: str, tenant: str, key: OperationKey):
    import grpc

    from oncekey.v1 import ledger_pb2 as pb
    from oncekey.v1 import ledger_pb2_grpc

    with grpc.insecure_channel(target) as channel:
        return ledger_pb2_grpc.LedgerStub(channel).Lookup(
            pb.LookupRequest(namespace=key.namespace, key=key.key), metadata=(("x-oncekey-tenant", tenant),), timeout=10
        ).record


# asyncio


def test_an_async_saga_runs_rolls_back_and_replays(server, tenant):
    ledger = Ledger()

    async def act(name: str, fail: bool = False) -> dict:
        await asyncio.sleep(0)
        ledger.effects.append(f"do {name}")
        if fail:
            raise ValueError(f"{name} failed")
        return {"step": name}

    async def undo(output: dict) -> None:
        await asyncio.sleep(0)
        ledger.effects.append(f"undo {output['step']}")

    async def main():
        async with oncekey.AsyncClient(server.target, tenant=tenant) as client:
            placed = OperationKey("orders.place", unique("order"))

            async def body(saga: oncekey.AsyncSaga) -> list:
                a = await saga.step("reserve", act, "reserve", compensate=undo)
                b = await saga.step("charge", act, "charge", compensate=undo)
                return [a["step"], b["step"]]

            def sync_undo(output: dict) -> None:  # a plain function works too
                ledger.effects.append(f"undo {output['step']} (sync)")

            assert await client.saga(placed).run(body) == ["reserve", "charge"]
            assert await client.saga(placed).run(body) == ["reserve", "charge"]  # replayed
            assert (await client.lookup(placed)).status is RecordStatus.SUCCEEDED

            failed = OperationKey("orders.place", unique("order"))
            with pytest.raises(oncekey.SagaRolledBack) as rolled:
                async with client.saga(failed) as saga:
                    await saga.step("reserve", act, "reserve", compensate=undo)
                    await saga.step("charge", act, "charge", compensate=sync_undo)
                    await saga.step("ship", act, "ship", fail=True, compensate=undo)
            assert (rolled.value.step, rolled.value.cause) == ("ship", "ValueError: ship failed")
            assert (await client.lookup(failed)).error.code == 409
            with pytest.raises(oncekey.SagaRolledBack):
                await client.saga(failed).run(body)

            stuck = OperationKey("orders.place", unique("order"))

            async def broken(output: dict) -> None:
                ledger.effects.append(f"undo {output['step']}")
                raise RuntimeError("refund API gone")

            with pytest.raises(oncekey.SagaNeedsReconciliation) as needs:
                async with client.saga(stuck) as saga:
                    await saga.step("reserve", act, "reserve", compensate=broken)
                    await saga.step("charge", act, "charge", fail=True)
            assert (needs.value.step, needs.value.compensation) == ("reserve", True)
            deadline = time.monotonic() + 5
            while (await client.lookup(stuck)).status is not RecordStatus.UNKNOWN:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)

    asyncio.run(main())
    assert ledger.effects == [
        "do reserve", "do charge",  # placed
        "do reserve", "do charge", "do ship", "undo charge (sync)", "undo reserve",  # failed
        "do reserve", "do charge", "undo reserve",  # stuck
    ]  # fmt: skip


# kill -9


def run_driver(server, tenant: str, key: str, effects: pathlib.Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(DRIVER), server.target, tenant, "orders.place", key, str(effects), "--lease", "1.5", *extra],
        capture_output=True,
        text=True,
        timeout=120,
    )


TRIALS = [
    # (where the first run kills itself, the step that fails for good, the effects before the kill)
    ("after:reserve", None, ["do reserve"]),
    ("before:charge", None, ["do reserve"]),
    ("after:ship", None, ["do reserve", "do charge", "do ship"]),
    ("after:charge", "ship", ["do reserve", "do charge"]),
    ("undo:charge", "ship", ["do reserve", "do charge", "try ship"]),
    ("undo:reserve", "ship", ["do reserve", "do charge", "try ship", "undo charge"]),
]


@pytest.mark.parametrize(("kill", "fail", "before"), TRIALS, ids=[f"{k}{'-' + f + '-fails' if f else ''}" for k, f, _ in TRIALS])
def test_kill_9_then_rerun_does_every_effect_and_compensation_exactly_once(server, tenant, tmp_path, kill, fail, before):
    effects = tmp_path / "effects.txt"
    key = unique("order")
    failing = ["--fail", fail] if fail else []

    killed = run_driver(server, tenant, key, effects, *failing, "--kill", kill)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert effects.read_text().splitlines() == before

    # Run again at once: the dead run's lease (1.5 s) lapses while the new run waits, then the
    # saga is resumed from the ledger.
    started = time.monotonic()
    resumed = run_driver(server, tenant, key, effects, *failing)
    assert resumed.returncode == 0, resumed.stderr
    outcome = json.loads(resumed.stdout)
    lines = effects.read_text().splitlines()
    if fail is None:
        assert outcome == {"outcome": "done", "replayed": False, "result": {"done": ["reserve", "charge", "ship"]}}
        assert lines == ["do reserve", "do charge", "do ship"]
    else:
        assert outcome == {"outcome": "rolled back", "step": "ship", "cause": f"ValueError: ship refused for {key}"}
        assert lines == ["do reserve", "do charge", "try ship", "undo charge", "undo reserve"]
    assert time.monotonic() - started < 30

    # And once more: the outcome replays, nothing runs.
    again = run_driver(server, tenant, key, effects, *failing)
    assert json.loads(again.stdout)["outcome"] == outcome["outcome"]
    assert effects.read_text().splitlines() == lines
    with oncekey.Client(server.target, tenant=tenant) as client:
        parent = client.lookup(OperationKey("orders.place", key))
        assert parent.status is (RecordStatus.SUCCEEDED if fail is None else RecordStatus.FAILED)
        assert parent.fencing_token == 2  # the dead run's, then the resumed run's (reconciled)


def test_the_readme_saga_example_runs_as_written(server, tenant, tmp_path):
    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    code = readme.split("## Sagas", 1)[1].split("```python\n", 1)[1].split("```\n", 1)[0]
    assert 'oncekey.Client("127.0.0.1:50051", tenant="demo")' in code
    script = tmp_path / "saga.py"
    script.write_text(code.replace('"127.0.0.1:50051", tenant="demo"', f'"{server.target}", tenant="{tenant}"'))
    src = str(pathlib.Path(__file__).parents[1] / "src")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": src})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    order = lines[0].removeprefix("reserving sku-42 for ")
    assert lines == [
        f"reserving sku-42 for {order}",
        f"charging 1500 for {order}",
        "{'sku': 'sku-42', 'charged': 1500}",
        "{'sku': 'sku-42', 'charged': 1500}",
        f"reserving sku-42 for {order}-big",
        f"releasing sku-42 for {order}-big",
        "rolled back: step charge failed: ValueError: card declined",
    ]
