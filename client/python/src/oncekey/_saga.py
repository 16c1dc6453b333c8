"""What the sync and async sagas (``oncekey.saga``) share: their options, the keys and arguments of
steps and compensations, how an exception out of a step, a compensation or the saga's own code is
classified, and the texts of the saga's failures.

Plain decisions only: no I/O here. The I/O is the clients' own once-only machinery (``_acquire``,
``_run``, the keep-alive), which the sagas drive.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping

from oncekey import _core
from oncekey._core import Done, Options
from oncekey.codec import encode_result
from oncekey.errors import (
    DecodeError,
    EncodeError,
    FinalError,
    InProgress,
    KeyReused,
    LeaseLost,
    NeedsReconciliation,
    OperationFailed,
    SagaError,
    SagaNeedsReconciliation,
    SagaRolledBack,
    Unavailable,
    is_transient,
)
from oncekey.fingerprint import fingerprint
from oncekey.key import OperationKey
from oncekey.lease import Lease
from oncekey.types import JSON_CONTENT_TYPE, Record, RunBudget, Semantics, StoredError, StoredResult

DEFAULT_RETENTION = 7 * 24 * 3600.0
"""How long a saga's outcome, and its steps' and compensations', are kept by default (7 days)."""
COMPENSATE = "compensate-"
"""The step name prefix of compensations: the compensation of step S is the child ``compensate-S``."""
LAPSE_TTL = 1.0
"""The lease, in seconds, a saga left for reconciliation is renewed to (the shortest the server
allows), so that it turns UNKNOWN at once instead of at the end of its lease."""
ROLLED_BACK_CODE = 409
"""The code of a rolled-back saga's stored error."""


def parent_fingerprint(key: str) -> bytes:
    """The arguments of a saga's own Claim: ``{"saga": KEY}``, as every client library has them, so
    a saga started from one language resumes from another, and two sagas of a namespace are two
    intents to the intent guard (its steps carry their own arguments)."""
    return fingerprint({"saga": key})

_ROLLED_BACK = re.compile(r"rolled back: (?:step (?P<step>.*?) failed: )?(?P<cause>.*)", re.DOTALL)


@dataclass(frozen=True)
class SagaOptions:
    """How a saga and its children are claimed."""

    lease_ttl: float | None = None
    """The lease of the saga and of each step and compensation, in seconds (server default 30): a
    saga whose process died is resumed once its lease has run out."""
    retention: float = DEFAULT_RETENTION
    """How long the outcomes of the saga, its steps and compensations are kept."""
    wait: float = _core.DEFAULT_WAIT
    """How long a run waits for another process running the same saga (or step) before
    ``InProgress``."""
    owner: str | None = None
    semantics: Semantics = Semantics.AT_LEAST_ONCE
    """Of the steps and compensations (the saga itself is at most once)."""
    retryable: tuple[type[BaseException], ...] = ()
    """Exception classes of steps and compensations that release the saga for a later run instead
    of failing it for good (besides the client's own transient errors)."""
    budget: RunBudget | Mapping[str, Any] | None = None
    """The saga's run budget (a ``RunBudget``, or a mapping with ``max_children`` and/or
    ``max_per_namespace``), set by its first Claim."""

    def __post_init__(self) -> None:
        if not isinstance(self.retryable, tuple) or not all(
            isinstance(c, type) and issubclass(c, BaseException) for c in self.retryable
        ):
            raise TypeError("retryable must be a tuple of exception classes")
        if self.budget is not None:
            object.__setattr__(self, "budget", RunBudget.of(self.budget))

    def parent(self) -> Options:
        return Options(
            lease_ttl=self.lease_ttl, retention=self.retention, semantics=Semantics.AT_MOST_ONCE,
            wait=self.wait, owner=self.owner, budget=self.budget,
        )  # fmt: skip

    def child(self) -> Options:
        return Options(
            lease_ttl=self.lease_ttl, retention=self.retention, semantics=self.semantics,
            wait=self.wait, owner=self.owner,
        )  # fmt: skip

    def compensation(self) -> Options:
        # Its arguments are a step's output, not an intent: the same output of another saga's
        # step (None, say) is no duplicate for the intent guard, which must never block a rollback.
        return Options(
            lease_ttl=self.lease_ttl, retention=self.retention, semantics=self.semantics,
            wait=self.wait, owner=self.owner, repeat_intent=True,
        )  # fmt: skip


