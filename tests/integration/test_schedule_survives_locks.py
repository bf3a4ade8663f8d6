"""The leader's scheduled duties outlive a locked store. APScheduler's scheduler thread died
when the job store raised while it moved a job to its next run (`update_job`): on SQLite a
burst of webhooks held the write lock past the busy timeout, and from then on no sweep,
follow-up, expiry or drain watchdog ran again, with the process up and /readyz green."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, cast

import pytest
import sqlalchemy as sa

from bot.config import ScheduleSettings
from bot.pipeline.service import Service
from bot.replica.schedule import Scheduler


class _Duties:
    """Counts each duty the scheduler runs: a stand-in for the Service the jobs call."""

    def __init__(self) -> None:
        self.follow_ups = 0
        self._lock = threading.Lock()

    def follow_up(self) -> None:
        with self._lock:
            self.follow_ups += 1

    def until(self, count: int, within_s: float = 20) -> int:
        deadline = time.monotonic() + within_s
        while self.follow_ups < count and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.follow_ups

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def test_a_write_lock_held_past_the_busy_timeout_does_not_stop_the_schedule(
    tmp_path: Path,
) -> None:
    path = tmp_path / "gpubot.db"
    # A short busy timeout so the lock outlasts it quickly, as a long burst outlasts 5 s.
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.2})
    duties = _Duties()
    settings = ScheduleSettings(
        leader_duties_s=60, expiry_s=60, sweep_s=60, drain_watchdog_s=60, follow_up_s=0.5
    )
    scheduler = Scheduler(cast(Service, duties), engine, settings.model_copy())
    scheduler.leading(True)
    try:
        deadline = time.monotonic() + 20
        while duties.follow_ups < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert duties.follow_ups >= 2, "the follow-up never ran"

        # Another writer holds the write lock: reads go on, writes time out.
        holder = sqlite3.connect(path, timeout=0.2, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        time.sleep(2.5)
        holder.execute("ROLLBACK")
        holder.close()

        after_the_lock = duties.follow_ups
        deadline = time.monotonic() + 20
        while duties.follow_ups < after_the_lock + 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert duties.follow_ups >= after_the_lock + 3, (
            f"no follow-up ran after the lock went ({duties.follow_ups} in all)"
        )
    finally:
        scheduler.leading(False)
        engine.dispose()


def test_a_store_that_refuses_every_write_slows_the_schedule_and_it_resumes_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A full disk or a volume remounted read-only refuses every write at once: the job stays
    due, and the schedule must not run the due duties back to back (a sweep is a read of the
    whole cluster) nor log a line each time."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'gpubot.db'}")
    read_only = {"on": False}

    @sa.event.listens_for(engine, "checkout")
    def _mode(connection: Any, _record: Any, _proxy: Any) -> None:
        # SQLite's own refusal: "attempt to write a readonly database".
        connection.execute(f"PRAGMA query_only = {int(read_only['on'])}")

    duties = _Duties()
    settings = ScheduleSettings(
        leader_duties_s=60, expiry_s=60, sweep_s=60, drain_watchdog_s=60, follow_up_s=0.5
    )
    scheduler = Scheduler(cast(Service, duties), engine, settings)
    scheduler.leading(True)
    try:
        assert duties.until(2) >= 2, "the follow-up never ran"
        read_only["on"] = True
        before = duties.follow_ups
        time.sleep(4)
        ran = duties.follow_ups - before
        assert ran <= 3, f"{ran} follow-ups in 4 s while the store refused every write"
        refusals = [r for r in caplog.records if "not moved to its next run" in r.getMessage()]
        assert 1 <= len(refusals) <= 3, [r.getMessage() for r in refusals]
        read_only["on"] = False
        back = duties.follow_ups
        assert duties.until(back + 3) >= back + 3, "the schedule did not come back"
    finally:
        scheduler.leading(False)
        engine.dispose()
