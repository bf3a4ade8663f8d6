"""Text as Slack shows it, for everything the adapter says: an engine's plain-text message as
mrkdwn, a time as HH:MM UTC, and how long one line may be.

Why it exists: the outgoing chat, the button handlers and `/gpubot` all put the engine's words
in front of people. One definition of the escaping keeps a pod name from smuggling in
`<!channel>` on every one of those paths, and turns `@S0123` group ids into group mentions the
same way everywhere.

What it must never do: talk to Slack or the store, or decide anything. These are pure
functions of their arguments.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from bot.chat.blocks import escape

THREAD_TEXT_MAX = 3900
"""Slack cuts `text` at 40,000 characters but advises under 4,000: a thread line is a line."""

_SUBTEAM = re.compile(r"@(S[A-Z0-9]{2,})\b")


def for_slack(text: str) -> str:
    """An engine message as mrkdwn: escaped, and `@S0123` group ids as group mentions."""
    return _SUBTEAM.sub(r"<!subteam^\1>", escape(text))


def hhmm(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%H:%M")