class StepFailed(FinalError):
    """Carries the exception a step or compensation raised through the client's run, which then
    fails the child for good with its text (``original`` is the exception itself)."""

    def __init__(self, original: Exception):
        error, _ = _core.failure(original, Options(final=(Exception,)))
        super().__init__(error.message, code=error.code, details=error.details)
        self.original = original


def retryable(exc: BaseException, extra: tuple[type[BaseException], ...]) -> bool:
    """Whether ``exc`` releases the saga for a later run rather than failing it for good: what
    the client itself calls transient (the ledger unreachable, an operation in progress elsewhere,
    a lease taken over), a class in ``extra``, whatever is not an ``Exception`` (a
    ``KeyboardInterrupt``, a cancellation), and a step done before that this run cannot use (its
    key was used with other arguments, or its stored output does not decode): rolling back would
    leave that step's effect uncompensated, so the saga waits for a run with the code it had."""
    if not isinstance(exc, Exception):
        return True
    if isinstance(exc, (Unavailable, InProgress, LeaseLost, KeyReused, DecodeError)) or is_transient(exc):
        return True
    return bool(extra) and isinstance(exc, extra)


def guard(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], extra: tuple[type[BaseException], ...]) -> Callable[[Lease], Any]:
    """``fn(*args, **kwargs)`` as the client's run calls it, an exception that is not retryable
    wrapped in ``StepFailed`` (so the child fails for good)."""

    def call(lease: Lease) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if retryable(exc, extra):
                raise
            raise StepFailed(exc) from None

    return call


def guard_async(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], extra: tuple[type[BaseException], ...]) -> Callable[[Lease], Awaitable[Any]]:
    """As ``guard``, for the asyncio client: ``fn`` may be a coroutine function or a plain one."""

    async def call(lease: Lease) -> Any:
        try:
            value = fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = await value
            return value
        except Exception as exc:
            if retryable(exc, extra):
                raise
            raise StepFailed(exc) from None

    return call


def returns_of(fn: Callable[..., Any]) -> Any:
    """``fn``'s return annotation (what a replayed result is decoded into), or None."""
    try:
        return typing.get_type_hints(fn).get("return")
    except Exception:
        return None


def step_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """A step's fingerprinted arguments: its positional arguments, then its keyword arguments as
    one object when there are any."""
    return [*args, kwargs] if kwargs else list(args)


def output_arguments(result: StoredResult) -> Any:
    """A compensation's fingerprinted arguments: its step's output as stored (JSON), or for a
    non-JSON result its content type and the SHA-256 of its body."""
    if result.content_type.split(";")[0].strip().lower() == JSON_CONTENT_TYPE:
        return json.loads(result.body) if result.body else None
    return {"content_type": result.content_type, "sha256": hashlib.sha256(result.body).hexdigest()}


def failure_text(exc: BaseException) -> str:
    """The text a failure is stored with (as the client's run stores it)."""
    if isinstance(exc, StepFailed):
        return exc.message
    if isinstance(exc, OperationFailed):
        return exc.error.message
    return _core.failure(exc, Options())[0].message


@dataclass
class Completed:
    """A step that succeeded in this run (ran or replayed)."""

    name: str
    output: Any
    """The value ``step`` returned (its compensation's argument)."""
    arguments: Any
    """Its compensation's fingerprinted arguments."""
    compensate: Callable[[Any], Any] | None


@dataclass
class Failure:
    """What stopped the saga: a step (None: the saga's own code), the failure's text, and the
    exception."""

    step: str | None
    cause: str
    exc: BaseException


