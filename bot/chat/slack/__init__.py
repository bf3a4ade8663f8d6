"""The Slack adapter: the `Chat` port through the store's outbox, the delivery worker, the
interaction endpoint (buttons and `/gpubot`), Socket Mode, and Slack user groups.

Why it exists: Slack is where people read a diagnosis and decide. Two things must hold at
this edge whatever Slack does: nothing the bot says is lost (docs/architecture.md, invariant
8), and no request that Slack did not send, or sent before, changes anything (invariant 7).

What it must never do: decide who may approve, or act. Every click goes to the engine
(`Engine.approve` / `Engine.deny`, which `bot.pipeline.service.Service` satisfies), and the
answer the engine gives is what the person sees. It never sends a chat message straight to
Slack from the pipeline: `SlackChat` only queues (`Outbox.outbox_put`), `OutboxDelivery`
sends.

One job per module, each private, behind the names below (the layers, top to bottom, are an
import-linter contract, `slack-layers` in `.importlinter`):

- `_wiring`: the client, `build_slack_outgoing` → `SlackOutgoing`, `build_slack_routes`
- `_socket_mode`: `SocketModeRunner`, the same app over Slack's websocket
- `_receiving`: `SlackInteractions`: the HTTP endpoint and every check before the ack
  (body limit, unparsable body, bolt's request verification, replays), the bolt app, the pool
- `_buttons` · `_command`: what a click (approve, deny, snooze, timeline) and `/gpubot` do
- `_handling`: what both share after the ack (ephemeral answers, the timeline as blocks)
- `_posting` · `_delivering` · `_groups`: `SlackChat` (queues in the outbox),
  `OutboxDelivery` (sends it), `SlackGroups` (who is in a user group)
- `_ports` · `_texts`: what the adapter needs of the engine; text as Slack shows it
"""

from bot.chat.slack._delivering import OutboxDelivery
from bot.chat.slack._groups import SlackGroups
from bot.chat.slack._posting import SlackChat
from bot.chat.slack._receiving import SlackInteractions
from bot.chat.slack._socket_mode import SocketModeRunner
from bot.chat.slack._wiring import (
    SlackOutgoing,
    build_slack_outgoing,
    build_slack_routes,
    slack_client,
)

__all__ = [
    "OutboxDelivery",
    "SlackChat",
    "SlackGroups",
    "SlackInteractions",
    "SlackOutgoing",
    "SocketModeRunner",
    "build_slack_outgoing",
    "build_slack_routes",
    "slack_client",
]
