"""Console chat for `gpubot serve`: what a replica would print is queued in the store's outbox
(rendered text, grouped per incident), and only the leader prints it.

Why it exists: with two replicas on one store, the replica that ran a pass printed its
messages, so one incident's diagnosis could appear in one process's output and its thread
lines in the other's (issue 19 item 6). Slack's messages go through the outbox and the leader;
console messages now do too: every message appears, in order, in one place.

`QueuedConsoleChat` renders each message as `ConsoleChat` would (rich, at the console's width
and colours, commands never soft-wrapped) and queues the text; `ConsoleDelivery` is the
leader's worker (the outbox's one worker, `bot.chat.delivery`) that writes what is due
through `ConsolePrinter` and marks it sent. A single replica prints within the
delivery's poll (it is woken at once when it queued the message itself).

What it must never do: run two deliveries over one store (each would print the same lines):
one per store, on the leader, started and stopped with leadership like `OutboxDelivery`.
Delivery is at least once: a leader killed between writing and `outbox_sent` prints a message
again on the next leader.
"""

from __future__ import annotations

import io
import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TextIO, Unpack

from rich.console import Console

from bot.chat.console import ConsoleChat
from bot.chat.delivery import OutboxWorker, Outcome, Refused, Sent, WorkerOptions
from bot.clock import Clock, utcnow
from bot.model import ActionRequest, Diagnosis, Incident, Lang, OutboxItem
from bot.ports import Outbox

log = logging.getLogger("gpubot.console")

PRINT = "console.print"
"""The outbox method of a console message: its payload's `text` is written as it is."""


def _group(incident: str | None) -> str:
    return f"console/incident/{incident}" if incident else "console/notices"


class QueuedConsoleChat:
    """The Chat port for `serve` without Slack: renders as `ConsoleChat`, queues the text.

    Must never print itself: only the leader's `ConsoleDelivery` does."""

    def __init__(
        self,
        outbox: Outbox,
        like: Console,
        lang: Lang,
        *,
        clock: Clock = utcnow,
        on_queued: Callable[[], None] = lambda: None,
    ) -> None:
        """`like`: the console the leader prints on (its width and colours are kept)."""
        self.outbox = outbox
        self.clock = clock
        self.on_queued = on_queued
        self._console = Console(
            file=io.StringIO(),
            width=like.width,
            color_system=like.color_system,  # type: ignore[arg-type]
            force_terminal=like.is_terminal,
            no_color=like.no_color,
            highlight=False,
        )
        self._chat = ConsoleChat(self._console, lang)
        self._lock = threading.Lock()

    def _put(self, group: str, draw: Callable[[ConsoleChat], object], key: str = "") -> None:
        with self._lock, self._console.capture() as capture:
            draw(self._chat)
        text = capture.get()
        key = key or f"{group}/{uuid.uuid4().hex}"
        self.outbox.outbox_put(key, group, PRINT, {"text": text}, self.clock())
        self.on_queued()

    def post_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        under: Incident | None = None,
    ) -> str | None:
        group = _group(incident.id)
        self._put(
            group,
            lambda chat: chat.post_diagnosis(incident, diagnosis, requests, under),
            key=f"{group}/message",  # one diagnosis per incident, whichever replica posts it
        )
        return f"console:{incident.id}"

    def post_thread(self, incident: Incident, text: str) -> None:
        self._put(_group(incident.id), lambda chat: chat.post_thread(incident, text))

    def ask_again(
        self, incident: Incident | None, old: ActionRequest, new: ActionRequest, why: str
    ) -> None:
        group = _group(incident.id if incident else old.incident)
        self._put(group, lambda chat: chat.ask_again(incident, old, new, why))

    def revise_diagnosis(
        self,
        incident: Incident,
        diagnosis: Diagnosis,
        requests: Sequence[ActionRequest],
        note: str,
    ) -> None:
        self._put(
            _group(incident.id),
            lambda chat: chat.revise_diagnosis(incident, diagnosis, requests, note),
        )

    def withdraw(self, incident: Incident, request: ActionRequest, why: str) -> None:
        self._put(_group(incident.id), lambda chat: chat.withdraw(incident, request, why))

    def post_notice(self, text: str, monospace: bool = False) -> None:
        self._put(_group(None), lambda chat: chat.post_notice(text, monospace))

    def post_result(self, request: ActionRequest, text: str) -> None:
        self._put(_group(request.incident), lambda chat: chat.post_result(request, text))


class ConsolePrinter:
    """The console's `Sender`: writes a queued message's text as it is.

    Owns nothing but where to write. Never sends what is not a console message (nothing here
    could): that is refused, and the outbox records why."""

    def __init__(self, out: Callable[[], TextIO]) -> None:
        self.out = out

    def send(self, item: OutboxItem, now: datetime) -> Outcome:
        if item.method != PRINT:
            return Refused(f"{item.method} is not a console message")
        out = self.out()
        out.write(str(item.payload.get("text", "")))
        out.flush()
        return Sent()


class ConsoleDelivery(OutboxWorker):
    """The leader's worker for the console: the outbox's one worker (`OutboxWorker`: its
    thread, the order per group) printing through `ConsolePrinter`."""

    def __init__(
        self, outbox: Outbox, out: Callable[[], TextIO], **options: Unpack[WorkerOptions]
    ) -> None:
        """`out`: where to write, asked at each write (the process's stdout, for tests)."""
        super().__init__(
            outbox,
            ConsolePrinter(out),
            name="console-outbox",
            what="console",
            log=log,
            **options,
        )
