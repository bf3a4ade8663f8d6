"""`gpubot serve`'s log: structlog rendering every record, gpubot's and its libraries', as one
line on stderr — readable on a terminal, one JSON object a line for a log collector.

Why the libraries are turned down: at info, APScheduler says two lines per job run (every
2 s on the leader) and Alembic eight at every start; what the on-call must see (listening,
leader changes, diagnoses posted, actions, errors) drowned in them. They say it at debug.
"""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from typing import TYPE_CHECKING

from bot.errors import InputError

if TYPE_CHECKING:
    import structlog.types


class LogFormat(StrEnum):
    CONSOLE = "console"
    JSON = "json"


CHATTY = ("apscheduler", "alembic", "uvicorn.error", "kubernetes", "urllib3")
"""Loggers whose info lines are their own bookkeeping: shown only at debug."""


class _SkippedRunsAtDebug(logging.Filter):
    """APScheduler warns each time it skips a run because the last one still runs: with
    `max_instances: 1` on a job every second, that is once a second on a loaded machine, and
    skipping is what the setting asks for. Shown at debug only."""

    def filter(self, record: logging.LogRecord) -> bool:
        skipped = "skipped: maximum number of running instances" in str(record.msg)
        return not skipped or logging.getLogger().isEnabledFor(logging.DEBUG)


def configure_logging(level_name: str, fmt: LogFormat | None = None) -> None:
    """The root logger at `level_name` (debug, info, warning, error) to stderr; JSON unless
    stderr is a terminal or `fmt` says otherwise. An unknown level is an `InputError`."""
    # Here, not at the top: the CLI types `--log-format` with LogFormat, and every other
    # command would pay for structlog's import (about 50 ms) to start.
    import structlog

    level = logging.getLevelName(level_name.upper())
    if not isinstance(level, int):
        raise InputError(
            "--log-level", f"unknown level {level_name!r} (debug, info, warning, error)"
        )
    chosen = fmt or (LogFormat.CONSOLE if sys.stderr.isatty() else LogFormat.JSON)
    shared: list[structlog.types.Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer(ensure_ascii=False)
        if chosen is LogFormat.JSON
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in CHATTY:
        logging.getLogger(name).setLevel(level if level <= logging.DEBUG else logging.WARNING)
    handler.addFilter(_SkippedRunsAtDebug())
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