@dataclass
class SagaState:
    """The steps of one run of a saga and how it ends; no I/O."""

    key: OperationKey
    options: SagaOptions
    completed: list[Completed] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    failure: Failure | None = None
    """A step (or the saga's code) failed for good: roll back."""
    stuck: Failure | None = None
    """A step or compensation whose outcome is unknown (or a compensation that failed for good):
    leave the saga for reconciliation."""

    def child(self, name: str) -> OperationKey:
        """The key of step ``name``, checked: unique in the saga, not a compensation's name, and
        only while the saga goes forward."""
        if not isinstance(name, str):
            raise TypeError(f"a step name is a str, not {type(name).__name__}")
        if name.startswith(COMPENSATE):
            raise ValueError(f"step {name!r}: names starting with {COMPENSATE!r} are the compensations'")
        if name in self.names:
            raise ValueError(f"step {name!r} twice in saga {self.key}: a step's name is its key, so names must be unique")
        stop = self.stuck or self.failure
        if stop is not None:
            raise SagaError(f"saga {self.key}: {self._stopped(stop)}; no further step runs", self.key, name)
        key = self.key.child(name)
        self.names.add(name)
        return key

    def compensation(self, name: str) -> OperationKey:
        return self.key.child(COMPENSATE + name)

    def step_done(self, name: str, done: Done[Any], compensate: Callable[[Any], Any] | None) -> None:
        self.completed.append(Completed(name, done.value, output_arguments(done.result), compensate))

    def step_error(self, name: str, exc: BaseException) -> BaseException:
        """Records what ``exc`` out of step ``name`` means; returns the exception to raise (the
        step's own one for a failure of its function)."""
        if isinstance(exc, StepFailed):
            self.failure = Failure(name, exc.message, _unwrap(exc))
            return self.failure.exc
        if isinstance(exc, NeedsReconciliation):
            self.stuck = Failure(name, f"its outcome is unknown ({exc})", exc)
        elif not retryable(exc, self.options.retryable):
            self.failure = Failure(name, failure_text(exc), exc)
        return exc

    def body_error(self, exc: BaseException) -> bool:
        """Records an exception out of the saga's code; True when it only releases the saga."""
        if self.stuck is not None or self.failure is not None:
            return False
        if retryable(exc, self.options.retryable):
            return True
        self.failure = Failure(None, failure_text(exc), exc)
        return False

    def check_result(self, result: Any) -> None:
        """A saga's result that cannot be stored (not JSON) is its failure: it is then rolled
        back, rather than failed with its steps left done."""
        try:
            encode_result(result)
        except EncodeError as e:
            self.failure = Failure(None, failure_text(e), e)

    def compensation_error(self, name: str, exc: BaseException) -> BaseException | None:
        """Records a compensation's failure for good (the saga is stuck) and returns None, or
        returns the retryable exception to raise after releasing the saga."""
        if isinstance(exc, StepFailed):
            self.stuck = Failure(name, exc.message, _unwrap(exc))
        elif isinstance(exc, NeedsReconciliation):
            self.stuck = Failure(name, f"its outcome is unknown ({exc})", exc)
        elif retryable(exc, self.options.retryable):
            return exc
        else:
            self.stuck = Failure(name, failure_text(exc), exc)
        return None

    def rolled_back_error(self) -> StoredError:
        """The saga's stored error once rolled back (code 409)."""
        assert self.failure is not None
        cause = self.failure.cause
        text = f"rolled back: step {self.failure.step} failed: {cause}" if self.failure.step is not None else f"rolled back: {cause}"
        return StoredError(ROLLED_BACK_CODE, _core._truncate(text))

    def rolled_back(self, error: StoredError, record: Record | None) -> SagaRolledBack:
        assert self.failure is not None
        return SagaRolledBack(
            f"saga {self.key}: {error.message}", self.key, self.failure.step, self.failure.cause, error, record
        )

    def stored_failure(self, error: StoredError, record: Record | None) -> SagaRolledBack:
        """``SagaRolledBack`` for a saga that had failed before (its stored error)."""
        match = _ROLLED_BACK.fullmatch(error.message)
        step, cause = (match["step"], match["cause"]) if match else (None, error.message)
        return SagaRolledBack(f"saga {self.key}: {error.message}", self.key, step, cause, error, record)

    def needs_reconciliation(self) -> SagaNeedsReconciliation:
        stuck = self.stuck
        assert stuck is not None
        return SagaNeedsReconciliation(
            f"saga {self.key} needs reconciliation: {self._stopped(stuck)}; it is left UNKNOWN for an "
            "operator, and running it again with its key resumes it",
            self.key,
            stuck.step,
            stuck.cause,
            self._compensating(stuck),
        )

    def _compensating(self, stop: Failure) -> bool:
        """Whether ``stop`` is a compensation's (of a step completed in this run)."""
        return stop is self.stuck and any(c.name == stop.step for c in self.completed)

    def _stopped(self, stop: Failure) -> str:
        if self._compensating(stop):
            return f"the compensation of step {stop.step} failed: {stop.cause}"
        if stop.step is None:
            return f"it failed: {stop.cause}"
        return f"step {stop.step} failed: {stop.cause}" if stop is self.failure else f"step {stop.step}: {stop.cause}"


def _unwrap(exc: StepFailed) -> BaseException:
    """The step's own exception, with the notes the client added to the wrapper (e.g. that its
    failure was not recorded)."""
    original = exc.original
    for text in getattr(exc, "__notes__", ()):
        _core.note(original, text)
    return original
