"""``ListRecords`` (docs/api.md, "Listing"): which records to list and one page of them; and
``ListDuplicateIntents`` (docs/api.md, "ListDuplicateIntents"): the suspected duplicate intents the
intent guard saw.

The filters select the caller's tenant's records by namespace, by status (as Lookup reports it: a
lapsed at-most-once operation is ``UNKNOWN``) and by parent; every filter left empty matches every
record. Listed records carry neither history, result body nor error details: look a record up for
those. ``Client.list_records`` / ``AsyncClient.list_records`` (and ``list_duplicate_intents``) walk
the pages; this module only builds requests and reads answers (no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from oncekey.key import OperationKey
from oncekey.types import IntentMatch, Record, RecordStatus
from oncekey.v1 import ledger_pb2 as pb

MAX_PAGE_SIZE = 1000
"""The most records one page holds (the server refuses more; its default is 100)."""

NEEDS_ATTENTION = (RecordStatus.UNKNOWN, RecordStatus.AWAITING_APPROVAL)
"""The statuses of records someone must act on: reconcile (``UNKNOWN``) or decide
(``AWAITING_APPROVAL``). A lapsed at-least-once ``PROCESSING`` record also needs attention when it
stays so: list ``PROCESSING`` and compare ``lease_expires_at`` with the clock."""

Parent = OperationKey | tuple[str, str]


@dataclass(frozen=True)
class RecordPage:
    """One page of a listing."""

    records: list[Record]
    """The records of the page (possibly fewer than asked, even when more follow)."""
    next_page_token: str | None
    """Pass it as ``page_token`` (with the same filters) for the next page; None after the last."""


@dataclass(frozen=True)
class DuplicateIntentGroup:
    """One set of arguments claimed under more than one key of a namespace within its intent
    window, refused Claims included: a suspected duplicate intent (an agent that made up a new key
    for a retry)."""

    namespace: str
    fingerprint: bytes
    """The arguments' fingerprint (32 bytes, ``oncekey.fingerprint(args)``)."""
    claims: tuple[IntentMatch, ...]
    """The keys claimed with them, oldest first (at most 16)."""

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys, oldest first."""
        return tuple(c.key for c in self.claims)


@dataclass(frozen=True)
class DuplicateIntentPage:
    """One page of a listing of suspected duplicate intents."""

    intents: list[DuplicateIntentGroup]
    """The page's duplicate intents (possibly fewer than asked, even none, when more follow)."""
    next_page_token: str | None
    """Pass it as ``page_token`` (with the same namespace) for the next page; None after the last."""


def list_request(
    namespace: str | None,
    statuses: Iterable[RecordStatus | str],
    parent: Parent | None,
    page_size: int | None,
    page_token: str | None,
) -> pb.ListRecordsRequest:
    """A ``ListRecordsRequest``, its filters checked as the server checks them."""
    request = pb.ListRecordsRequest(namespace=namespace or "", page_token=page_token or "")
    if namespace:
        OperationKey(namespace, "k")  # InvalidKey for a malformed namespace
    for status in statuses:
        request.statuses.append(_status(status))
    if parent is not None:
        ref = parent if isinstance(parent, OperationKey) else OperationKey(*parent)
        request.parent.namespace = ref.namespace
        request.parent.key = ref.key
    request.page_size = _page_size(page_size)
    return request


def duplicates_request(namespace: str | None, page_size: int | None, page_token: str | None) -> pb.ListDuplicateIntentsRequest:
    """A ``ListDuplicateIntentsRequest``, checked as the server checks it."""
    if namespace:
        OperationKey(namespace, "k")  # InvalidKey for a malformed namespace
    return pb.ListDuplicateIntentsRequest(namespace=namespace or "", page_size=_page_size(page_size), page_token=page_token or "")


def page_of(response: pb.ListRecordsResponse) -> RecordPage:
    return RecordPage([Record.from_wire(r) for r in response.records], response.next_page_token or None)


def duplicates_page_of(response: pb.ListDuplicateIntentsResponse) -> DuplicateIntentPage:
    intents = [
        DuplicateIntentGroup(d.namespace, bytes(d.fingerprint), tuple(IntentMatch.from_wire(c) for c in d.claims))
        for d in response.intents
    ]
    return DuplicateIntentPage(intents, response.next_page_token or None)


def _page_size(page_size: int | None) -> int:
    """The wire page size (0: the server's default, 100)."""
    if page_size is None:
        return 0
    if isinstance(page_size, bool) or not isinstance(page_size, int):
        raise TypeError(f"page_size must be an int, not {type(page_size).__name__}")
    if not 0 <= page_size <= MAX_PAGE_SIZE:
        raise ValueError(f"page_size must be between 1 and {MAX_PAGE_SIZE} (0 or None: the server's 100), not {page_size}")
    return page_size


def _status(status: RecordStatus | str) -> pb.RecordStatus:
    try:
        value = RecordStatus(status)
    except ValueError:
        raise ValueError(f"statuses: {status!r} is not a RecordStatus") from None
    if value is RecordStatus.UNSPECIFIED:
        raise ValueError("statuses: UNSPECIFIED is not a status to list")
    return value.wire()
