"""`gpubot serve`'s log keeps to what the on-call must see (issue 19 item 6)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import logging, sys
from bot.process.logs import LogFormat, configure_logging
configure_logging(sys.argv[1], LogFormat.JSON)
scheduler = logging.getLogger("apscheduler.scheduler")
scheduler.warning(
    'Execution of job "%s" skipped: maximum number of running instances reached (%d)',
    "follow_up (trigger: interval[0:00:01])", 1,
)
scheduler.error('Job "%s" raised an exception', "drain_watchdog")
"""


def _log_at(level: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, level], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_scheduled_run_skipped_while_the_last_still_runs_is_not_a_warning() -> None:
    """On a loaded machine the 1 s follow-up job overlaps itself: APScheduler warned once a
    second that it skipped a run, which is what `max_instances: 1` asks for."""
    log = _log_at("info")
    assert "skipped: maximum number of running instances" not in log, log
    assert "drain_watchdog" in log  # a job's error still shows


def test_at_debug_the_skipped_runs_are_shown() -> None:
    assert "skipped: maximum number of running instances" in _log_at("debug")
