"""Sagas: a parent operation whose steps are child operations, each with a compensation, run once
each through the ledger (docs/api.md "Client sagas", docs/agents.md "Sagas (Python)").

``client.saga(key)`` is an AT_MOST_ONCE operation claimed at the start and kept alive while it
runs. Each ``saga.step(name, fn, *args, compensate=...)`` is the child ``key.child(name)`` run
once (its arguments fingerprinted, its output stored). When a step fails for good, the
compensations of the completed steps run in reverse order, each the child
``key.child("compensate-" + name)`` run once with the step's output, and the saga fails FINAL
(code 409). A compensation that fails for good leaves the saga to lapse into UNKNOWN for an
operator. Running a saga again with its key resumes it from the ledger: completed steps and
compensations replay instead of running again.

The sync ``Saga`` and the asyncio ``AsyncSaga`` drive the clients' own once-only machinery
(``_acquire``, ``_run``, the keep-alive); their decisions are ``oncekey._saga``'s.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, TypeVar

from oncekey import _core
from oncekey._core import Done, Options
from oncekey._saga import LAPSE_TTL, parent_fingerprint, SagaOptions, SagaState, guard, guard_async, returns_of, step_arguments
from oncekey.codec import decode_result
from oncekey.errors import Error, LeaseLost, NeedsReconciliation, OperationFailed, SagaError
from oncekey.fingerprint import fingerprint
from oncekey.key import OperationKey
from oncekey.lease import AsyncKeepAlive, Lease, SyncKeepAlive
from oncekey.types import Disposition, LeaseGrant, Record, RecordStatus

if TYPE_CHECKING:
    from oncekey.aio import AsyncClient
    from oncekey.client import Client

log = logging.getLogger("oncekey")

R = TypeVar("R")


class _Base:
    """What both sagas share: their state and what a run of them has found out."""

    def __init__(self, key: OperationKey, options: SagaOptions):
        if not isinstance(key, OperationKey):
            raise TypeError(f"a saga's key is an oncekey.OperationKey, not {type(key).__name__}")
        self.key = key
        """The saga's key; its steps are ``key.child(name)``."""
        self.replayed = False
        """True when the saga had finished before: nothing runs, its steps only replay."""
        self.result: Any = None
        """What the saga returned (``run``'s function), or what a ``with`` block set it to; the
        stored result when ``replayed``."""
        self.record: Record | None = None
        """The saga's record once it succeeded."""
        self._options = options
        self._state = SagaState(key, options)
        self._lease: Lease | None = None
        self._begun = False
        self._ended = False

    @property
    def lease(self) -> Lease | None:
        """The saga's own lease while it runs (``.token`` is its fencing token), else None."""
        return self._lease

    def _start(self) -> None:
        if self._begun:
            raise SagaError(f"saga {self.key}: a Saga object runs once; call client.saga(key) again to run it again", self.key)
        self._begun = True

    def _open(self, name: str) -> OperationKey:
        """The key of step ``name``, once the saga is known to be running (or replaying)."""
        if not self._begun:
            raise SagaError(f"saga {self.key}: enter it (with / async with) or use run() before its steps", self.key, name)
        if self._ended or (self._lease is None and not self.replayed):
            raise SagaError(f"saga {self.key} is not running: step {name} does not run", self.key, name)
        key = self._state.child(name)
        if self._lease is not None:
            self._lease.raise_if_lost()
        return key

    def _replayed_step(self, name: str, record: Record | None, returns: Any) -> Any:
        """A step of a saga that had finished before: its stored output, never a run."""
        if record is not None and record.status is RecordStatus.SUCCEEDED and record.result is not None:
            return decode_result(record.result, returns)
        status = record.status.value if record is not None else "absent"
        raise SagaError(
            f"saga {self.key} had finished, but step {name} has no stored output ({status}): nothing runs in a finished saga",
            self.key,
            name,
        )


