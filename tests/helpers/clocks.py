"""The one fake clock the tests move time with, instead of sleeping through it.

The bot's ports take an aware-UTC `datetime` clock (`bot.clock.Clock`); some parts (the Slack
double, the DCGM exporter, the Slack groups cache, the smoke test's deadline) take seconds as
a float, as `time.time` gives them: `FakeClock.time` is that same clock read as seconds, so a
test that drives both moves one time, not two that could drift apart.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class FakeClock:
    """Stands still at `start` (default: the real time when made) until a test moves it.

    With `real_time=True` it runs with the real clock instead, `ahead` of it by however far
    the test moved it: for rigs on the simulator, which stamps its objects with the real time,
    so a clock that stood still would see them appear from its future.
    """

    def __init__(self, start: datetime | None = None, *, real_time: bool = False) -> None:
        if start is not None and start.utcoffset() is None:
            raise ValueError(f"a clock's start must be aware (UTC), not {start!r}")
        if start is not None and real_time:
            raise ValueError("a clock that runs with real time starts at the real time")
        self._start = None if real_time else (start or datetime.now(UTC))
        self.ahead = timedelta()
        """How far the test has moved it, since `start` (or ahead of the real time)."""

    def __call__(self) -> datetime:
        return (datetime.now(UTC) if self._start is None else self._start) + self.ahead

    @property
    def now(self) -> datetime:
        return self()

    @now.setter
    def now(self, when: datetime) -> None:
        self.ahead += when - self()

    def advance(self, by: timedelta | float) -> None:
        """`by`: a timedelta, or seconds, as the float clocks count."""
        self.ahead += by if isinstance(by, timedelta) else timedelta(seconds=by)

    def time(self) -> float:
        """The same clock in seconds since the epoch, where `time.time` would be passed."""
        return self().timestamp()
