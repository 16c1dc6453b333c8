"""The operator's calls of both clients: listing records (docs/api.md "Listing") and suspected
duplicate intents ("ListDuplicateIntents"), reconciling a listed record, approval decisions
("Approval") and purging ("Purge"). ``Client`` and
``AsyncClient`` inherit them from ``Operations`` and ``AsyncOperations``; each call goes through
the client's ``_call``, so it is retried and its errors are typed like every other RPC.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Iterable, Iterator

import grpc

from oncekey import _core
from oncekey._core import Done, Options
from oncekey.errors import Error
from oncekey.key import OperationKey
from oncekey.lease import Lease
from oncekey.listing import (
    DuplicateIntentGroup,
    DuplicateIntentPage,
    Parent,
    RecordPage,
    duplicates_page_of,
    duplicates_request,
    list_request,
    page_of,
)
from oncekey.types import Record, RecordStatus

_RECONCILE_WAIT = 0.0
"""How long ``reconcile`` waits, by default, for a record another holder is reconciling."""


def _reconcile_options(record: Record, options: dict[str, Any]) -> Options:
    options.setdefault("wait", _RECONCILE_WAIT)
    options.setdefault("semantics", record.semantics)
    return Options(**options)


class Operations:
    """Listing, reconciliation, approval and purge for the sync ``Client``."""

    if TYPE_CHECKING:

        def _call(self, name: str, request: Any, extra_timeout: float = 0.0) -> Any: ...

        def _run(
            self, key: OperationKey, fp: bytes, fn: Callable[[Lease], Any], options: Options, returns: Any, reconcile: bool
        ) -> Done[Any]: ...

    def list_page(
        self,
        *,
        namespace: str | None = None,
        statuses: Iterable[RecordStatus | str] = (),
        parent: Parent | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> RecordPage:
        """``ListRecords``: one page of the caller's records, filtered by ``namespace``,
        ``statuses`` (any of them, as Lookup reports them) and ``parent`` (an ``OperationKey``);
        ``page_size`` 1..=1000 (default 100). Pass the page's ``next_page_token`` as
        ``page_token``, with the same filters, for the next page. Listings may lag changes by a few
        seconds; listed records lack result bodies and error details (``lookup`` has them)."""
        request = list_request(namespace, statuses, parent, page_size, page_token)
        return page_of(self._call("ListRecords", request))

    def list_records(
        self,
        *,
        namespace: str | None = None,
        statuses: Iterable[RecordStatus | str] = (),
        parent: Parent | None = None,
        page_size: int | None = None,
    ) -> Iterator[Record]:
        """Every record the filters select (see ``list_page``), page after page, fetched as the
        iteration goes: ``for record in client.list_records(statuses=[RecordStatus.UNKNOWN])``."""
        statuses = list(statuses)
        token: str | None = None
        while True:
            page = self.list_page(namespace=namespace, statuses=statuses, parent=parent, page_size=page_size, page_token=token)
            yield from page.records
            if page.next_page_token is None:
                return
            token = page.next_page_token

    def list_duplicate_intents_page(
        self, *, namespace: str | None = None, page_size: int | None = None, page_token: str | None = None
    ) -> DuplicateIntentPage:
        """``ListDuplicateIntents``: one page of the caller's suspected duplicate intents (of
        ``namespace``, when given): arguments claimed under more than one key of a namespace
        within its intent window, refused Claims included. ``page_size`` 1..=1000 (default 100);
        a page may hold fewer (even none) and still have a ``next_page_token``."""
        return duplicates_page_of(self._call("ListDuplicateIntents", duplicates_request(namespace, page_size, page_token)))

    def list_duplicate_intents(self, namespace: str | None = None, *, page_size: int | None = None) -> Iterator[DuplicateIntentGroup]:
        """Every suspected duplicate intent of the caller's tenant (of ``namespace``, when given),
        page after page, fetched as the iteration goes:
        ``for dup in client.list_duplicate_intents("email.send"): print(dup.keys)``."""
        token: str | None = None
        while True:
            page = self.list_duplicate_intents_page(namespace=namespace, page_size=page_size, page_token=token)
            yield from page.intents
            if page.next_page_token is None:
                return
            token = page.next_page_token

    def reconcile(self, record: Record, check: Callable[[Lease], Any], *, returns: Any = None, **options: Any) -> Done[Any]:
        """Reconciles a listed record (``UNKNOWN``: an at-most-once holder vanished mid-effect; or
        a lapsed ``PROCESSING`` one): claims it under its stored fingerprint with ``reconcile``,
        then ``check(lease)`` looks at the outside world by the key and returns the result
        (recorded as succeeded), or raises ``FinalError`` (failed for good), ``Abandon`` (it never
        happened: forget the key, so the next run performs it) or anything else (released for a
        retry). Options as ``run``; ``wait`` defaults to 0 (another reconciler holding it:
        ``InProgress``). A record that has settled meanwhile is replayed without calling ``check``."""
        fingerprint = record.fingerprint
        return self._run(record.operation_key, fingerprint, check, _reconcile_options(record, options), returns, True)

    def approve(
        self, namespace: str | OperationKey, key: str | None = None, note: str = "", *, fingerprint: bytes | None = None
    ) -> Record:
        """``Approve``: the operation awaiting approval becomes APPROVED and the next Claim acquires
        it; returns the record. Pass ``(namespace, key, note)`` or ``(operation_key, note)``. ``note`` (at most
        1 KiB) is kept with the decision; ``fingerprint`` (32 bytes, ``oncekey.fingerprint(args)``,
        or a listed record's ``fingerprint``) pins the decision to the arguments the approver saw
        (another stored one: ``KeyReused``). The same decision again is OK. Raises
        ``NotAwaitingApproval`` when the operation does not await approval (anymore),
        ``MissingScope`` without the ``approve`` scope, ``NotFound`` when there is no record."""
        request = _core.approve_request(*_core.decision_target(namespace, key, note), fingerprint)
        return Record.from_wire(self._call("Approve", request).record)

    def reject(
        self, namespace: str | OperationKey, key: str | None = None, note: str = "", *, fingerprint: bytes | None = None
    ) -> Record:
        """``Reject``: the operation awaiting approval fails for good with error ``{403, note}``,
        which every later run gets as ``OperationFailed``; returns the FAILED record. Arguments and
        errors as ``approve``."""
        request = _core.reject_request(*_core.decision_target(namespace, key, note), fingerprint)
        return Record.from_wire(self._call("Reject", request).record)

    def purge(self, namespace: str | OperationKey, key: str | None = None, *, force: bool = False) -> bool:
        """``Purge``: removes the record and its history, in any state (needs the ``admin``
        scope); the fencing sequence goes on, so the old holder's Complete, Fail and Renew get
        ``LeaseLost``. An unsettled at-most-once operation needs ``force=True`` (its effect may then
        run again; without it: ``UnsettledAtMostOnce``). True when this call purged it, False when
        there was no record (never was, expired, or purged by an earlier attempt of this call)."""
        request = _core.purge_request(_core.operation_key(namespace, key), force)
        try:
            self._call("Purge", request)
        except Error as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return False
            raise
        return True


class AsyncOperations:
    """Listing, reconciliation, approval and purge for the ``AsyncClient``: as ``Operations``."""

    if TYPE_CHECKING:

        async def _call(self, name: str, request: Any, extra_timeout: float = 0.0) -> Any: ...

        async def _run(
            self,
            key: OperationKey,
            fp: bytes,
            fn: Callable[[Lease], Awaitable[Any]],
            options: Options,
            returns: Any,
            reconcile: bool,
        ) -> Done[Any]: ...

    async def list_page(
        self,
        *,
        namespace: str | None = None,
        statuses: Iterable[RecordStatus | str] = (),
        parent: Parent | None = None,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> RecordPage:
        """``ListRecords``: one page, as ``Client.list_page``."""
        request = list_request(namespace, statuses, parent, page_size, page_token)
        return page_of(await self._call("ListRecords", request))

    async def list_records(
        self,
        *,
        namespace: str | None = None,
        statuses: Iterable[RecordStatus | str] = (),
        parent: Parent | None = None,
        page_size: int | None = None,
    ) -> AsyncIterator[Record]:
        """Every record the filters select, page after page:
        ``async for record in client.list_records(statuses=[RecordStatus.UNKNOWN])``."""
        statuses = list(statuses)
        token: str | None = None
        while True:
            page = await self.list_page(namespace=namespace, statuses=statuses, parent=parent, page_size=page_size, page_token=token)
            for record in page.records:
                yield record
            if page.next_page_token is None:
                return
            token = page.next_page_token

    async def list_duplicate_intents_page(
        self, *, namespace: str | None = None, page_size: int | None = None, page_token: str | None = None
    ) -> DuplicateIntentPage:
        """``ListDuplicateIntents``: one page, as ``Client.list_duplicate_intents_page``."""
        request = duplicates_request(namespace, page_size, page_token)
        return duplicates_page_of(await self._call("ListDuplicateIntents", request))

    async def list_duplicate_intents(
        self, namespace: str | None = None, *, page_size: int | None = None
    ) -> AsyncIterator[DuplicateIntentGroup]:
        """Every suspected duplicate intent, page after page:
        ``async for dup in client.list_duplicate_intents("email.send"): ...``."""
        token: str | None = None
        while True:
            page = await self.list_duplicate_intents_page(namespace=namespace, page_size=page_size, page_token=token)
            for intent in page.intents:
                yield intent
            if page.next_page_token is None:
                return
            token = page.next_page_token

    async def reconcile(
        self, record: Record, check: Callable[[Lease], Awaitable[Any]], *, returns: Any = None, **options: Any
    ) -> Done[Any]:
        """As ``Client.reconcile``, with an async ``check``."""
        fingerprint = record.fingerprint
        return await self._run(record.operation_key, fingerprint, check, _reconcile_options(record, options), returns, True)

    async def approve(
        self, namespace: str | OperationKey, key: str | None = None, note: str = "", *, fingerprint: bytes | None = None
    ) -> Record:
        """``Approve``: as ``Client.approve``."""
        request = _core.approve_request(*_core.decision_target(namespace, key, note), fingerprint)
        return Record.from_wire((await self._call("Approve", request)).record)

    async def reject(
        self, namespace: str | OperationKey, key: str | None = None, note: str = "", *, fingerprint: bytes | None = None
    ) -> Record:
        """``Reject``: as ``Client.reject``."""
        request = _core.reject_request(*_core.decision_target(namespace, key, note), fingerprint)
        return Record.from_wire((await self._call("Reject", request)).record)

    async def purge(self, namespace: str | OperationKey, key: str | None = None, *, force: bool = False) -> bool:
        """``Purge``: as ``Client.purge``."""
        request = _core.purge_request(_core.operation_key(namespace, key), force)
        try:
            await self._call("Purge", request)
        except Error as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return False
            raise
        return True