class Saga(_Base):
    """A saga of the sync ``Client`` (``client.saga(key)``): ``saga.run(fn)`` calls ``fn(saga)``,
    or ``with client.saga(key) as saga:`` runs the block; inside, ``saga.step(...)`` runs each
    step once. See the module's documentation."""

    def __init__(self, client: Client, key: OperationKey, options: SagaOptions):
        super().__init__(key, options)
        self._client = client
        self._keep_alive: SyncKeepAlive | None = None

    def __enter__(self) -> Saga:
        self._begin(None)
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self._end(exc)

    def run(self, fn: Callable[[Saga], R]) -> R:
        """Runs the saga: ``fn(saga)``, whose return value (JSON) is the saga's stored result.
        A saga that had finished returns its stored result without calling ``fn``; one that had
        been rolled back raises ``SagaRolledBack``."""
        self._begin(returns_of(fn))
        if self.replayed:
            value: R = self.result
            return value
        try:
            value = fn(self)
        except BaseException as exc:
            self._end(exc)
            raise
        self.result = value
        self._end(None)
        return value

    def step(self, name: str, fn: Callable[..., R], /, *args: Any, compensate: Callable[[R], Any] | None = None, **kwargs: Any) -> R:
        """Runs step ``name``, ``fn(*args, **kwargs)``, once: the child ``key.child(name)``, its
        arguments fingerprinted, its output (JSON) stored and replayed on a resume. ``compensate``
        is called with the output to undo it if a later step fails for good. An exception of
        ``fn`` fails the step for good (the saga then rolls back) and is raised here, unless it is
        retryable (``oncekey.Unavailable``, ``InProgress``, ``LeaseLost``, the saga's
        ``retryable`` classes): then the step and the saga are released for a later run, as they
        are when the step was done before with other arguments (``KeyReused``). Inside ``fn``,
        ``oncekey.current_lease()`` is the step's lease. Call steps from one thread."""
        key = self._open(name)
        returns = returns_of(fn)
        if self.replayed:
            stored: R = self._replayed_step(name, self._client.lookup(key), returns)
            return stored
        call = guard(fn, args, kwargs, self._options.retryable)
        try:
            done = self._client._run(key, fingerprint(step_arguments(args, kwargs)), call, self._options.child(), returns, False)
        except BaseException as exc:
            error = self._state.step_error(name, exc)
        else:
            self._state.step_done(name, done, compensate)
            output: R = done.value
            return output
        raise error

    # The saga's own operation.

    def _begin(self, returns: Any) -> None:
        self._start()
        options = self._options.parent()
        client = self._client
        owner = _core.run_owner(options, client._owner)
        got: Done[Any] | LeaseGrant | None = None
        reconcile = False
        while got is None:
            try:
                got = client._acquire(self.key, parent_fingerprint(self.key.key), options, owner, returns, reconcile)
            except NeedsReconciliation:
                if reconcile:
                    raise
                reconcile = True  # a run died (or a compensation failed): resume it
            except OperationFailed as e:
                raise self._state.stored_failure(e.error, e.record) from None
        if isinstance(got, Done):
            self.replayed, self.result, self.record = True, got.value, got.record
            return
        self._lease = Lease(self.key, got)
        self._keep_alive = SyncKeepAlive(client, self._lease, options.lease_ttl)

    def _end(self, exc: BaseException | None) -> None:
        """Settles the saga after its code ran (``exc``: what it raised); returns normally when
        it succeeded or was released for a later run (the caller re-raises ``exc``)."""
        self._ended = True
        lease = self._lease
        if self.replayed or lease is None:
            return
        try:
            self._conclude(lease, exc)
        finally:
            self._stop()

    def _conclude(self, lease: Lease, exc: BaseException | None) -> None:
        state, client = self._state, self._client
        if lease.lost.is_set():
            raise LeaseLost(lease.token, operation_error=exc if isinstance(exc, Exception) else None)
        if exc is not None and state.body_error(exc):
            self._stop()
            client._settle_failure(lease, exc, Options())
            return
        if state.stuck is not None:
            self._leave_unknown(lease)
            raise state.needs_reconciliation() from state.stuck.exc
        if state.failure is None:
            state.check_result(self.result)  # a result that is not JSON fails the saga: rolled back
        if state.failure is not None:
            self._roll_back(lease)
        self._stop()
        self.record = client._settle_success(lease, self.result).record

    def _roll_back(self, lease: Lease) -> None:
        """Runs the compensations of the completed steps in reverse order, then fails the saga
        for good; always raises."""
        state, client = self._state, self._client
        assert state.failure is not None
        for step in reversed(state.completed):
            if step.compensate is None:
                continue
            lease.raise_if_lost()
            call = guard(step.compensate, (step.output,), {}, self._options.retryable)
            try:
                client._run(state.compensation(step.name), fingerprint(step.arguments), call, self._options.compensation(), None, False)
            except BaseException as exc:
                again = state.compensation_error(step.name, exc)
            else:
                continue
            if again is not None:
                self._stop()
                client._settle_failure(lease, again, Options())
                raise again
            self._leave_unknown(lease)
            assert state.stuck is not None
            raise state.needs_reconciliation() from state.stuck.exc
        error = state.rolled_back_error()
        self._stop()
        try:
            record = client.fail(self.key, lease.token, error, Disposition.FINAL)
        except LeaseLost as e:
            raise LeaseLost(lease.token, e.reason) from None
        raise state.rolled_back(error, record) from state.failure.exc

    def _leave_unknown(self, lease: Lease) -> None:
        """Stops renewing the saga's lease and shortens it, so that it lapses into UNKNOWN (listed
        for operators) at once; a failure to shorten it only makes that take a lease longer."""
        self._stop()
        try:
            self._client.renew(self.key, lease.token, LAPSE_TTL)
        except Error as e:
            log.warning("oncekey: saga %s left for reconciliation; its lease was not shortened: %s", self.key.namespace, e)

    def _stop(self) -> None:
        if self._keep_alive is not None:
            self._keep_alive.stop()
            self._keep_alive = None


