"""Whether what the process depends on answers: outages said once, readiness checks cached,
refusals that recur said once per cause and interval.

Why it exists: a supervisor reads `/readyz` every few seconds and routes traffic by it, so it
must fail while the store or the Kubernetes API is away, and say why in words anyone may read
(the endpoint is open: no URL, host, user or database name). And an outage is one event, not
one log line per retry: the operator reading the log after a night's outage needs the moment
it began and the moment it ended, not hundreds of lines in between. A peer that keeps sending
what gpubot refuses is told the same way: once, then once in a while, with the count.

What it must never do: probe on every request (a check may cost a round trip; its answer is
kept `ttl_s`), block the event loop (checks run in a worker thread), or raise out of a probe.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("gpubot.health")


class Outage:
    """One dependency's availability as the log tells it: a warning when it goes away, one
    line when it is back, nothing in between, however many callers see it fail.

    Owns: whether it is down, since when, and the first reason. Thread-safe. Never logs a
    reason twice for one outage."""

    def __init__(
        self,
        what: str,
        logger: logging.Logger = log,
        clock: Callable[[], float] = time.monotonic,
        *,
        down_as: str = "unavailable",
        up_as: str = "answers again",
    ) -> None:
        self.what = what
        self.down_as = down_as
        self.up_as = up_as
        self.logger = logger
        self.clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._reason: str | None = None

    @property
    def reason(self) -> str | None:
        """Why it is down (the first reason of this outage), or None while it answers."""
        return self._reason

    def down(self, reason: str) -> bool:
        """It failed: True when this began the outage (and said so in the log)."""
        with self._lock:
            if self._since is not None:
                return False
            self._since = self.clock()
            self._reason = reason
        self.logger.warning(
            "%s %s: %s (said once: the next line about it says when it is back)",
            self.what,
            self.down_as,
            reason,
        )
        return True

    def up(self) -> bool:
        """It answered: True when this ended an outage (and said so in the log)."""
        if self._since is None:  # the common case, without the lock
            return False
        with self._lock:
            if self._since is None:
                return False
            lasted = self.clock() - self._since
            self._since = None
            self._reason = None
        self.logger.info("%s %s after %.0f s", self.what, self.up_as, lasted)
        return True


class Recurring:
    """A failure with no end this process could see, such as a peer that keeps sending what
    is refused: told the first time per cause, then at most once every `every_s` with how
    many came in between, never a line per occurrence. Counting each one is the metrics'.

    Owns: per cause, when it was last told and how many came since. Thread-safe. Never logs
    one cause twice within `every_s`. A cause is a fixed word of the caller's, never text
    from outside (the table would grow with whatever a sender sent)."""

    def __init__(
        self,
        logger: logging.Logger = log,
        every_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.every_s = every_s
        self.clock = clock
        self._lock = threading.Lock()
        self._told: dict[str, tuple[float, int]] = {}

    def tell(self, cause: str, message: str, *args: object) -> bool:
        """Logs `message % args` as a warning when `cause` was not told within `every_s`:
        True when it did."""
        with self._lock:
            now = self.clock()
            last = self._told.get(cause)
            if last is not None and now - last[0] < self.every_s:
                self._told[cause] = (last[0], last[1] + 1)
                return False
            self._told[cause] = (now, 0)
        since = "" if last is None or not last[1] else f"; {last[1]} more like it since"
        self.logger.warning(
            f"{message} (told at most once every %.0f s{since})", *args, self.every_s
        )
        return True


class Probe:
    """One readiness check: `check` returns None when all is well, else a reason safe to show
    anyone. Its answer is kept `ttl_s` seconds (a supervisor probes often; the check may cost
    a round trip to the API server). Telling an outage once is the dependency's `Outage`'s.

    Owns: the last answer and when it was found. Thread-safe: concurrent probes share one
    check. Never raises: a check that raises is "check failed", logged."""

    def __init__(
        self,
        name: str,
        check: Callable[[], str | None],
        *,
        ttl_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.check = check
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._checked_at: float | None = None
        self._answer: str | None = None

    def __call__(self) -> str | None:
        with self._lock:
            now = self.clock()
            if self._checked_at is not None and now - self._checked_at < self.ttl_s:
                return self._answer
            try:
                answer = self.check()
            except Exception:
                log.exception("the readiness check of %s raised", self.name)
                answer = f"{self.name}: check failed"
            self._answer = answer
            self._checked_at = self.clock()
        return answer
