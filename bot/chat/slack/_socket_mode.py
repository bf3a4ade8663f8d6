"""Socket Mode: `SocketModeRunner` serves the same bolt app as the HTTP endpoint over Slack's
websocket, for a bot that cannot be reached from the internet.

Why it exists: some clusters have no ingress Slack could post to. Over the websocket Slack
authenticates the connection with the app-level token (`xapp-`) and there is nothing to sign,
so checks 1 to 3 of `_receiving` do not apply; check 4 and every handler do, because they are
the same app's middleware and listeners.

What it must never do: grow logic of its own. It is a thin shell on purpose: the Slack double
speaks no websocket, so nothing here is tested but the wiring; everything it calls is tested
through HTTP.
"""

from __future__ import annotations

from slack_bolt.adapter.socket_mode import SocketModeHandler

from bot.chat.slack._receiving import SlackInteractions


class SocketModeRunner:
    """Socket Mode: the same bolt app (and so the same checks and handlers) over Slack's
    websocket, with slack_sdk's built-in client (no extra dependency). A thin shell on
    purpose: the Slack double speaks no websocket, so nothing here is tested but the wiring;
    everything it calls is tested through HTTP.

    Owns the websocket connection (`handler`), which reconnects by itself. Must never check
    or handle a request itself: the app's middleware and listeners do, as for HTTP."""

    def __init__(self, interactions: SlackInteractions, app_token: str) -> None:
        self.handler = SocketModeHandler(interactions.app, app_token)

    def start(self) -> None:
        """Connects and returns; the client reconnects by itself."""
        self.handler.connect()  # type: ignore[no-untyped-call]

    def stop(self) -> None:
        self.handler.close()  # type: ignore[no-untyped-call]
