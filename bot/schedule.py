"""Scheduled work (APScheduler 3), jobs kept in the store's database so they survive a
restart: the leader's duties (resume, pick up approvals), approval expiry, and sweeps that
diagnose the whole cluster even when no alert arrives.

Only the leader runs a scheduler: APScheduler 3 does not support two schedulers on one job
store, so a replica starts one when it gains the lease and shuts it down when it loses it.
Jobs are stored by reference ("bot.schedule:sweep"), so they reach this process' `Service`
through the module-level `_service`.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC
from typing import Any

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler

from bot.config import ScheduleSettings
from bot.service import Service

log = logging.getLogger("gpubot.schedule")
_service: Service | None = None


def _current() -> Service:
    if _service is None:
        raise RuntimeError("no Service registered with bot.schedule")
    return _service


def leader_duties() -> None:
    _current().run_leader_duties_in_background()


def expire_requests() -> None:
    _current().expire_requests()


def sweep() -> None:
    _current().process([])


class Scheduler:
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
                jobstores={"default": SQLAlchemyJobStore(engine=self.engine)},
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
            ):
                scheduler.add_job(
                    f"bot.schedule:{func.__name__}",
                    "interval",
                    seconds=seconds,
                    id=func.__name__,
                    replace_existing=True,
                )
            scheduler.start()
            self._scheduler = scheduler
            log.info("scheduler started (this replica leads)")

    def stop(self) -> None:
        with self._lock:
            if self._scheduler is None:
                return
            # Not waiting: a job mid-sweep must not hold up losing the lease or stopping.
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
            log.info("scheduler stopped")

    def jobs(self) -> list[str]:
        if self._scheduler is None:
            return []
        return sorted(job.id for job in self._scheduler.get_jobs())
