"""Scheduled work (APScheduler 3), jobs kept in the store's database so they survive a
restart: the leader's duties (resume, pick up approvals), approval expiry, the drain
watchdog (cordoned nodes diagnosed again every minute), sweeps that
diagnose the whole cluster even when no alert arrives, the follow-up (what time alone
changes: held proposals, problems gone long enough, refusals whose reason cleared, repaired
nodes to offer back), and the daily digest (a cron trigger in the configured zone, so 09:00
stays 09:00 across DST).

Only the leader runs a scheduler: APScheduler 3 does not support two schedulers on one job
store, so a replica starts one when it gains the lease and shuts it down when it loses it.
Jobs are stored by reference ("bot.replica.schedule:sweep"), so they reach this process' `Service`
through the module-level `_service`.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.job import Job
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from bot.config import ScheduleSettings
from bot.errors import StoreUnavailable
from bot.pipeline.service import Service
from bot.store.database import unavailable_as_store_errors

log = logging.getLogger("gpubot.schedule")
_service: Service | None = None


def _current() -> Service:
    if _service is None:
        raise RuntimeError("no Service registered with bot.replica.schedule")
    return _service


def leader_duties() -> None:
    _current().run_leader_duties_in_background()


def expire_requests() -> None:
    _current().expire_requests()


def sweep() -> None:
    _current().sweep()


def follow_up() -> None:
    _current().follow_up()


def drain_watchdog() -> None:
    _current().watch_drains()


def digest() -> None:
    _current().post_digest()


_STORE_RETRY_S = 5.0
"""How long the schedule waits after the store refused to move a job before trying again."""


class _StorePatientJobStore(SQLAlchemyJobStore):  # type: ignore[misc]  # untyped library
    """APScheduler catches the job store's errors only where it asks for due jobs: one raised
    while it moves a job to its next run ended its thread, and with it every scheduled duty,
    the process up and /readyz green (on SQLite, a burst of webhooks holding the write lock
    past the busy timeout). Here a store that refuses (locked, full, read-only, gone) leaves the
    job due, and the schedule waits `_STORE_RETRY_S` before its next try rather than running
    the due jobs back to back (every duty may run again)."""

    _not_before: datetime | None = None

    def update_job(self, job: Job) -> None:
        try:
            with unavailable_as_store_errors():
                super().update_job(job)
        except StoreUnavailable as exc:
            self._not_before = datetime.now(UTC) + timedelta(seconds=_STORE_RETRY_S)
            log.warning(
                "scheduled job %s not moved to its next run, trying again in %g s: %s",
                job.id,
                _STORE_RETRY_S,
                exc,
            )

    def get_next_run_time(self) -> datetime | None:
        try:
            with unavailable_as_store_errors():
                found: datetime | None = super().get_next_run_time()
        except StoreUnavailable as exc:
            self._not_before = datetime.now(UTC) + timedelta(seconds=_STORE_RETRY_S)
            log.warning(
                "next scheduled run not read, trying again in %g s: %s", _STORE_RETRY_S, exc
            )
            return self._not_before
        not_before = self._not_before
        waiting = not_before is not None and not_before > datetime.now(UTC)
        if waiting and (found is None or found < not_before):  # type: ignore[operator]
            return not_before
        return found


class Scheduler:
    """Owns the leader's APScheduler (started when this replica leads, stopped when it stops
    leading) whose jobs live in the store's database. Never: runs a job on a follower, or lets
    a store that will not take a write end the schedule (the job waits)."""

    def __init__(self, service: Service, engine: Any, settings: ScheduleSettings) -> None:
        global _service
        _service = service
        self.engine = engine
        self.settings = settings
        self._scheduler: BackgroundScheduler | None = None
        self._lock = threading.Lock()

    @property
    def running(self) -> bool:
        return self._scheduler is not None

    def leading(self, leads: bool) -> None:
        """The leader elector's callback."""
        if leads:
            self.start()
        else:
            self.stop()

    def start(self) -> None:
        with self._lock:
            if self._scheduler is not None:
                return
            s = self.settings
            scheduler = BackgroundScheduler(
                jobstores={"default": _StorePatientJobStore(engine=self.engine)},
                # A job missed while no one led runs once on takeover, not once per miss.
                job_defaults={
                    "coalesce": True,
                    "max_instances": 1,
                    "misfire_grace_time": s.misfire_grace_s,
                },
                timezone=UTC,
            )
            for func, seconds in (
                (leader_duties, s.leader_duties_s),
                (expire_requests, s.expiry_s),
                (sweep, s.sweep_s),
                (drain_watchdog, s.drain_watchdog_s),
                (follow_up, s.follow_up_s),
            ):
                scheduler.add_job(
                    f"bot.replica.schedule:{func.__name__}",
                    "interval",
                    seconds=seconds,
                    id=func.__name__,
                    replace_existing=True,
                )
            if s.digest_at is not None:
                hour, minute = s.digest_at.strip().split(":")
                scheduler.add_job(
                    "bot.replica.schedule:digest",
                    CronTrigger(hour=int(hour), minute=int(minute), timezone=ZoneInfo(s.digest_tz)),
                    id="digest",
                    replace_existing=True,
                )

            scheduler.start()
            if s.digest_at is None and scheduler.get_job("digest") is not None:
                scheduler.remove_job("digest")  # kept in the database from an earlier config
            self._scheduler = scheduler
            log.info("scheduler started (this replica leads)")

    def stop(self) -> None:
        with self._lock:
            if self._scheduler is None:
                return
            # Paused first: a scheduler shut down between two due jobs would otherwise hand the
            # second to its closed thread pool and log a traceback ("cannot schedule new
            # futures after shutdown"). Not waiting: a job mid-sweep must not hold up losing
            # the lease or stopping.
            self._scheduler.pause()
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
            log.info("scheduler stopped")

    def next_run_time(self, job_id: str) -> datetime | None:
        """When the job runs next (UTC), while this replica leads; None otherwise."""
        job = None if self._scheduler is None else self._scheduler.get_job(job_id)
        return None if job is None else job.next_run_time.astimezone(UTC)

    def jobs(self) -> list[str]:
        if self._scheduler is None:
            return []
        return sorted(job.id for job in self._scheduler.get_jobs())
