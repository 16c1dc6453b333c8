"""The lease an operation runs under, and what keeps it alive through the server's KeepAlive stream
while the operation runs: a thread for the sync ``Client``, a task for the ``AsyncClient``.

The stream is reopened after a transport failure or a server restart (the server's first renewal
then says whether the lease still holds). The lease is lost only when the server answers LEASE_LOST
(or ALREADY_SETTLED: someone settled it with this token). KEEPALIVE_REPLACED (a newer stream of the
same lease took over) stops renewing without losing the lease. Nothing else is retried blindly, and
renewal stops the moment the operation ends, so a caller that goes away lets the lease run out.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import datetime as dt
import logging
import random
import threading
from typing import Any, Callable, Iterator

import grpc

from oncekey.errors import TRANSIENT_CODES, LeaseLost, reason, reason_value
from oncekey.key import OperationKey
from oncekey.types import LeaseGrant, duration
from oncekey.v1 import ledger_pb2 as pb

log = logging.getLogger("oncekey")

_LOST_REASONS = (pb.ERROR_REASON_LEASE_LOST, pb.ERROR_REASON_ALREADY_SETTLED)
_REOPENABLE = TRANSIENT_CODES | {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED}

_EOF: Any = getattr(grpc.aio, "EOF")  # the end of a stream's reads (missing from grpc's type stubs)

_current: contextvars.ContextVar[Lease | None] = contextvars.ContextVar("oncekey_lease", default=None)


def current_lease() -> Lease | None:
    """The lease of the operation running in this thread or task (inside a wrapped function), or
    None outside one."""
    return _current.get()


class Lease:
    """The lease an operation runs under.

    ``token`` is the fencing token: pass it to downstream systems that can fence. ``lost`` is a
    ``threading.Event`` set when the server says the lease is lost (another holder took the
    operation over): long sync functions should check it (``lease.raise_if_lost()``, or
    ``lease.lost.is_set()`` and raise) and stop; the call then raises ``LeaseLost``. Async
    functions are cancelled when it is lost.
    """

    def __init__(self, key: OperationKey, grant: LeaseGrant):
        self.key = key
        self.token = grant.token
        self.attempt = grant.attempt
        self.expires_at: dt.datetime | None = grant.expires_at
        self.lost = threading.Event()
        self._on_lost: list[Callable[[], None]] = []
        self._threads: set[concurrent.futures.Future[Any]] = set()
        self._threads_lock = threading.Lock()
        self._thread_calls = 0

    @property
    def fencing_token(self) -> int:
        """The fencing token (same as ``token``)."""
        return self.token

    def _track(self, future: concurrent.futures.Future[Any]) -> None:
        """Records a call running in a thread for this operation (``oncekey._cancel``)."""
        with self._threads_lock:
            self._threads.add(future)
            self._thread_calls += 1
        future.add_done_callback(self._untrack)

    def _untrack(self, future: concurrent.futures.Future[Any]) -> None:
        with self._threads_lock:
            self._threads.discard(future)

    def _running_threads(self) -> list[concurrent.futures.Future[Any]]:
        """The calls still running (or queued) in a thread for this operation."""
        with self._threads_lock:
            return [f for f in self._threads if not f.done()]

    def _used_threads(self) -> bool:
        """Whether the operation has called into a thread so far (its result may not have reached
        the function yet, even when the thread is done)."""
        with self._threads_lock:
            return self._thread_calls > 0

    def raise_if_lost(self) -> None:
        """Raises ``oncekey.LeaseLost`` once the lease is lost: call it between the steps of a long
        sync function (an async one is cancelled instead)."""
        if self.lost.is_set():
            raise LeaseLost(self.token)

    def _renewed(self, lease: pb.Lease) -> None:
        self.expires_at = LeaseGrant.from_wire(lease).expires_at

    def _lose(self) -> None:
        log.warning("oncekey: lease lost (namespace=%s, token=%d)", self.key.namespace, self.token)
        self.lost.set()
        for callback in self._on_lost:
            callback()

    def __repr__(self) -> str:
        return f"Lease({self.key}, token={self.token}, lost={self.lost.is_set()})"


def _request(key: OperationKey, token: int, lease_ttl: float | None) -> pb.KeepAliveRequest:
    return pb.KeepAliveRequest(namespace=key.namespace, key=key.key, lease_token=token, lease_ttl=duration(lease_ttl))


def _verdict(error: grpc.RpcError) -> str:
    """What a stream error means: ``lost``, ``stop`` or ``reopen``."""
    why = reason_value(reason(error))
    if why in _LOST_REASONS:
        return "lost"
    if error.code() in _REOPENABLE:
        return "reopen"
    if why == pb.ERROR_REASON_KEEPALIVE_REPLACED:
        log.info("oncekey: keep-alive replaced by a newer stream of the same lease")
    else:
        log.warning("oncekey: keep-alive stopped: %s", error.code().name)
    return "stop"


class _Backoff:
    def __init__(self, lease_ttl: float | None):
        self.max = min(max((lease_ttl or 30.0) / 3, 0.1), 5.0)
        self.reset()

    def reset(self) -> None:
        self.next = min(0.1, self.max)

    def take(self) -> float:
        delay = self.next * random.uniform(0.5, 1.0)
        self.next = min(self.next * 2, self.max)
        return delay


class SyncKeepAlive:
    """Keeps a lease alive from a background thread until ``stop``."""

    def __init__(self, client: Any, lease: Lease, lease_ttl: float | None):
        self._client = client
        self._lease = lease
        self._request = _request(lease.key, lease.token, lease_ttl)
        self._backoff = _Backoff(lease_ttl)
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._call: Any = None
        self._thread = threading.Thread(target=self._run, name="oncekey-keepalive", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.is_set():
            done = threading.Event()

            def requests(first: pb.KeepAliveRequest = self._request, done: threading.Event = done) -> Iterator[pb.KeepAliveRequest]:
                yield first
                done.wait()

            verdict = "reopen"
            try:
                with self._lock:
                    if self._stopped.is_set():
                        return
                    self._call = self._client._stub.KeepAlive(requests(), metadata=self._client._metadata)
                for lease in self._call:
                    self._backoff.reset()
                    self._lease._renewed(lease)
            except grpc.RpcError as e:
                verdict = "stop" if self._stopped.is_set() else _verdict(e)
            finally:
                done.set()
            if verdict == "lost":
                self._lease._lose()
                return
            if verdict == "stop":
                return
            if self._stopped.wait(self._backoff.take()):
                return
            self._client._wait_ready(self._backoff.max, self._stopped)

    def stop(self) -> None:
        """Stops renewing (the lease then runs out normally unless settled)."""
        with self._lock:
            self._stopped.set()
            if self._call is not None:
                self._call.cancel()
        self._thread.join(timeout=10)


class AsyncKeepAlive:
    """Keeps a lease alive from an asyncio task until ``stop``."""

    def __init__(self, client: Any, lease: Lease, lease_ttl: float | None):
        self._client = client
        self._lease = lease
        self._request = _request(lease.key, lease.token, lease_ttl)
        self._backoff = _Backoff(lease_ttl)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="oncekey-keepalive")

    async def _run(self) -> None:
        while True:
            call = self._client._stub.KeepAlive(metadata=self._client._metadata)
            verdict = "reopen"
            try:
                await call.write(self._request)
                while True:
                    lease = await call.read()
                    if lease is _EOF:
                        break
                    self._backoff.reset()
                    self._lease._renewed(lease)
            except grpc.aio.AioRpcError as e:
                verdict = _verdict(e)
            except (grpc.aio.UsageError, asyncio.InvalidStateError):
                verdict = "reopen"  # the stream died under the write
            finally:
                call.cancel()
            if verdict == "lost":
                self._lease._lose()
                return
            if verdict == "stop":
                return
            await asyncio.sleep(self._backoff.take())
            await self._client._wait_ready(self._backoff.max)

    async def stop(self) -> None:
        """Stops renewing and waits until the stream is closed."""
        self._task.cancel()
        await asyncio.wait({self._task})
