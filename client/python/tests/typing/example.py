"""A typed use of the client, checked by ``mypy --strict`` and ``pyright`` (scripts/test, polyglot
stage; configured in pyproject.toml): a wrapped function keeps its parameters and return type, sync
and async, plain functions and methods, and so do ``.detailed``, ``.reconcile`` and ``.key_of``;
a saga step returns its function's type and takes a compensation of it; the agent-safety options
(intent guard, run budgets) and what they answer are typed.

Each line ending in ``# type: ignore[...]`` must be a type error: both checkers report an ignore
that is not needed, so a wrapper that accepted anything would fail the check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

import oncekey
from oncekey import Done, DuplicateIntentGroup, IntentGuard, IntentMatch, OperationKey, Record, RecordPage, RecordStatus, RunBudget

if TYPE_CHECKING:
    from typing_extensions import assert_type

client = oncekey.Client("127.0.0.1:50051", tenant="demo")
aclient = oncekey.AsyncClient("127.0.0.1:50051", tenant="demo")


@client.idempotent("email.send", key=lambda to, subject: f"{to}:{subject}")
def send_email(to: str, subject: str, body: str = "") -> dict[str, str]:
    return {"status": "sent", "to": to}


def found(to: str, subject: str, body: str = "") -> dict[str, str]:
    return {"status": "found", "to": to}


def sync_calls() -> None:
    assert_type(send_email("ada@example.com", "Welcome"), dict[str, str])
    done = send_email.detailed("ada@example.com", "Welcome", body="Hello")
    assert_type(done, Done[dict[str, str]])
    assert_type(done.replayed, bool)
    assert_type(send_email.key_of("ada@example.com", "Welcome"), OperationKey)
    assert_type(send_email.reconcile(found, "ada@example.com", "Welcome"), dict[str, str])
    send_email(481, "Welcome")  # type: ignore[arg-type]
    send_email("ada@example.com")  # type: ignore[call-arg]
    send_email.detailed("ada@example.com", "Welcome", cc="bo@example.com")  # type: ignore[call-arg]
    send_email.key_of(to=1, subject="Welcome")  # type: ignore[arg-type]
    text: str = send_email("ada@example.com", "Welcome")  # type: ignore[assignment]


@client.idempotent("reports.build")
async def build(report_id: int) -> list[int]:
    return [report_id]


@aclient.idempotent("reports.fetch", key=lambda report_id: str(report_id))
async def fetch(report_id: int, *, fresh: bool = False) -> str:
    return f"report {report_id}"


async def found_async(report_id: int, *, fresh: bool = False) -> str:
    return "found"


async def async_calls() -> None:
    assert_type(await build(7), list[int])
    assert_type((await build.detailed(7)).value, list[int])
    assert_type(build.key_of(7), OperationKey)
    assert_type(await fetch(7, fresh=True), str)
    assert_type(await fetch.reconcile(found_async, 7), str)
    await build("seven")  # type: ignore[arg-type]
    await fetch(7, True)  # type: ignore[call-arg]


class Mailer:
    @client.idempotent("email.send", key=lambda self, to: to)
    def send(self, to: str) -> int:
        return 1

    @aclient.idempotent("email.send", key=lambda self, to: to)
    async def send_later(self, to: str) -> int:
        return 1


async def methods() -> None:
    mailer = Mailer()
    assert_type(mailer.send("ada@example.com"), int)
    assert_type(mailer.send.detailed("ada@example.com").value, int)
    assert_type(mailer.send.key_of("ada@example.com"), OperationKey)
    assert_type(Mailer.send(mailer, "ada@example.com"), int)
    assert_type(await mailer.send_later("ada@example.com"), int)
    mailer.send(481)  # type: ignore[arg-type]


async def listing() -> None:
    for record in client.list_records(namespace="email.send", statuses=[RecordStatus.UNKNOWN], page_size=100):
        assert_type(record, Record)
        assert_type(record.status, RecordStatus)
    page = client.list_page(statuses=[RecordStatus.AWAITING_APPROVAL])
    assert_type(page, RecordPage)
    assert_type(page.next_page_token, str | None)
    async for listed in aclient.list_records(parent=OperationKey("orders.place", "o-1")):
        assert_type(listed, Record)
    assert_type(client.purge(OperationKey("email.send", "k"), force=True), bool)
    client.list_records(statuses=7)  # type: ignore[arg-type]


def reserve(sku: str, count: int) -> dict[str, int]:
    return {sku: count}


def release(hold: dict[str, int]) -> None: ...


async def charge(cents: int) -> str:
    return f"ch-{cents}"


async def refund(charge_id: str) -> None: ...


def sagas() -> None:
    key = OperationKey.of("orders.place", "o-1", "v1")

    def place(saga: oncekey.Saga) -> list[str]:
        hold = saga.step("reserve", reserve, "sku-1", 2, compensate=release)
        assert_type(hold, dict[str, int])
        saga.step("reserve-again", reserve, "sku-1", 2, compensate=refund)  # type: ignore[misc]
        return list(hold)

    assert_type(client.saga(key, retention=3600, budget={"max_children": 4}).run(place), list[str])
    with client.saga(key, lease_ttl=5, retryable=(ConnectionError,)) as saga:
        assert_type(saga, oncekey.Saga)
        assert_type(saga.step("reserve", reserve, "sku-1", 2), dict[str, int])
    client.saga("orders.place/o-1")  # type: ignore[arg-type]


async def async_sagas() -> None:
    key = OperationKey.of("orders.place", "o-1", "v1")

    async def place(saga: oncekey.AsyncSaga) -> str:
        charged = await saga.step("charge", charge, 1500, compensate=refund)
        assert_type(charged, str)
        return charged

    assert_type(await aclient.saga(key).run(place), str)
    async with aclient.saga(key) as saga:
        assert_type(saga, oncekey.AsyncSaga)


async def agent_safety() -> None:
    key = OperationKey.of("email.send", "ticket-7", "notify", "v1")
    claimed = client.claim(
        key, ["ada@example.com"], intent_guard="refuse", intent_window=600, repeat_intent=False,
        budget=RunBudget(max_children=3, max_per_namespace={"email.send": 1}),
    )  # fmt: skip
    assert_type(claimed.intent_matches, tuple[IntentMatch, ...])
    assert_type(claimed.intent_matches[0].status, RecordStatus)
    client.claim(key, intent_guard=IntentGuard.WARN, budget={"max_children": 2})
    client.claim(key, intent_guard="loud")  # type: ignore[arg-type]
    client.claim(key, budget=3)  # type: ignore[arg-type]
    done = send_email.detailed("ada@example.com", "Welcome")
    assert_type(done.intent_matches, tuple[IntentMatch, ...])
    try:
        client.run(key, None, lambda lease: None, intent_guard="warn", budget={"max_children": 2})
    except oncekey.DuplicateIntent as e:
        assert_type(e.matches, tuple[IntentMatch, ...])
        assert_type(e.keys, tuple[str, ...])
    except oncekey.BudgetExhausted as e:
        assert_type(e.spent, int)
        assert_type(e.limit, str)
        assert_type(e.parent, OperationKey | None)
    record = client.lookup(key)
    if record is not None and record.budget is not None:
        assert_type(record.budget, oncekey.BudgetUsage)
        assert_type(record.budget.budget.max_per_namespace, Mapping[str, int])
    for dup in client.list_duplicate_intents("email.send", page_size=50):
        assert_type(dup, DuplicateIntentGroup)
        assert_type(dup.claims, tuple[IntentMatch, ...])
    page = await aclient.list_duplicate_intents_page(namespace="email.send")
    assert_type(page, oncekey.DuplicateIntentPage)
    async for listed in aclient.list_duplicate_intents():
        assert_type(listed.keys, tuple[str, ...])
    assert_type((await aclient.claim(key, repeat_intent=True)).outcome, oncekey.Outcome)
