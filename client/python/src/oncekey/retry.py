"""How the client retries: exponential backoff with full jitter, the server's pushback, and a circuit
breaker shared by every call of one client.

Only transient failures are retried (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED): never
INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, FAILED_PRECONDITION (``BUDGET_EXHAUSTED``
whatever its code: ``NEVER_RETRIED``), nor a call the breaker refused. A retry resends the
identical request: same key, same fingerprint, same lease token.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass

from oncekey.errors import is_transient, pushback, reason

log = logging.getLogger("oncekey")

NEVER_RETRIED = frozenset({"BUDGET_EXHAUSTED"})
"""ErrorInfo reasons never retried, whatever the code they come with: a spent run budget stays
spent while the parent's record lives, so resending the Claim would only be refused again."""


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures are retried (the defaults are the Rust client's)."""

    max_attempts: int = 5
    """Attempts in total, the first included; 1 disables retries."""
    initial_backoff: float = 0.5
    """The backoff ceiling in seconds before the first retry; it doubles on each retry."""
    max_backoff: float = 15.0
    """The largest backoff ceiling in seconds."""

    @classmethod
    def never(cls) -> RetryPolicy:
        """No retries: every call is sent once."""
        return cls(max_attempts=1)

    def ceiling(self, retry: int) -> float:
        """The backoff ceiling before retry number ``retry`` (1-based), capped."""
        return min(self.max_backoff, self.initial_backoff * float(2 ** min(max(retry - 1, 0), 62)))

    def backoff(self, retry: int) -> float:
        """A full-jitter backoff before retry number ``retry``: uniform in ``[0, ceiling]``."""
        return random.uniform(0.0, self.ceiling(retry))

    def delay(self, error: BaseException, attempts: int) -> float | None:
        """Seconds to wait before resending after ``error`` on attempt ``attempts``, or None to
        give up."""
        if not is_transient(error) or attempts >= self.max_attempts or reason(error) in NEVER_RETRIED:
            return None
        asked, seconds = pushback(error)
        if asked:
            return seconds
        return self.backoff(attempts)


@dataclass(frozen=True)
class BreakerPolicy:
    """When the circuit breaker opens and how long it stays open."""

    failure_threshold: int = 10
    """Consecutive transient failures that open the circuit."""
    cool_down: float = 5.0
    """Seconds an open circuit refuses calls before letting one probe through."""

    @classmethod
    def disabled(cls) -> BreakerPolicy:
        """A breaker that never opens."""
        return cls(failure_threshold=2**62)


class CircuitOpen(Exception):
    """The breaker refused the call without sending it; ``retry_in`` seconds until the next probe."""

    def __init__(self, retry_in: float):
        super().__init__(f"circuit open after consecutive failures; next probe in {retry_in:.1f}s")
        self.retry_in = retry_in


class Breaker:
    """After ``failure_threshold`` consecutive transient failures it refuses calls for
    ``cool_down``, then lets one probe through (half-open): its success closes the circuit, its
    failure opens it again. Any answer proving the server is up resets the count. Thread-safe."""

    def __init__(self, policy: BreakerPolicy):
        self._policy = policy
        self._lock = threading.Lock()
        self._failures = 0
        self._open_until: float | None = None
        self._probing = False

    @property
    def state(self) -> str:
        """``closed``, ``open`` or ``half-open``."""
        with self._lock:
            if self._open_until is None and not self._probing:
                return "closed"
            if self._open_until is not None and time.monotonic() < self._open_until:
                return "open"
            return "half-open"

    def admit(self) -> bool:
        """Admits a call (returns True when it is the probe) or raises ``CircuitOpen``."""
        with self._lock:
            if self._open_until is None and not self._probing:
                return False
            now = time.monotonic()
            if self._probing:
                raise CircuitOpen(0.0)
            assert self._open_until is not None
            if now < self._open_until:
                raise CircuitOpen(self._open_until - now)
            self._open_until = None
            self._probing = True
            return True

    def record(self, failed: bool) -> None:
        """Records an admitted call's answer: ``failed`` when it was a transient failure."""
        with self._lock:
            was_probe = self._probing
            self._probing = False
            if not failed:
                self._failures = 0
                self._open_until = None
                return
            self._failures += 1
            if was_probe or self._failures >= self._policy.failure_threshold:
                if not was_probe:
                    log.warning("oncekey: circuit breaker open after %d consecutive failures", self._failures)
                self._open_until = time.monotonic() + self._policy.cool_down

    def abandon_probe(self) -> None:
        """The probe went away without an answer (e.g. cancelled): let the next call probe."""
        with self._lock:
            if self._probing:
                self._probing = False
                self._open_until = time.monotonic()
