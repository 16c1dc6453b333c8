"""``@client.idempotent(...)``: turns an existing function (sync or async) into one whose side effect
happens once per key. The result keeps the function's signature for type checkers (``Idempotent``
and ``AsyncIdempotent`` are generic in its parameters and return type) and for frameworks that read
signatures at run time (MCP servers, FastAPI, agent tool registries): ``inspect.signature`` sees
the original parameters.

From each call's arguments it derives the fingerprinted arguments (``arguments=``, default: the
call's arguments as a JSON array, docs/api.md "Default arguments and key") and the key (``key=``, a
function of some of the parameters by name; default: ``sha256:`` and the arguments' fingerprint),
then hands the call to the client's ``_run``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import typing
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Concatenate, Coroutine, Generic, ParamSpec, TypeVar, cast, overload

from oncekey._core import Done, Options
from oncekey.fingerprint import fingerprint
from oncekey.key import OperationKey

if TYPE_CHECKING:
    from oncekey.aio import AsyncClient
    from oncekey.client import Client

P = ParamSpec("P")
Q = ParamSpec("Q")
R = TypeVar("R")
S = TypeVar("S")

KeySpec = Callable[..., Any] | None
"""A function of some of the wrapped function's parameters, by name (``lambda to, subject: ...``)."""

_RECEIVERS = ("self", "cls")
_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _call_by_name(fn: Callable[..., Any], named: dict[str, Any]) -> Any:
    """Calls ``fn`` with the parameters it names, taken from ``named`` (all of them for ``**kw``)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return fn(**named)
    missing = [n for n, p in params.items() if n not in named and p.default is inspect.Parameter.empty]
    if missing:
        raise TypeError(f"{fn!r} asks for {missing}, which the wrapped function has no parameter for")
    return fn(**{n: named[n] for n in params if n in named})


class Binder:
    """Derives a call's key and fingerprint from the wrapped function's parameters."""

    def __init__(self, namespace: str, fn: Callable[..., Any], key: KeySpec, arguments: KeySpec):
        OperationKey(namespace, "probe")  # validates the namespace once, at decoration time
        self.namespace = namespace
        self.signature = inspect.signature(fn)
        first = next(iter(self.signature.parameters.values()), None)
        self.receiver = first is not None and first.name in _RECEIVERS and first.kind not in _VARIADIC
        self.key = key
        self.arguments = arguments
        self._fn = fn
        self._returns: Any = ...

    @property
    def returns(self) -> Any:
        """The function's return annotation (to decode replayed results into), or None."""
        if self._returns is ...:
            try:
                self._returns = typing.get_type_hints(self._fn).get("return")
            except Exception:
                self._returns = None
        return self._returns

    def default_arguments(self, bound: inspect.BoundArguments) -> list[Any]:
        """The call's arguments in parameter order (docs/api.md, "Default arguments and key"): not
        the receiver, ``*args`` in their place, ``**kwargs`` (when any) as one object after them,
        defaults filled in, trailing ``None`` dropped."""
        out: list[Any] = []
        extra: dict[str, Any] = {}
        for i, (name, param) in enumerate(self.signature.parameters.items()):
            if i == 0 and self.receiver:
                continue
            value = bound.arguments[name]
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                out.extend(value)
            elif param.kind is inspect.Parameter.VAR_KEYWORD:
                extra = dict(value)
            else:
                out.append(value)
        if extra:
            out.append(extra)
        while out and out[-1] is None:
            out.pop()
        return out

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[OperationKey, bytes]:
        """The key and the fingerprint of a call."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        named = dict(bound.arguments)
        if self.arguments is not None:
            significant = _call_by_name(self.arguments, named)
        else:
            significant = self.default_arguments(bound)
        fp = fingerprint(significant)
        if self.key is None:
            return OperationKey(self.namespace, f"sha256:{fp.hex()}"), fp
        key = _call_by_name(self.key, named)
        if isinstance(key, OperationKey):
            return key, fp
        if isinstance(key, str):
            return OperationKey(self.namespace, key), fp
        if isinstance(key, (tuple, list)):
            return OperationKey.from_parts(self.namespace, key), fp
        if isinstance(key, (int, float)) and not isinstance(key, bool):
            return OperationKey(self.namespace, str(key)), fp
        raise TypeError(f"key= must return a str, a tuple of parts or an OperationKey, not {type(key).__name__}")


class _Wrapper:
    """What both wrappers share: the wrapped function, how calls bind, and the receiver of a method
    looked up on an instance (``obj.method`` binds it like a method)."""

    def __init__(self, fn: Callable[..., Any], binder: Binder, options: Options, receiver: tuple[Any, ...]):
        shown = fn.__get__(receiver[0], type(receiver[0])) if receiver else fn
        functools.update_wrapper(cast(Any, self), shown)
        self._fn = fn
        self._binder = binder
        self._options = options
        self._receiver = receiver

    def _args(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (*self._receiver, *args) if self._receiver else args

    def _key_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> OperationKey:
        return self._binder.bind(self._args(args), kwargs)[0]

    def __repr__(self) -> str:
        return f"<idempotent {self._binder.namespace} {getattr(self._fn, '__qualname__', self._fn)!r}>"


class Idempotent(_Wrapper, Generic[P, R]):
    """A sync function made idempotent by ``@client.idempotent``: call it as the function. Also
    ``.detailed(...)`` (a ``Done``), ``.reconcile(check, ...)`` and ``.key_of(...)``."""

    def __init__(self, client: Client, fn: Callable[P, R], binder: Binder, options: Options, receiver: tuple[Any, ...] = ()):
        super().__init__(fn, binder, options, receiver)
        self._client = client

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Idempotent[P, R]: ...
    @overload
    def __get__(self: Idempotent[Concatenate[S, Q], R], obj: S, owner: type | None = None) -> Idempotent[Q, R]: ...
    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return Idempotent(self._client, self._fn, self._binder, self._options, (obj,))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.detailed(*args, **kwargs).value

    def detailed(self, *args: P.args, **kwargs: P.kwargs) -> Done[R]:
        """Like calling the function, returning a ``Done`` (value, replayed, stored result, record)."""
        full = self._args(args)
        key, fp = self._binder.bind(full, kwargs)
        fn = self._fn
        return self._client._run(key, fp, lambda lease: fn(*full, **kwargs), self._options, self._binder.returns, False)

    def reconcile(self, check: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Reconciles an at-most-once call whose outcome is unknown: ``check`` (called with the same
        arguments) finds out from the outside world what happened and returns the result, or raises
        (``FinalError``: it failed; ``Abandon``: forget the key; anything else: it did not happen)."""
        key, fp = self._binder.bind(self._args(args), kwargs)
        done: Done[R] = self._client._run(key, fp, lambda lease: check(*args, **kwargs), self._options, self._binder.returns, True)
        return done.value

    def key_of(self, *args: P.args, **kwargs: P.kwargs) -> OperationKey:
        """The ``OperationKey`` a call with these arguments uses."""
        return self._key_of(args, kwargs)


