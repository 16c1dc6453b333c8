"""The sync ``Client``: one typed method per RPC, each retried on transient failures, and ``run`` /
``@client.idempotent`` which claim an operation, run its side effect only when acquired (keeping the
lease alive meanwhile), then complete or fail it, with their own deadlines.

Thread-safe: share one ``Client`` per process. ``@client.idempotent`` on an ``async def`` runs the
call through an ``AsyncClient`` of the running event loop, made on first use.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import weakref
from typing import Any, Callable, Mapping, Sequence

import grpc

from oncekey import _core
from oncekey._connect import Settings, new_stub
from oncekey._core import Done, Options
from oncekey._saga import DEFAULT_RETENTION, SagaOptions
from oncekey._wrap import IdempotentDecorator, KeySpec
from oncekey.codec import encode_result
from oncekey.errors import EncodeError, Error, LeaseLost, Unavailable, classify, is_transient
from oncekey.fingerprint import fingerprint as fingerprint_of
from oncekey.key import OperationKey
from oncekey.lease import Lease, SyncKeepAlive, _current
from oncekey.operations import Operations
from oncekey.retry import Breaker, BreakerPolicy, CircuitOpen, RetryPolicy
from oncekey.saga import Saga
from oncekey.types import (
    Claimed,
    Disposition,
    IntentGuardMode,
    IntentMatch,
    LeaseGrant,
    Record,
    RunBudget,
    Semantics,
    StoredError,
    StoredResult,
)

log = logging.getLogger("oncekey")

HEALTH_CHECK = "/grpc.health.v1.Health/Check"


class Client(Operations):
    """A connection to an Oncekey server (sync API).

    ``target`` is ``host:port`` (or ``http://host:port``; ``https://`` uses TLS). ``token`` is the
    bearer token of servers with a tokens file; ``tenant`` names the tenant of a dev-mode server.
    ``timeout`` bounds each attempt of a unary call (a Claim that waits gets that much longer);
    ``connect_timeout`` how long a retry waits for the connection to come back. Use as a context
    manager or ``close()`` it.
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
        self._settings = Settings(
            target, token, tenant, credentials, timeout, connect_timeout,
            retry or RetryPolicy(), breaker or BreakerPolicy(), owner, tuple(options),
        )  # fmt: skip
        address, creds = self._settings.address()
        opts = self._settings.channel_options()
        self._channel = grpc.insecure_channel(address, opts) if creds is None else grpc.secure_channel(address, creds, opts)
        self._stub: Any = new_stub(self._channel)
        self._probe = self._channel.unary_unary(HEALTH_CHECK, request_serializer=bytes, response_deserializer=bytes)
        self._metadata = self._settings.metadata()
        self._breaker = Breaker(self._settings.breaker)
        self._owner = owner or _core.default_owner()
        self._lock = threading.Lock()
        self._aio_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # One method per RPC.

    def claim(
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
        """``Claim``: may the caller perform ``key`` now? ``args`` are fingerprinted here (or pass
        ``payload_json`` for the server to fingerprint). Raises ``KeyReused`` when the key was
        first claimed with other arguments.

        ``require_approval`` creates the record awaiting approval (outcome ``AWAITING_APPROVAL``
        until someone approves or rejects it); ``max_attempts`` caps its acquisitions (past the cap
        a released operation fails for good with code 429, "attempts exhausted"); both are fixed by
        the first Claim of a key. ``dry_run`` answers what this Claim would get now, writing
        nothing (``Claimed.dry_run`` is True, ``lease`` None, ``record`` None when absent).

        ``intent_guard`` (``"off"``, ``"warn"``, ``"refuse"``; None: the namespace's setting),
        ``intent_window`` (seconds, 1 ..= 86400) and ``repeat_intent`` set the intent guard of a
        Claim of a new key: with ``"refuse"``, arguments another key of the namespace was claimed
        with within the window answer outcome ``DUPLICATE_INTENT`` (nothing written); with
        ``"warn"`` (or ``repeat_intent``) the Claim goes on; either way ``Claimed.intent_matches``
        names the other keys. ``budget`` (a ``RunBudget`` or a mapping) caps the children of this
        operation, fixed by its first Claim; a Claim of a new child beyond its parent's budget
        raises ``BudgetExhausted``."""
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
        return Claimed.from_wire(self._call("Claim", request, min(wait, _core.MAX_WAIT)), dry_run)

    def complete(self, key: OperationKey, token: int, result: StoredResult | Any) -> Record:
        """``Complete``: settles an acquired operation as succeeded (a non-``StoredResult`` result
        is stored as JSON); returns the SUCCEEDED record."""
        stored = encode_result(result)
        return Record.from_wire(self._call("Complete", _core.complete_request(key, token, stored)).record)

    def fail(
        self,
        key: OperationKey,
        token: int,
        error: StoredError | str,
        disposition: Disposition,
        *,
        nothing_ran: bool = False,
    ) -> Record | None:
        """``Fail``: settles an acquired operation as failed; None after ``ABANDON`` (deleted).

        ``nothing_ran=True`` says that nothing ran under this lease (typically one that had run out
        before its Claim's answer arrived, so the caller never started): the acquisition is then not
        counted against the operation's ``max_attempts``, and the receipt's reason is
        ``NOTHING_RAN``. Say it only when nothing ran; ``release_unused`` is the usual way."""
        error = StoredError(message=error) if isinstance(error, str) else error
        response = self._call("Fail", _core.fail_request(key, token, error, disposition, nothing_ran=nothing_ran))
        return Record.from_wire(response.record) if response.HasField("record") else None

    def release_unused(self, key: OperationKey, token: int, error: StoredError | str) -> Record | None:
        """``Fail`` RETRYABLE with ``nothing_ran``: releases a lease under which nothing ran (one
        that had run out before its Claim's answer arrived, so the caller never started), so that
        the next Claim acquires it again and the acquisition does not count against the
        operation's ``max_attempts``; returns the record (RETRY), as ``fail`` does. For an effect
        that may have run, use ``fail``."""
        return self.fail(key, token, error, Disposition.RETRYABLE, nothing_ran=True)

    def renew(self, key: OperationKey, token: int, lease_ttl: float | None = None) -> LeaseGrant:
        """``Renew``: extends the lease to ``lease_ttl`` seconds from now (server default 30)."""
        return LeaseGrant.from_wire(self._call("Renew", _core.renew_request(key, token, lease_ttl)).lease)

    def lookup(self, key: OperationKey) -> Record | None:
        """``Lookup``: the record of ``key``, or None when absent or expired."""
        try:
            return Record.from_wire(self._call("Lookup", _core.lookup_request(key)).record)
        except Error as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                return None
            raise

    # Running an operation once.

    def run(
        self,
        key: OperationKey,
        args: Any,
        fn: Callable[[Lease], Any],
        *,
        reconcile: bool = False,
        returns: Any = None,
        **options: Any,
    ) -> Done[Any]:
        """Runs ``fn(lease)`` unless the ledger already knows the outcome of ``key``.

        ACQUIRED: calls ``fn`` while a background thread keeps the lease alive, then Completes
        with its return value (JSON; a ``StoredResult`` as is) or Fails when it raises (``FinalError``
        for good, ``Abandon`` forgets the key, anything else releases it for a retry) and re-raises
        the function's own exception. COMPLETED: the stored value (decoded into ``returns``) without
        calling ``fn``. FAILED: ``OperationFailed``. IN_PROGRESS: waits up to ``wait`` seconds
        (default 60) for the other holder, then ``InProgress``. NEEDS_RECONCILIATION:
        ``NeedsReconciliation`` (pass ``reconcile=True`` to acquire it and find out).
        AWAITING_APPROVAL: waits up to ``wait`` seconds for the decision, then ``AwaitingApproval``
        (``fn`` never runs before an approval; a rejection is ``OperationFailed``, code 403).
        A lease that had already run out (on this machine's clock) when the Claim's answer arrived
        runs nothing: it is released for a retry (saying nothing ran, so not counted against
        ``max_attempts``) and the key claimed again while ``wait`` lasts, then ``LeaseLost`` (with
        no ``operation_error``).

        DUPLICATE_INTENT (``intent_guard="refuse"``: the same arguments were claimed under another
        key of the namespace within the intent window): ``DuplicateIntent`` (``.matches``), ``fn``
        never runs. A run of a new child beyond its parent's run budget: ``BudgetExhausted``.

        Options: ``lease_ttl``, ``retention``, ``semantics``, ``wait``, ``owner``, ``final``,
        ``abandon``, ``require_approval``, ``max_attempts``, ``intent_guard``, ``intent_window``,
        ``repeat_intent``, ``budget`` (see ``oncekey.Options``). ``Done.intent_matches`` names the
        other keys when the intent guard warned.
        """
        return self._run(key, fingerprint_of(args), fn, Options(**options), returns, reconcile)

    def idempotent(
        self,
        namespace: str,
        *,
        key: KeySpec = None,
        arguments: KeySpec = None,
        **options: Any,
    ) -> IdempotentDecorator:
        """Makes a function's side effect happen once per key, in one line::

            @client.idempotent("email.send", key=lambda to, subject: f"{to}:{subject}")
            def send_email(to: str, subject: str, body: str) -> dict: ...

        ``key`` receives the parameters it names and returns a str, a tuple of parts or an
        ``OperationKey`` (default: ``sha256:`` and the arguments' fingerprint). ``arguments``
        likewise returns the significant arguments to fingerprint (default: the call's arguments as
        a JSON array in parameter order, the same in every language: docs/api.md "Default arguments
        and key"). Works on sync functions (``Idempotent``) and async ones (``AsyncIdempotent``),
        methods included; the rest is as ``run`` (``lease_ttl``, ``semantics``, ``wait``, ...). The
        running operation's lease is ``oncekey.current_lease()``.
        """
        return IdempotentDecorator(self, namespace, key, arguments, Options(**options))

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
    ) -> Saga:
        """A saga with the parent key ``key``: steps run once each, and when one fails for good
        the completed ones are compensated in reverse order (docs/agents.md "Sagas (Python)")::

            with client.saga(OperationKey.of("orders.place", order_id, "v1")) as saga:
                hold = saga.step("reserve", reserve, order_id, compensate=release)
                saga.step("charge", charge, order_id, cents, compensate=refund)
                saga.result = {"hold": hold}

        or ``saga.run(fn)`` with ``fn(saga)`` returning the result. Running a saga again with its
        key resumes it (what was done replays) or replays its outcome. ``retention`` (seconds,
        default 7 days) is kept by the saga, its steps and compensations; ``lease_ttl`` is their
        lease (a dead run is resumed once it ran out); ``wait`` how long to wait for another
        process running the saga; ``semantics`` the steps' and compensations' (the saga itself
        is at most once); ``retryable`` exception classes of steps that release the saga for a
        later run instead of rolling it back; ``budget`` the saga's run budget
        (a ``RunBudget``, or ``{"max_children": n, "max_per_namespace": {ns: n}}``;
        compensations included)."""
        options = SagaOptions(
            lease_ttl=lease_ttl, retention=DEFAULT_RETENTION if retention is None else retention, wait=wait,
            owner=owner, semantics=semantics, retryable=tuple(retryable), budget=budget,
        )  # fmt: skip
        return Saga(self, key, options)

    # Internals.

    def _aio(self) -> Any:
        """The AsyncClient of the running event loop, with this client's settings."""
        from oncekey.aio import AsyncClient

        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._aio_clients.get(loop)
            if client is None:
                client = AsyncClient._from_settings(self._settings)
                self._aio_clients[loop] = client
            return client

    def _call(self, name: str, request: Any, extra_timeout: float = 0.0) -> Any:
        method = getattr(self._stub, name)
        settings = self._settings
        attempts = 1
        while True:
            try:
                probe = self._breaker.admit()
            except CircuitOpen as e:
                raise Unavailable(str(e)) from None
            try:
                response = method(request, timeout=settings.timeout + extra_timeout, metadata=self._metadata)
            except grpc.RpcError as e:
                self._breaker.record(is_transient(e))
                delay = settings.retry.delay(e, attempts)
                if delay is None:
                    raise classify(e) from e
                log.debug("oncekey: %s failed (%s); retry %d in %.2fs", name, e.code().name, attempts, delay)
                time.sleep(delay)
                attempts += 1
                self._wait_ready(settings.connect_timeout)
                continue
            except BaseException:
                if probe:
                    self._breaker.abandon_probe()
                raise
            self._breaker.record(False)
            return response

    def _wait_ready(self, timeout: float, stop: threading.Event | None = None) -> None:
        """Waits (at most ``timeout``) for the connection to be up, since a retry sent sooner would
        only fail fast: a health check that waits for the channel to be ready (any answer will
        do; no polling thread is left behind)."""
        deadline = time.monotonic() + timeout
        while not (stop is not None and stop.is_set()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            try:
                self._probe(b"", timeout=min(remaining, 0.5), wait_for_ready=True)
                return
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    return  # an answer, even an error, means the connection is up

    def _run(self, key: OperationKey, fp: bytes, fn: Callable[[Lease], Any], options: Options, returns: Any, reconcile: bool) -> Done[Any]:
        owner = _core.run_owner(options, self._owner)
        matches: list[IntentMatch] = []
        got = self._acquire(key, fp, options, owner, returns, reconcile, matches)
        if isinstance(got, Done):
            return _core.with_matches(got, matches)
        return _core.with_matches(self._acquired(key, got, fn, options), matches)

    def _acquire(
        self,
        key: OperationKey,
        fp: bytes,
        options: Options,
        owner: str,
        returns: Any,
        reconcile: bool,
        matches: list[IntentMatch] | None = None,
    ) -> Done[Any] | LeaseGrant:
        """Claims ``key`` until it is acquired (its lease, under which nothing has run yet) or its
        outcome is known (a ``Done``); the other outcomes raise as ``_core.after_claim`` says.
        ``matches`` gets the intent guard's matches, when a Claim named any."""
        deadline = time.monotonic() + options.wait
        while True:
            remaining = max(deadline - time.monotonic(), 0.0)
            request = _core.claim_request(key, fp, options, owner, reconcile=reconcile, wait=remaining)
            claimed = Claimed.from_wire(self._call("Claim", request, min(remaining, _core.MAX_WAIT)))
            if matches is not None and claimed.intent_matches:
                matches[:] = claimed.intent_matches  # the Claim that created the key names them
            step = _core.after_claim(claimed, owner, deadline - time.monotonic(), returns, key)
            if step.done is not None:
                return step.done
            if step.grant is not None:
                return step.grant
            if step.lapsed is not None:
                self._release_lapsed(key, step.lapsed, deadline)
                continue
            time.sleep(step.sleep or 0.0)

    def _release_lapsed(self, key: OperationKey, grant: LeaseGrant, deadline: float) -> None:
        """Releases a lease that had run out before its Claim's answer arrived (nothing ran under
        it, so the Fail says ``nothing_ran`` and the release does not use up an attempt), unless it
        is already gone (taken over or settled); past the wait, ``LeaseLost``, else a short pause
        before the next Claim."""
        try:
            self._call("Fail", _core.lapsed_release_request(key, grant.token))
        except LeaseLost:
            pass  # LEASE_LOST or ALREADY_SETTLED: someone else has it, or it is settled
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LeaseLost(grant.token)
        time.sleep(min(remaining, _core.LAPSED_PAUSE))

    def _acquired(self, key: OperationKey, grant: LeaseGrant, fn: Callable[[Lease], Any], options: Options) -> Done[Any]:
        lease = Lease(key, grant)
        keep_alive = SyncKeepAlive(self, lease, options.lease_ttl)
        reset = _current.set(lease)
        try:
            value = fn(lease)
        except BaseException as exc:
            keep_alive.stop()
            if lease.lost.is_set() and isinstance(exc, Exception):
                # The function stopped because the lease was lost (README: check lease.lost, raise):
                # nothing can be recorded under this token any more.
                if isinstance(exc, LeaseLost) and exc.token == lease.token:
                    raise
                raise LeaseLost(lease.token, operation_error=exc) from exc
            self._settle_failure(lease, exc, options)
            raise
        finally:
            _current.reset(reset)
        keep_alive.stop()
        return self._settle_success(lease, value)

    def _settle_failure(self, lease: Lease, exc: BaseException, options: Options) -> None:
        """Records the function's failure; never raises (the caller sees the function's error)."""
        error, disposition = _core.failure(exc, options)
        try:
            self._call("Fail", _core.fail_request(lease.key, lease.token, error, disposition))
        except Error as e:
            why = "the lease was lost" if isinstance(e, LeaseLost) else f"Fail failed: {e}"
            log.warning("oncekey: the failure of %s was not recorded: %s", lease.key.namespace, why)
            _core.note(exc, f"oncekey: this failure was not recorded ({why})")

    def _settle_success(self, lease: Lease, value: Any) -> Done[Any]:
        try:
            result = encode_result(value)
        except EncodeError as e:
            self._settle_failure(lease, e, Options(final=(EncodeError,)))
            raise
        try:
            response = self._call("Complete", _core.complete_request(lease.key, lease.token, result))
        except LeaseLost as e:
            raise LeaseLost(lease.token, e.reason) from None
        except Error as e:
            _core.note(e, "oncekey: the operation ran but its outcome was not recorded")
            raise
        return Done(value, False, result, Record.from_wire(response.record))
