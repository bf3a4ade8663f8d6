"""What the button handlers (`_buttons`) and `/gpubot` (`_command`) share once a request is
acknowledged: who they answer with (`Handling`), the ephemeral answer, and an incident's
timeline as blocks (the timeline button and `/gpubot timeline` show the same thing).

Why it exists: both kinds of interaction run after the ack, on the interaction pool, and both
answer the person who asked in the same way. Ephemeral answers to a click go straight to the
click's `response_url`, never through the outbox: they are for one person, now, and worthless
an hour later, so a Slack outage loses them on purpose (the person clicks again).

What it must never do: decide or act. A handler asks the engine and shows its answer; the
timeline is read from the store as it is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC

from slack_bolt import Respond
from slack_sdk.models.blocks import Block, SectionBlock

from bot.chat.blocks import MAX_BLOCKS, SECTION_TEXT_MAX, code, escape, fit
from bot.chat.slack._ports import Engine
from bot.chat.slack._posting import SlackChat
from bot.chat.slack._texts import THREAD_TEXT_MAX
from bot.clock import Clock
from bot.config import SlackSettings
from bot.errors import GpubotError
from bot.model import Incident, Lang
from bot.ports import Store
from bot.texts import kind_name, say, state_name

log = logging.getLogger("gpubot.slack")

REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")
"""What a request id may look like in a button's value: anything else was not ours."""
INCIDENT_ID = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class Handling:
    """What every handler works with: the engine that decides, the chat that shows it, the
    Slack settings, the language and the clock. References only: it owns nothing, and the
    handlers keep no state of their own (snoozes are the chat's)."""

    engine: Engine
    chat: SlackChat
    settings: SlackSettings
    lang: Lang
    clock: Clock

    def incident(self, incident_id: str | None) -> Incident | None:
        if incident_id is None:
            return None
        try:
            return self.engine.store.incident(incident_id)
        except GpubotError:
            return None


def ephemeral(respond: Respond, text: str, blocks: Sequence[Block] | None = None) -> None:
    """An answer for the one person who clicked or typed, through the response URL."""
    try:
        respond(
            text=fit(text, THREAD_TEXT_MAX, escaped=True),
            blocks=list(blocks) if blocks else None,
            response_type="ephemeral",
            replace_original=False,
        )
    except Exception as error:  # Slack is down: the person clicks again
        log.warning("could not answer through the response URL: %s", error)


def timeline_blocks(store: Store, incident_id: str, lang: Lang = Lang.EN) -> list[Block]:
    """The timeline as sections of at most 3000 characters, the newest kept when it
    does not fit in one message."""
    incident = store.incident(incident_id)
    entries = store.timeline(incident_id)
    head = say(
        lang,
        "slack.timeline_head",
        id=escape(incident.id),
        node=escape(incident.node or "-"),
        rule=code(incident.rule),
        state=state_name(incident.state, lang),
    )
    lines = [
        fit(
            f"`{e.at.astimezone(UTC):%m-%d %H:%M:%S}` *{kind_name(e.kind, lang)}* "
            f"{escape(e.actor)}: "
            f"{escape(e.text)}",
            500,
            escaped=True,
        )
        for e in entries
    ]
    chunks: list[str] = []
    current = ""
    for line in reversed(lines):  # newest first, so the cut falls on the oldest
        if current and len(current) + 1 + len(line) > SECTION_TEXT_MAX // 2:
            chunks.append(current)
            current = ""
        current = line if not current else line + "\n" + current
    if current:
        chunks.append(current)
    room = MAX_BLOCKS - 2
    shown = chunks[:room]
    dropped = sum(c.count("\n") + 1 for c in chunks[room:])
    blocks: list[Block] = [
        SectionBlock(block_id="gpubot.timeline", text=fit(head, SECTION_TEXT_MAX, escaped=True))
    ]
    if dropped:
        blocks.append(
            SectionBlock(
                block_id="gpubot.timeline-more",
                text=say(lang, "slack.timeline_dropped", n=dropped, id=escape(incident.id)),
            )
        )
    for n, chunk in enumerate(reversed(shown)):
        blocks.append(SectionBlock(block_id=f"gpubot.timeline.{n}", text=chunk))
    if not entries:
        blocks.append(
            SectionBlock(block_id="gpubot.timeline.0", text=say(lang, "slack.timeline_empty"))
        )
    return blocks