class AsyncSaga(_Base):
    """A saga of the ``AsyncClient`` (``client.saga(key)``): ``await saga.run(fn)`` with an
    ``async def fn(saga)``, or ``async with client.saga(key) as saga:``; inside, ``await
    saga.step(...)`` with async (or plain) functions. As ``Saga`` otherwise."""

    def __init__(self, client: AsyncClient, key: OperationKey, options: SagaOptions):
        super().__init__(key, options)
        self._client = client
        self._keep_alive: AsyncKeepAlive | None = None

    async def __aenter__(self) -> AsyncSaga:
        await self._begin(None)
        return self

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        await self._end(exc)

    async def run(self, fn: Callable[[AsyncSaga], Awaitable[R]]) -> R:
        """As ``Saga.run``, with an ``async def fn(saga)``."""
        await self._begin(returns_of(fn))
        if self.replayed:
            value: R = self.result
            return value
        try:
            value = await fn(self)
        except BaseException as exc:
            await self._end(exc)
            raise
        self.result = value
        await self._end(None)
        return value

    async def step(
        self, name: str, fn: Callable[..., Awaitable[R]], /, *args: Any, compensate: Callable[[R], Any] | None = None, **kwargs: Any
    ) -> R:
        """As ``Saga.step``; ``fn`` and ``compensate`` are coroutine functions (a plain function
        also works, and then runs on the event loop)."""
        key = self._open(name)
        returns = returns_of(fn)
        if self.replayed:
            stored: R = self._replayed_step(name, await self._client.lookup(key), returns)
            return stored
        call = guard_async(fn, args, kwargs, self._options.retryable)
        try:
            done = await self._client._run(key, fingerprint(step_arguments(args, kwargs)), call, self._options.child(), returns, False)
        except BaseException as exc:
            error = self._state.step_error(name, exc)
        else:
            self._state.step_done(name, done, compensate)
            output: R = done.value
            return output
        raise error

    async def _begin(self, returns: Any) -> None:
        self._start()
        options = self._options.parent()
        client = self._client
        owner = _core.run_owner(options, client._owner)
        got: Done[Any] | LeaseGrant | None = None
        reconcile = False
        while got is None:
            try:
                got = await client._acquire(self.key, parent_fingerprint(self.key.key), options, owner, returns, reconcile)
            except NeedsReconciliation:
                if reconcile:
                    raise
                reconcile = True
            except OperationFailed as e:
                raise self._state.stored_failure(e.error, e.record) from None
        if isinstance(got, Done):
            self.replayed, self.result, self.record = True, got.value, got.record
            return
        self._lease = Lease(self.key, got)
        self._keep_alive = AsyncKeepAlive(client, self._lease, options.lease_ttl)

    async def _end(self, exc: BaseException | None) -> None:
        """As ``Saga._end``; the saga is settled even when the caller is cancelled meanwhile."""
        self._ended = True
        lease = self._lease
        if self.replayed or lease is None:
            return
        try:
            await self._conclude(lease, exc)
        finally:
            await self._stop()

    async def _conclude(self, lease: Lease, exc: BaseException | None) -> None:
        state, client = self._state, self._client
        if lease.lost.is_set():
            raise LeaseLost(lease.token, operation_error=exc if isinstance(exc, Exception) else None)
        if exc is not None and state.body_error(exc):
            await self._stop()
            await client._protect(client._settle_failure(lease, exc, Options()))
            return
        if state.stuck is not None:
            await self._leave_unknown(lease)
            raise state.needs_reconciliation() from state.stuck.exc
        if state.failure is None:
            state.check_result(self.result)  # a result that is not JSON fails the saga: rolled back
        if state.failure is not None:
            await self._roll_back(lease)
        await self._stop()
        done: Done[Any] = await client._protect(client._settle_success(lease, self.result))
        self.record = done.record

    async def _roll_back(self, lease: Lease) -> None:
        state, client = self._state, self._client
        assert state.failure is not None
        for step in reversed(state.completed):
            if step.compensate is None:
                continue
            lease.raise_if_lost()
            call = guard_async(step.compensate, (step.output,), {}, self._options.retryable)
            try:
                await client._run(state.compensation(step.name), fingerprint(step.arguments), call, self._options.compensation(), None, False)
            except BaseException as exc:
                again = state.compensation_error(step.name, exc)
            else:
                continue
            if again is not None:
                await self._stop()
                await client._protect(client._settle_failure(lease, again, Options()))
                raise again
            await self._leave_unknown(lease)
            assert state.stuck is not None
            raise state.needs_reconciliation() from state.stuck.exc
        error = state.rolled_back_error()
        await self._stop()
        try:
            record = await client._protect(client.fail(self.key, lease.token, error, Disposition.FINAL))
        except LeaseLost as e:
            raise LeaseLost(lease.token, e.reason) from None
        raise state.rolled_back(error, record) from state.failure.exc

    async def _leave_unknown(self, lease: Lease) -> None:
        """As ``Saga._leave_unknown``."""
        await self._stop()
        try:
            await self._client._protect(self._client.renew(self.key, lease.token, LAPSE_TTL))
        except Error as e:
            log.warning("oncekey: saga %s left for reconciliation; its lease was not shortened: %s", self.key.namespace, e)

    async def _stop(self) -> None:
        if self._keep_alive is not None:
            keep_alive, self._keep_alive = self._keep_alive, None
            await keep_alive.stop()
