"""serve's console chat through the store's outbox (issue 19 item 6): two replicas' chats on
one store, one printer (the leader's): every message of an incident in one output, in the
order queued, rendered as `ConsoleChat` renders it (a runbook command never wrapped)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from bot.chat.queued import ConsoleDelivery, QueuedConsoleChat
from bot.model import Incident, IncidentState, Lang, RunbookStep, Severity
from tests.helpers.builders import T0, diagnosis, request_for
from tests.helpers.stores import open_store

COMMAND = "kubectl get node gpu-a1 -o jsonpath='{.status.allocatable}' --request-timeout=30s"


def _incident(incident_id: str) -> Incident:
    return Incident(
        id=incident_id,
        cluster="c",
        node="gpu-a1",
        rule="gpu-fell-off-bus",
        state=IncidentState.DIAGNOSED,
        severity=Severity.CRITICAL,
        title="GPU fell off the bus",
        opened_at=T0,
        updated_at=T0,
    )


def test_two_replicas_messages_print_once_in_order_on_the_leaders_output(
    tmp_path: Path,
) -> None:
    with open_store("sqlite", tmp_path) as store:
        narrow = Console(width=60, file=io.StringIO())
        a = QueuedConsoleChat(store, narrow, Lang.EN, clock=lambda: T0)
        b = QueuedConsoleChat(store, narrow, Lang.EN, clock=lambda: T0)
        out = io.StringIO()
        printer = ConsoleDelivery(store, lambda: out, clock=lambda: T0)
        one, two = _incident("1"), _incident("2")
        found = diagnosis().model_copy(
            update={"runbook": [RunbookStep(text="look", commands=[COMMAND])]}
        )

        a.post_diagnosis(one, found, [request_for("1", "1-drain-x")])
        b.post_thread(one, "draining: 1 of 2 pods left")
        b.post_diagnosis(one, found, [])  # the same message from the other replica: one
        a.post_thread(two, "other incident")
        b.post_result(request_for("1", "1-drain-x"), "cordoned gpu-a1")
        a.post_notice("a notice")

        assert out.getvalue() == ""  # nothing prints before the leader's printer runs
        assert printer.deliver_once() == 5
        printed = out.getvalue()
        assert printed.splitlines().count("incident 1") == 1
        assert (
            printed.index("incident 1")
            < printed.index("1-drain-x")
            < printed.index("draining: 1 of 2")
            < printed.index("cordoned gpu-a1")
        )
        assert "other incident" in printed and "a notice" in printed
        assert f"$ {COMMAND}\n" in printed  # 80+ columns on a 60-column console: not wrapped
        assert printer.deliver_once() == 0  # sent once
        assert store.outbox_pending() == 0


def test_a_message_not_for_the_console_is_given_up_not_printed(tmp_path: Path) -> None:
    with open_store("sqlite", tmp_path) as store:
        store.outbox_put("k", "g", "chat.postMessage", {"text": "x"}, T0)
        out = io.StringIO()
        assert ConsoleDelivery(store, lambda: out, clock=lambda: T0).deliver_once() == 0
        assert out.getvalue() == ""
        assert store.outbox_pending() == 0
