"""The outbox's delivery while the store is away (issue 31, item 6): the store was down 20 s and
the outbox logged 40 ERROR lines with 120 tracebacks, a retry every 0.5 s, against
docs/hardening.md's "one warning line when it begins".

Now, as the webhook, /readyz and the intake tell theirs (`bot.process.health.Outage`): one
warning when the outage begins, one line when it ends, the tries in between counted
(`gpubot_outbox_failures_total`), and the worker looking again less and less often.

The real parts: the leader's console printer on a PostgreSQL store reached through a TCP relay
that the test cuts (its connections reset, new ones refused) and restores, and a second path
to the same database (another replica) that queues a message meanwhile.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console
from sqlalchemy.engine import make_url
from starlette.testclient import TestClient

from bot.chat.queued import ConsoleDelivery, QueuedConsoleChat
from bot.chat.slack import OutboxDelivery, SlackChat, slack_client
from bot.config import SlackSettings
from bot.model import Lang
from bot.process.telemetry import Telemetry
from bot.replica.http import build_app
from bot.sources.alertmanager.endpoint import WebSettings
from bot.store.sql import SqlStore
from tests.helpers.clocks import FakeClock
from tests.helpers.paths import NOW
from tests.helpers.relays import TcpRelay
from tests.helpers.slack_double import SlackDouble
from tests.helpers.stores import postgres_answers, postgres_schema

NO_POSTGRES = postgres_answers()
CHANNEL = "C0GPUALERTS"

OUTAGE_S = 4.0
"""Long enough for eight tries at a fixed 0.5 s; doubling from 0.5 s makes it four."""


@pytest.fixture
def relayed() -> Iterator[tuple[SqlStore, SqlStore, TcpRelay]]:
    """(the store as the leader reaches it, through the relay; the same database directly)."""
    with postgres_schema() as url:
        direct = SqlStore.open(url)
        target = make_url(url).port or 5432
        with TcpRelay(target) as relay:
            through_url = make_url(url).set(port=relay.port).render_as_string(hide_password=False)
            through = SqlStore.open(through_url, migrate=False, lock_timeout_s=1)
            try:
                yield through, direct, relay
            finally:
                through.close()
                direct.close()


def _until(check: object, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)
    assert check(), f"not within {timeout_s} s"  # type: ignore[operator]


def _scraped(client: TestClient, name: str, **labels: str) -> float:
    """One sample of `GET /metrics`, as Prometheus reads it."""
    response = client.get("/metrics")
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


@pytest.mark.skipif(NO_POSTGRES is not None, reason=str(NO_POSTGRES))
def test_a_store_outage_is_one_warning_and_one_line_not_a_traceback_a_poll(
    relayed: tuple[SqlStore, SqlStore, TcpRelay], caplog: pytest.LogCaptureFixture
) -> None:
    through, direct, relay = relayed
    metrics = Telemetry()
    web = TestClient(
        build_app(direct, WebSettings(bearer_token="t"), lambda: None, metrics=metrics)
    )
    out = io.StringIO()
    printer = ConsoleDelivery(through, lambda: out, metrics=metrics)
    chat = QueuedConsoleChat(direct, Console(width=80, file=io.StringIO()), Lang.EN)
    with caplog.at_level(logging.INFO, logger="gpubot"):
        printer.start()
        try:
            chat.post_notice("before the outage")
            printer.wake()
            _until(lambda: "before the outage" in out.getvalue(), 10)
            relay.cut()
            time.sleep(OUTAGE_S)  # the outage is the thing measured: it lasts this long
            chat.post_notice("queued during the outage")  # by a replica that reaches the store
            relay.restore()
            _until(lambda: "queued during the outage" in out.getvalue(), 20)
        finally:
            printer.stop()

    printed = out.getvalue()
    assert printed.count("before the outage") == printed.count("queued during the outage") == 1
    told = [r for r in caplog.records if r.name.startswith("gpubot")]
    assert [r for r in told if r.exc_info or r.levelno >= logging.ERROR] == []
    warnings = [r.getMessage() for r in told if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("console delivery paused: store ")
    ended = [r.getMessage() for r in told if r.levelno == logging.INFO]
    assert len(ended) == 1 and ended[0].startswith("console delivery resumes after "), ended
    # Tries at 0, 0.5, 1.5 and 3.5 s into the outage, the next at 7.5 s (after it): four
    # failed, where a try every 0.5 s made eight.
    failed = _scraped(web, "gpubot_outbox_failures_total", chat="console", cause="store")
    assert 2 <= failed <= 5, failed
    assert _scraped(web, "gpubot_outbox_failures_total", chat="console", cause="error") == 0


def test_a_slack_outage_is_one_warning_and_one_line_not_one_a_retry(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Slack answering 500 for two minutes: one warning when the delivery first meets it, one
    line when a message goes through again, every failed call counted; it was a warning a
    retry (1, 2, 4 ... 60 s apart) before."""
    clock = FakeClock(NOW)
    with SlackDouble(clock=clock.time, channels={CHANNEL: "gpu-alerts"}) as double:
        store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
        try:
            metrics = Telemetry()
            web = TestClient(
                build_app(store, WebSettings(bearer_token="t"), lambda: None, metrics=metrics)
            )
            chat = SlackChat(store, CHANNEL, clock=clock)
            client = slack_client(SlackSettings(bot_token=double.token, api_url=double.url))
            delivery = OutboxDelivery(store, client, clock=clock, metrics=metrics)
            double.outage(120)
            for n in range(3):
                chat.post_notice(f"notice {n}")
            with caplog.at_level(logging.INFO, logger="gpubot"):
                for _ in range(60):  # five minutes in steps of 5 s
                    delivery.deliver_once(clock())
                    clock.advance(5)
        finally:
            store.close()
        assert [m["text"] for m in double.messages(CHANNEL)] == [f"notice {n}" for n in range(3)]
        failed_calls = len(double.calls) - 3

    told = [r for r in caplog.records if r.name.startswith("gpubot")]
    warnings = [r.getMessage() for r in told if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("slack unreachable: "), warnings
    ended = [r.getMessage() for r in told if r.levelno == logging.INFO]
    assert len(ended) == 1 and ended[0].startswith("slack answers again after "), ended
    assert failed_calls >= 3
    assert _scraped(web, "gpubot_outbox_failures_total", chat="slack", cause="chat") == failed_calls
