"""The Slack adapter (being split into one module per job; see `_posting`)."""

from bot.chat.slack._posting import (
    OutboxDelivery,
    SlackChat,
    SlackGroups,
    SlackInteractions,
    SlackOutgoing,
    SocketModeRunner,
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
