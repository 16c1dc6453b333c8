"""What the ``AsyncClient`` does when the caller cancels a running operation: it never releases the
lease while the function may still be running.

Cancelling a task that awaits ``asyncio.to_thread(send)`` (or ``loop.run_in_executor(None, send)``)
ends the await at once, but not the thread: ``send`` goes on, and its side effect may still
happen. Releasing the key then would let a retry send a second time. So the client wraps the event
loop's default executor (``TrackingExecutor``: the same threads and shutdown, only watched): every
call submitted from inside a wrapped function (its lease is in the context) is recorded on the
lease, except the name lookups asyncio itself runs there (``loop.getaddrinfo``), which have no
effect. On the caller's cancellation:

- a function that has not called into such a thread is cancelled at once; once it has stopped,
  the key is released for a retry (Fail RETRYABLE), except an at-most-once one: a request it sent
  before the cancellation may have reached the other side, so it is left to run out and
  reconciliation (a function that knows nothing went out catches ``CancelledError`` and raises an
  exception of its own, which releases the key as usual);
- a function that has (even one whose thread is done: its result may not have reached the
  function yet) is not cancelled: it is left to finish, its lease kept alive, for at most one lease
  length (``lease_ttl``, default 30 s), and its outcome is recorded as usual (a value: Complete, so
  a retry replays it; an exception: Fail as it says);
- a function still running after that is cancelled, and neither it nor one that ends cancelled
  after calling into a thread is settled: the lease is no longer renewed and runs out, so an
  at-least-once operation may be taken over (and run again) and an at-most-once one becomes
  ``UNKNOWN`` for reconciliation. Never Fail RETRYABLE while the effect may still be under way.

The caller gets ``CancelledError`` in every case, once this is done.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from oncekey._core import DEFAULT_LEASE_TTL, Options
from oncekey.lease import AsyncKeepAlive, Lease, current_lease
from oncekey.types import Semantics

if TYPE_CHECKING:
    from oncekey.aio import AsyncClient

log = logging.getLogger("oncekey")

T = TypeVar("T")

_STOP = 1.0
"""Seconds a function cancelled after the grace period gets to stop."""
_MISSING = object()
_LOOKUPS: tuple[Callable[..., Any], ...] = (socket.getaddrinfo, socket.getnameinfo)
"""What asyncio runs in the default executor for ``loop.getaddrinfo`` / ``getnameinfo``."""


class TrackingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The event loop's default executor, watched: each call is submitted to ``inner`` (the loop's
    own executor) and, when it comes from inside a wrapped function, recorded on its lease."""

    def __init__(self, inner: concurrent.futures.ThreadPoolExecutor):
        super().__init__(max_workers=1)  # starts no thread: every call goes to ``inner``
        self._inner = inner

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future = self._inner.submit(fn, *args, **kwargs)
        lease = current_lease()
        if lease is not None and fn not in _LOOKUPS:
            lease._track(future)
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._inner.shutdown(wait=wait, cancel_futures=cancel_futures)
        super().shutdown(wait=False)


def track_threads(loop: asyncio.AbstractEventLoop) -> bool:
    """Makes ``loop``'s default executor a ``TrackingExecutor`` (once); False when the loop has no
    standard default executor to wrap (e.g. another event loop implementation)."""
    current = getattr(loop, "_default_executor", _MISSING)
    if isinstance(current, TrackingExecutor):
        return True
    if current is _MISSING or not (current is None or isinstance(current, concurrent.futures.ThreadPoolExecutor)):
        return False
    inner = current or concurrent.futures.ThreadPoolExecutor(thread_name_prefix="asyncio")
    loop.set_default_executor(TrackingExecutor(inner))
    return True


def released_when_cancelled(lease: Lease, options: Options, tracked: bool) -> bool:
    """Whether a function that ended cancelled certainly stopped without leaving an effect under
    way: no thread was ever called (or seen), and its operation may run again (at-least-once)."""
    return tracked and not lease._used_threads() and options.semantics is not Semantics.AT_MOST_ONCE


async def after_cancel(
    client: AsyncClient,
    lease: Lease,
    keep_alive: AsyncKeepAlive,
    work: asyncio.Future[Any],
    lost: asyncio.Event,
    options: Options,
    tracked: bool,
) -> None:
    """Stops (or lets finish) a function whose caller was cancelled, then settles its lease, or
    leaves it to run out when the function may still be running (see the module's doc)."""
    loop = asyncio.get_running_loop()
    grace = options.lease_ttl or DEFAULT_LEASE_TTL
    deadline = loop.time() + grace
    if lease._used_threads():
        log.info("oncekey: %s was cancelled after calling into a thread: letting it finish (at most %.0f s)", lease.key.namespace, grace)
    else:
        work.cancel()
    watcher = asyncio.ensure_future(lost.wait())
    try:
        await asyncio.wait({work, watcher}, timeout=max(deadline - loop.time(), 0.0), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not work.done():
        work.cancel()
        await asyncio.wait({work}, timeout=_STOP)
    await keep_alive.stop()
    if lease.lost.is_set():
        return  # another holder has it: nothing to record under this token
    unsure = not work.done() or bool(lease._running_threads()) or (work.cancelled() and not released_when_cancelled(lease, options, tracked))
    if unsure:
        log.warning(
            "oncekey: %s was cancelled while its function may still be running (a thread, or it did not stop): "
            "its lease is left to run out instead of being released",
            lease.key.namespace,
        )
        return
    if work.cancelled():
        await client._settle_failure(lease, asyncio.CancelledError("cancelled by the caller"), options)
        return
    exc = work.exception()
    if exc is not None:
        await client._settle_failure(lease, exc, options)
        return
    await client._settle_success(lease, work.result())
