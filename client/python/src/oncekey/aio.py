"""The asyncio ``AsyncClient`` (grpc.aio): the same API as the sync ``Client`` with coroutines.

A wrapped coroutine runs as its own task: when its lease is lost it is cancelled and the caller
gets ``LeaseLost``. When the caller is cancelled (``task.cancel()``, ``asyncio.timeout``), the
function is cancelled too (unless it is waiting on a thread: then it is left to finish), and the
key is settled with the client's own deadlines before the cancellation propagates: released for a
retry once the function has stopped, completed if it finished, left to run out if it may still be
running (``oncekey._cancel``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import Any, Awaitable, Callable, Coroutine, Mapping, Sequence

import grpc

from oncekey import _core
from oncekey._connect import Settings, new_stub
from oncekey._cancel import released_when_cancelled, after_cancel, track_threads
from oncekey._core import Done, Options
from oncekey._saga import DEFAULT_RETENTION, SagaOptions
from oncekey._wrap import AsyncIdempotentDecorator, KeySpec
from oncekey.codec import encode_result
from oncekey.errors import EncodeError, Error, LeaseLost, Unavailable, classify, is_transient
from oncekey.fingerprint import fingerprint as fingerprint_of
from oncekey.key import OperationKey
from oncekey.lease import AsyncKeepAlive, Lease, _current
from oncekey.operations import AsyncOperations
from oncekey.retry import Breaker, BreakerPolicy, CircuitOpen, RetryPolicy
from oncekey.saga import AsyncSaga
from oncekey.types import (
    Claimed,
    Disposition,
    IntentGuardMode,
    IntentMatch,
    LeaseGrant,
    Outcome,
    Record,
    RunBudget,
    Semantics,
    StoredError,
    StoredResult,
)

log = logging.getLogger("oncekey")


class AsyncClient(AsyncOperations):
    """A connection to an Oncekey server (asyncio API); arguments as for ``oncekey.Client``.

    The channel is opened on first use inside the running event loop; ``await client.close()``
    (or ``async with``) closes it.
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        tenant: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        timeout: float = 10.0,
        connect_timeout: float = 5.0,
        retry: RetryPolicy | None = None,
        breaker: BreakerPolicy | None = None,
        owner: str | None = None,
        options: Sequence[tuple[str, Any]] = (),
    ):
        self._init(
            Settings(
                target, token, tenant, credentials, timeout, connect_timeout,
                retry or RetryPolicy(), breaker or BreakerPolicy(), owner, tuple(options),
            )
        )  # fmt: skip

    @classmethod
    def _from_settings(cls, settings: Settings) -> AsyncClient:
        client = cls.__new__(cls)
        client._init(settings)
        return client

    def _init(self, settings: Settings) -> None:
        self._settings = settings
        self._channel: grpc.aio.Channel | None = None
        self._stub_: Any = None
        self._metadata = settings.metadata()
        self._breaker = Breaker(settings.breaker)
        self._owner = settings.owner or _core.default_owner()
        self._background: set[asyncio.Task[Any]] = set()

    @property
    def _stub(self) -> Any:
        if self._stub_ is None:
            address, creds = self._settings.address()
            opts = self._settings.channel_options()
            self._channel = (
                grpc.aio.insecure_channel(address, opts) if creds is None else grpc.aio.secure_channel(address, creds, opts)
            )
            self._stub_ = new_stub(self._channel)
        return self._stub_

    async def close(self) -> None:
        if self._background:
            await asyncio.wait(set(self._background), timeout=self._settings.timeout)
        if self._channel is not None:
            await self._channel.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # One method per RPC.

    async def claim(
        self,
        key: OperationKey,
        args: Any = None,
        *,
        payload_json: str | None = None,
        lease_ttl: float | None = None,
        retention: float | None = None,
        semantics: Semantics = Semantics.AT_LEAST_ONCE,
        owner: str | None = None,
        reconcile: bool = False,
        wait: float = 0.0,
        require_approval: bool = False,
        dry_run: bool = False,
        max_attempts: int | None = None,
        intent_guard: IntentGuardMode | None = None,
        intent_window: float | None = None,
        repeat_intent: bool = False,
        budget: RunBudget | Mapping[str, Any] | None = None,
    ) -> Claimed:
        """``Claim``: as ``Client.claim``."""
        options = Options(
            lease_ttl=lease_ttl, retention=retention, semantics=semantics,
            require_approval=require_approval, max_attempts=max_attempts, intent_guard=intent_guard,
            intent_window=intent_window, repeat_intent=repeat_intent, budget=budget,
        )  # fmt: skip
        request = _core.claim_request(
            key, b"", options, owner or self._owner, reconcile=reconcile, wait=wait, dry_run=dry_run
        )
        if payload_json is not None:
            request.payload_json = payload_json
        else:
            request.fingerprint = fingerprint_of(args)
        return Claimed.from_wire(await self._call("Claim", request, min(wait, _core.MAX_WAIT)), dry_run)

    async def complete(self, key: OperationKey, token: int, result: StoredResult | Any) -> Record:
        """``Complete``: as ``Client.complete``."""
        stored = encode_result(result)
        return Record.from_wire((await self._call("Complete", _core.complete_request(key, token, stored))).record)

    async def fail(
        self,
        key: OperationKey,
        token: int,
        error: StoredError | str,
        disposition: Disposition,
        *,
        nothing_ran: bool = False,
    ) -> Record | None:
        """``Fail``: as ``Client.fail`` (``nothing_ran=True``: nothing ran under this lease, so the
        acquisition does not count against ``max_attempts``)."""
        error = StoredError(message=error) if isinstance(error, str) else error
        response = await self._call("Fail", _core.fail_request(key, token, error, disposition, nothing_ran=nothing_ran))
        return Record.from_wire(response.record) if response.HasField("record") else None

    async def release_unused(self, key: OperationKey, token: int, error: StoredError | str) -> Record | None:
        """``Fail`` RETRYABLE with ``nothing_ran``: as ``Client.release_unused``."""
        return await self.fail(key, token, error, Disposition.RETRYABLE, nothing_ran=True)

    async def renew(self, key: OperationKey, token: int, lease_ttl: float | None = None) -> LeaseGrant:
        """``Renew``: as ``Client.renew``."""
        return LeaseGrant.from_wire((await self._call("Renew", _core.renew_request(key, token, lease_ttl))).lease)

    async def lookup(self, key: OperationKey) -> Record | None:
        """``Lookup``: as ``Client.lookup``."""
        try:
            return Record.from_wire((await self._call("Lookup", _core.lookup_request(key))).record)
        except Error as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    # Running an operation once.

    async def run(
        self,
        key: OperationKey,
        args: Any,
        fn: Callable[[Lease], Awaitable[Any]],
        *,
        reconcile: bool = False,
        returns: Any = None,
        **options: Any,
    ) -> Done[Any]:
        """As ``Client.run``, with an async ``fn``; it is cancelled if the lease is lost
        (``LeaseLost``), and the key is settled even when the caller is cancelled. A lease that had
        already run out when the Claim's answer arrived runs nothing, as with ``Client.run``."""
        return await self._run(key, fingerprint_of(args), fn, Options(**options), returns, reconcile)

    def idempotent(
        self, namespace: str, *, key: KeySpec = None, arguments: KeySpec = None, **options: Any
    ) -> AsyncIdempotentDecorator:
        """As ``Client.idempotent``, for ``async def`` functions."""
        return AsyncIdempotentDecorator(self, namespace, key, arguments, Options(**options))

    def saga(
        self,
        key: OperationKey,
        *,
        owner: str | None = None,
        retention: float | None = None,
        budget: RunBudget | Mapping[str, Any] | None = None,
        lease_ttl: float | None = None,
        wait: float = _core.DEFAULT_WAIT,
        semantics: Semantics = Semantics.AT_LEAST_ONCE,
        retryable: tuple[type[BaseException], ...] = (),
    ) -> AsyncSaga:
        """As ``Client.saga``: ``async with client.saga(key) as saga:`` and ``await
        saga.step(...)``, or ``await client.saga(key).run(fn)`` with an ``async def fn(saga)``."""
        options = SagaOptions(
            lease_ttl=lease_ttl, retention=DEFAULT_RETENTION if retention is None else retention, wait=wait,
            owner=owner, semantics=semantics, retryable=tuple(retryable), budget=budget,
        )  # fmt: skip
        return AsyncSaga(self, key, options)

    # Internals.

    async def _call(self, name: str, request: Any, extra_timeout: float = 0.0) -> Any:
        method = getattr(self._stub, name)
        settings = self._settings
        attempts = 1
        while True:
            try:
                probe = self._breaker.admit()
            except CircuitOpen as e:
                raise Unavailable(str(e)) from None
            try:
                response = await method(request, timeout=settings.timeout + extra_timeout, metadata=self._metadata)
            except grpc.aio.AioRpcError as e:
                self._breaker.record(is_transient(e))
                delay = settings.retry.delay(e, attempts)
                if delay is None:
                    raise classify(e) from e
                log.debug("oncekey: %s failed (%s); retry %d in %.2fs", name, e.code().name, attempts, delay)
                await asyncio.sleep(delay)
                attempts += 1
                await self._wait_ready(settings.connect_timeout)
                continue
            except BaseException:
                if probe:
                    self._breaker.abandon_probe()
                raise
            self._breaker.record(False)
            return response

    async def _wait_ready(self, timeout: float) -> None:
        """Waits (at most ``timeout``) for the connection to be up."""
        self._stub  # noqa: B018 - opens the channel
        assert self._channel is not None
        if self._channel.get_state(try_to_connect=True) == grpc.ChannelConnectivity.READY:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._channel.channel_ready(), timeout)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _protect(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Runs ``coro`` to the end even if the caller is cancelled meanwhile (then waits for it
        once more before the cancellation propagates; a second cancellation leaves it running in
        the background)."""
        task = self._spawn(coro)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({task})
            raise

    async def _run(self, key: OperationKey, fp: bytes, fn: Callable[[Lease], Awaitable[Any]], options: Options, returns: Any, reconcile: bool) -> Done[Any]:
        owner = _core.run_owner(options, self._owner)
        matches: list[IntentMatch] = []
        got = await self._acquire(key, fp, options, owner, returns, reconcile, matches)
        if isinstance(got, Done):
            return _core.with_matches(got, matches)
        return _core.with_matches(await self._acquired(key, got, fn, options), matches)

    async def _acquire(
        self,
        key: OperationKey,
        fp: bytes,
        options: Options,
        owner: str,
        returns: Any,
        reconcile: bool,
        matches: list[IntentMatch] | None = None,
    ) -> Done[Any] | LeaseGrant:
        """As ``Client._acquire``: claims ``key`` until it is acquired (a lease acquired while the
        caller is cancelled is released) or its outcome is known."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + options.wait
        while True:
            remaining = max(deadline - loop.time(), 0.0)
            request = _core.claim_request(key, fp, options, owner, reconcile=reconcile, wait=remaining)
            claimed = await self._claim_releasing_on_cancel(request, key, owner, min(remaining, _core.MAX_WAIT))
            if matches is not None and claimed.intent_matches:
                matches[:] = claimed.intent_matches  # the Claim that created the key names them
            step = _core.after_claim(claimed, owner, deadline - loop.time(), returns, key)
            if step.done is not None:
                return step.done
            if step.grant is not None:
                return step.grant
            if step.lapsed is not None:
                await self._release_lapsed(key, step.lapsed, deadline)
                continue
            await asyncio.sleep(step.sleep or 0.0)

    async def _release_lapsed(self, key: OperationKey, grant: LeaseGrant, deadline: float) -> None:
        """As ``Client._release_lapsed`` (``deadline`` on the event loop's clock)."""
        try:
            await self._call("Fail", _core.lapsed_release_request(key, grant.token))
        except LeaseLost:
            pass  # LEASE_LOST or ALREADY_SETTLED: someone else has it, or it is settled
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise LeaseLost(grant.token)
        await asyncio.sleep(min(remaining, _core.LAPSED_PAUSE))

    async def _claim_releasing_on_cancel(self, request: Any, key: OperationKey, owner: str, extra: float) -> Claimed:
        """A Claim that, if the caller is cancelled while it is in flight, releases the lease it
        may have acquired (instead of leaving the key PROCESSING for the whole lease)."""
        claim = self._spawn(self._call("Claim", request, extra))
        try:
            return Claimed.from_wire(await asyncio.shield(claim))
        except asyncio.CancelledError:
            await self._protect(self._release(claim, key, owner))
            raise

    async def _release(self, claim: asyncio.Task[Any], key: OperationKey, owner: str) -> None:
        await asyncio.wait({claim})
        if claim.cancelled() or claim.exception() is not None:
            return
        claimed = Claimed.from_wire(claim.result())
        grant = claimed.lease
        record = claimed.record
        if claimed.outcome is Outcome.IN_PROGRESS and record is not None and record.lease_owner == owner:
            grant = LeaseGrant(record.fencing_token, record.lease_expires_at, record.attempt)
        elif claimed.outcome is not Outcome.ACQUIRED:
            return
        assert grant is not None
        error = StoredError(message="cancelled by the caller before the operation ran")
        with contextlib.suppress(Error):
            await self._call("Fail", _core.fail_request(key, grant.token, error, Disposition.RETRYABLE))

    async def _acquired(self, key: OperationKey, grant: LeaseGrant, fn: Callable[[Lease], Awaitable[Any]], options: Options) -> Done[Any]:
        lease = Lease(key, grant)
        tracked = track_threads(asyncio.get_running_loop())
        keep_alive = AsyncKeepAlive(self, lease, options.lease_ttl)
        lost = asyncio.Event()
        lease._on_lost.append(lost.set)
        reset = _current.set(lease)
        try:
            work = asyncio.ensure_future(fn(lease))
        except BaseException as exc:  # fn is not a coroutine function, or raised at once
            await keep_alive.stop()
            await self._settle_failure(lease, exc, options)
            raise
        finally:
            _current.reset(reset)
        watcher = asyncio.ensure_future(lost.wait())
        try:
            await asyncio.wait({work, watcher}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            # The caller is cancelled: stop the function, or let it finish while a thread runs for
            # it, and never release the key while it may still be running (oncekey._cancel).
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._protect(after_cancel(self, lease, keep_alive, work, lost, options, tracked))
            raise
        finally:
            watcher.cancel()
        cancelled_for_loss = not work.done()
        if cancelled_for_loss:
            work.cancel()
        done: Done[Any] = await self._protect(self._conclude(lease, keep_alive, work, options, cancelled_for_loss))
        return done

    async def _conclude(self, lease: Lease, keep_alive: AsyncKeepAlive, work: asyncio.Future[Any], options: Options, cancelled_for_loss: bool) -> Done[Any]:
        """Waits for the function to stop, stops the keep-alive, then records what happened."""
        await asyncio.wait({work})
        await keep_alive.stop()
        if work.cancelled():
            if cancelled_for_loss or lease.lost.is_set():
                raise LeaseLost(lease.token)
            cancelled = asyncio.CancelledError("cancelled")
            if not released_when_cancelled(lease, options, True):
                log.warning("oncekey: %s was cancelled mid-effect: its lease is left to run out", lease.key.namespace)
                raise cancelled
            await self._settle_failure(lease, cancelled, options)
            raise cancelled
        exc = work.exception()
        if exc is not None:
            if isinstance(exc, LeaseLost) and exc.token == lease.token:
                raise exc
            if cancelled_for_loss or lease.lost.is_set():
                raise LeaseLost(lease.token, operation_error=exc) from exc
            await self._settle_failure(lease, exc, options)
            raise exc
        return await self._settle_success(lease, work.result())

    async def _settle_failure(self, lease: Lease, exc: BaseException, options: Options) -> None:
        """Records the function's failure; never raises (the caller sees the function's error)."""
        error, disposition = _core.failure(exc, options)
        try:
            await self._call("Fail", _core.fail_request(lease.key, lease.token, error, disposition))
        except Error as e:
            why = "the lease was lost" if isinstance(e, LeaseLost) else f"Fail failed: {e}"
            log.warning("oncekey: the failure of %s was not recorded: %s", lease.key.namespace, why)
            _core.note(exc, f"oncekey: this failure was not recorded ({why})")

    async def _settle_success(self, lease: Lease, value: Any) -> Done[Any]:
        try:
            result = encode_result(value)
        except EncodeError as e:
            await self._settle_failure(lease, e, Options(final=(EncodeError,)))
            raise
        try:
            response = await self._call("Complete", _core.complete_request(lease.key, lease.token, result))
        except LeaseLost as e:
            raise LeaseLost(lease.token, e.reason) from None
        except Error as e:
            _core.note(e, "oncekey: the operation ran but its outcome was not recorded")
            raise
        return Done(value, False, result, Record.from_wire(response.record))
