"""Time in one place. Every part that needs "now" is handed a `Clock`; the composition roots
hand `utcnow`, tests a clock they move. gpubot keeps and compares aware UTC times only."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)
