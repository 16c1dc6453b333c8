"""``@client.idempotent(...)``: turns an existing function (sync or async) into one whose side effect
happens once per key, with the same signature, so frameworks that read signatures (MCP servers,
FastAPI, agent tool registries) still see the original parameters.

From each call's arguments it derives the key (``key=``, a function of some of the parameters by
name) and the fingerprinted arguments (``arguments=``, default: every parameter by name), then hands
the call to the client's ``run``.
"""

from __future__ import annotations

import functools
import inspect
import typing
from typing import Any, Callable

from oncekey._core import Done, Options
from oncekey.fingerprint import fingerprint
from oncekey.key import OperationKey

KeySpec = Callable[..., Any] | None

_RECEIVERS = ("self", "cls")


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
    """Derives a call's key and fingerprinted arguments from the wrapped function's parameters."""

    def __init__(self, namespace: str, fn: Callable[..., Any], key: KeySpec, arguments: KeySpec):
        OperationKey(namespace, "probe")  # validates the namespace once, at decoration time
        self.namespace = namespace
        self.signature = inspect.signature(fn)
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

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[OperationKey, Any]:
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        named = dict(bound.arguments)
        if self.arguments is not None:
            significant = _call_by_name(self.arguments, named)
        else:  # every parameter by name, but not the instance or class of a method
            significant = {n: v for n, v in named.items() if n not in _RECEIVERS}
        if self.key is None:
            return OperationKey(self.namespace, f"sha256:{fingerprint(significant).hex()}"), significant
        key = _call_by_name(self.key, named)
        if isinstance(key, OperationKey):
            return key, significant
        if isinstance(key, str):
            return OperationKey(self.namespace, key), significant
        if isinstance(key, (tuple, list)):
            return OperationKey.from_parts(self.namespace, key), significant
        if isinstance(key, (int, float)) and not isinstance(key, bool):
            return OperationKey(self.namespace, str(key)), significant
        raise TypeError(f"key= must return a str, a tuple of parts or an OperationKey, not {type(key).__name__}")


def wrap_sync(client: Any, fn: Callable[..., Any], binder: Binder, options: Options) -> Callable[..., Any]:
    """The sync wrapper of ``fn`` over ``client`` (a ``Client``)."""

    def detailed(*args: Any, **kwargs: Any) -> Done[Any]:
        key, significant = binder.bind(args, kwargs)
        return client._run(key, significant, lambda lease: fn(*args, **kwargs), options, binder.returns, False)

    def reconcile(check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        key, significant = binder.bind(args, kwargs)
        return client._run(key, significant, lambda lease: check(*args, **kwargs), options, binder.returns, True).value

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return detailed(*args, **kwargs).value

    return _decorate(wrapper, binder, detailed, reconcile)


def wrap_async(client_for: Callable[[], Any], fn: Callable[..., Any], binder: Binder, options: Options) -> Callable[..., Any]:
    """The async wrapper of ``fn`` over the ``AsyncClient`` that ``client_for()`` returns."""

    async def detailed(*args: Any, **kwargs: Any) -> Done[Any]:
        key, significant = binder.bind(args, kwargs)
        return await client_for()._run(key, significant, lambda lease: fn(*args, **kwargs), options, binder.returns, False)

    async def reconcile(check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        key, significant = binder.bind(args, kwargs)
        done = await client_for()._run(key, significant, lambda lease: check(*args, **kwargs), options, binder.returns, True)
        return done.value

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        return (await detailed(*args, **kwargs)).value

    return _decorate(wrapper, binder, detailed, reconcile)


def _decorate(wrapper: Any, binder: Binder, detailed: Any, reconcile: Any) -> Any:
    wrapper.detailed = detailed
    """Like calling the function, returning a ``Done`` (value, replayed, stored result, record)."""
    wrapper.reconcile = reconcile
    """Reconciles an at-most-once call whose outcome is unknown: ``check`` (called with the same
    arguments) finds out from the outside world what happened and returns the result, or raises
    (``FinalError``: it failed; ``Abandon``: forget the key; anything else: it did not happen)."""
    wrapper.key_of = lambda *args, **kwargs: binder.bind(args, kwargs)[0]
    """The ``OperationKey`` a call with these arguments uses."""
    return wrapper
