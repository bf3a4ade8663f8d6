"""The wiring of the Slack adapter: the Web API client, the outgoing parts the composition
root builds first (`build_slack_outgoing` → `SlackOutgoing`), and the HTTP route of the
incoming side (`build_slack_routes`).

Why it exists: `bot/roots/serve.py` must build Slack in two steps, because the parts depend on
one another across the engine: the executor needs the user groups, the service needs the
chat, and `SlackInteractions` needs the service. Keeping the construction here keeps the
composition root to a few calls, and the defaults (no slack_sdk retries, one client for
delivery and groups) in one place.

What it must never do: start anything. The delivery worker runs on the leader only (the
outbox has no claim: two senders would post twice), so starting it is the caller's, when it
leads; Socket Mode is connected by the caller too.
"""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk import WebClient
from starlette.routing import Route

from bot.chat.slack._delivering import OutboxDelivery
from bot.chat.slack._groups import SlackGroups
from bot.chat.slack._posting import SlackChat
from bot.chat.slack._receiving import SlackInteractions
from bot.clock import Clock, utcnow
from bot.config import ApprovalPolicy, SlackSettings
from bot.errors import InputError
from bot.model import Lang
from bot.ports import Outbox
from bot.process.telemetry import Telemetry


def slack_client(settings: SlackSettings, *, timeout_s: int | None = None) -> WebClient:
    """A WebClient without slack_sdk's own retries (the outbox decides when to try again),
    each call cut after `timeout_s` (`slack.timeout_s` unless given): a Slack that hangs
    holds up one delivery attempt, never the outbox for good."""
    token = settings.bot_token.get_secret_value() if settings.bot_token else None
    timeout = settings.timeout_s if timeout_s is None else timeout_s
    return WebClient(token=token, base_url=settings.api_url, timeout=timeout, retry_handlers=[])


@dataclass
class SlackOutgoing:
    """What the composition root builds first: the executor needs `groups`, the service
    needs `chat`, and `SlackInteractions` needs the service. It holds the parts and owns
    none of their state; it must never start the delivery (the leader does)."""

    client: WebClient
    chat: SlackChat
    delivery: OutboxDelivery
    groups: SlackGroups


def build_slack_outgoing(
    settings: SlackSettings,
    outbox: Outbox,
    policy: ApprovalPolicy,
    lang: Lang,
    *,
    clock: Clock = utcnow,
    metrics: Telemetry | None = None,
) -> SlackOutgoing:
    """The client, the chat (waking the delivery on every message), the delivery (not
    started: start it on the leader; its failed rounds counted in `metrics`) and the group
    lookup."""
    if not settings.channel:
        raise InputError("slack.channel", "required: the channel id diagnoses go to")
    client = slack_client(settings)
    delivery = OutboxDelivery(outbox, client, clock=clock, metrics=metrics)
    chat = SlackChat(outbox, settings.channel, lang, clock=clock, on_queued=delivery.wake)
    groups = SlackGroups.for_policy(client, policy, ttl_s=settings.groups_ttl_s)
    return SlackOutgoing(client, chat, delivery, groups)


def build_slack_routes(
    interactions: SlackInteractions, path: str = "/slack/events", *, body_timeout_s: float = 10.0
) -> list[Route]:
    """`POST /slack/events` for buttons and slash commands (one Request URL for both); a body
    not complete within `body_timeout_s` is a 408."""
    return interactions.routes(path, body_timeout_s=body_timeout_s)
