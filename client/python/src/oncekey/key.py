"""Deterministic operation keys: a namespace plus a key built from stable business parts and an
operation version, with child keys derived from a parent key and a step name.

A key names one logical intent; every retry of that intent must compute the same key. This module
never makes up a key on its own: the only random constructor is the explicit ``OperationKey.random``.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Iterable

MAX_KEY_BYTES = 256
_NAMESPACE = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
_PART_SEPARATOR = ":"
_STEP_SEPARATOR = "/"


class InvalidKey(ValueError):
    """The namespace or key is not one the server accepts."""


@dataclass(frozen=True)
class OperationKey:
    """One operation in the ledger: a namespace (the kind of operation, e.g. ``payments.charge``)
    and an idempotency key, with the parent operation it was derived from, if any.

    >>> task = OperationKey.of("tasks.create", "ticket-481", "create-task", "v1")
    >>> task.key
    'ticket-481:create-task:v1'
    >>> email = task.child_in("email.send", "notify-assignee")
    >>> email.key, email.parent.key
    ('ticket-481:create-task:v1/notify-assignee', 'ticket-481:create-task:v1')

    Parts are joined with ``:`` and steps with ``/``; a ``%``, ``:`` or ``/`` inside a part is
    percent-encoded, so different parts never produce the same key.
    """

    namespace: str
    key: str
    parent: OperationKey | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.namespace, str) or not _NAMESPACE.fullmatch(self.namespace):
            raise InvalidKey(f"invalid namespace {self.namespace!r}: expected ^[a-z0-9][a-z0-9._-]{{0,127}}$")
        if not isinstance(self.key, str) or not self.key:
            raise InvalidKey("a key needs at least one part and no empty part")
        size = len(self.key.encode("utf-8", "surrogatepass"))
        if size > MAX_KEY_BYTES:
            raise InvalidKey(f"the key is {size} bytes long; at most {MAX_KEY_BYTES} are allowed")
        if any(_is_control(c) for c in self.key):
            raise InvalidKey("a key must not contain control characters")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in self.key):
            raise InvalidKey("a key must be valid UTF-8 (no lone surrogates)")

    @classmethod
    def of(cls, namespace: str, *parts: object) -> OperationKey:
        """A key from stable business parts, the last of which should be the operation version."""
        return cls.from_parts(namespace, parts)

    @classmethod
    def from_parts(cls, namespace: str, parts: Iterable[object]) -> OperationKey:
        """A key from an iterable of stable business parts (each turned into text with ``str``)."""
        texts = [str(p) for p in parts]
        if not texts or any(not t for t in texts):
            raise InvalidKey("a key needs at least one part and no empty part")
        return cls(namespace, _PART_SEPARATOR.join(_escape(t) for t in texts))

    @classmethod
    def from_raw(cls, namespace: str, key: str) -> OperationKey:
        """A key taken verbatim (e.g. an ``Idempotency-Key`` header your own caller sent),
        validated but not escaped."""
        return cls(namespace, key)

    @classmethod
    def random(cls, namespace: str) -> OperationKey:
        """A random key (``random-<32 hex digits>``).

        Only for intents with no stable identity of their own, and only if you store the key
        before the first attempt and reuse it for every retry: a key made up again on retry is a
        new intent, and the ledger will let the side effect happen twice."""
        return cls(namespace, f"random-{secrets.token_hex(16)}")

    def child(self, step: str) -> OperationKey:
        """The key of a step of this operation, in the same namespace: ``<this key>/<step>``."""
        return self.child_in(self.namespace, step)

    def child_in(self, namespace: str, step: str) -> OperationKey:
        """The key of a step of this operation in another namespace, recording this operation as
        its parent."""
        if not step:
            raise InvalidKey("a key needs at least one part and no empty part")
        return OperationKey(namespace, f"{self.key}{_STEP_SEPARATOR}{_escape(step)}", self._as_parent())

    def with_parent(self, parent: OperationKey) -> OperationKey:
        """This key with ``parent`` recorded as its parent operation (the key does not change)."""
        return OperationKey(self.namespace, self.key, parent._as_parent())

    def _as_parent(self) -> OperationKey:
        return OperationKey(self.namespace, self.key) if self.parent is not None else self

    def __str__(self) -> str:
        return f"{self.namespace}/{self.key}"


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A").replace("/", "%2F")


def _is_control(c: str) -> bool:
    o = ord(c)
    return o < 0x20 or 0x7F <= o <= 0x9F