class AsyncIdempotent(_Wrapper, Generic[P, R]):
    """An ``async def`` function made idempotent by ``@client.idempotent``: await it as the
    function. Also ``await .detailed(...)``, ``await .reconcile(check, ...)`` and ``.key_of(...)``."""

    def __init__(
        self,
        client_for: Callable[[], AsyncClient],
        fn: Callable[P, Awaitable[R]],
        binder: Binder,
        options: Options,
        receiver: tuple[Any, ...] = (),
    ):
        super().__init__(fn, binder, options, receiver)
        self._client_for = client_for
        # Tells asyncio.iscoroutinefunction (and inspect's, from Python 3.12) that calling it
        # returns a coroutine, as frameworks that register tools check.
        self._is_coroutine = getattr(asyncio.coroutines, "_is_coroutine", None)
        mark = getattr(inspect, "markcoroutinefunction", None)  # Python 3.12+
        if mark is not None:
            mark(self)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> AsyncIdempotent[P, R]: ...
    @overload
    def __get__(self: AsyncIdempotent[Concatenate[S, Q], R], obj: S, owner: type | None = None) -> AsyncIdempotent[Q, R]: ...
    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return AsyncIdempotent(self._client_for, self._fn, self._binder, self._options, (obj,))

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return (await self.detailed(*args, **kwargs)).value

    async def detailed(self, *args: P.args, **kwargs: P.kwargs) -> Done[R]:
        """Like calling the function, returning a ``Done`` (value, replayed, stored result, record)."""
        full = self._args(args)
        key, fp = self._binder.bind(full, kwargs)
        fn = self._fn
        return await self._client_for()._run(
            key, fp, lambda lease: fn(*full, **kwargs), self._options, self._binder.returns, False
        )

    async def reconcile(self, check: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
        """As ``Idempotent.reconcile``, with an async ``check``."""
        key, fp = self._binder.bind(self._args(args), kwargs)
        done: Done[R] = await self._client_for()._run(
            key, fp, lambda lease: check(*args, **kwargs), self._options, self._binder.returns, True
        )
        return done.value

    def key_of(self, *args: P.args, **kwargs: P.kwargs) -> OperationKey:
        """The ``OperationKey`` a call with these arguments uses."""
        return self._key_of(args, kwargs)


class IdempotentDecorator:
    """What ``Client.idempotent(...)`` returns: decorates a sync function (``Idempotent``) or an
    ``async def`` one (``AsyncIdempotent``)."""

    def __init__(self, client: Client, namespace: str, key: KeySpec, arguments: KeySpec, options: Options):
        OperationKey(namespace, "probe")  # a bad namespace is refused at once, not at decoration
        self._client = client
        self._namespace = namespace
        self._key = key
        self._arguments = arguments
        self._options = options

    @overload
    def __call__(self, fn: Callable[P, Coroutine[Any, Any, R]]) -> AsyncIdempotent[P, R]: ...  # type: ignore[overload-overlap]
    @overload
    def __call__(self, fn: Callable[P, R]) -> Idempotent[P, R]: ...
    def __call__(self, fn: Callable[..., Any]) -> Any:
        binder = Binder(self._namespace, fn, self._key, self._arguments)
        if inspect.iscoroutinefunction(fn):
            return AsyncIdempotent(self._client._aio, fn, binder, self._options)
        return Idempotent(self._client, fn, binder, self._options)


class AsyncIdempotentDecorator:
    """What ``AsyncClient.idempotent(...)`` returns: decorates an ``async def`` function."""

    def __init__(self, client: AsyncClient, namespace: str, key: KeySpec, arguments: KeySpec, options: Options):
        OperationKey(namespace, "probe")
        self._client = client
        self._namespace = namespace
        self._key = key
        self._arguments = arguments
        self._options = options

    def __call__(self, fn: Callable[P, Awaitable[R]]) -> AsyncIdempotent[P, R]:
        if not inspect.iscoroutinefunction(fn):
            name = getattr(fn, "__name__", repr(fn))
            raise TypeError(f"AsyncClient.idempotent wraps async functions; use oncekey.Client for {name}")
        client = self._client
        return AsyncIdempotent(lambda: client, fn, Binder(self._namespace, fn, self._key, self._arguments), self._options)
