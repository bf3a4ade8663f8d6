"""Button clicks: which clicks are ours (`click_problem`, check 4 of the endpoint), and what a
click does once acknowledged (`handle_click`): approve, deny, snooze, timeline.

Why it exists: a click is how a person decides (docs/architecture.md, invariant 1 starts here), so a
click Slack did not send as ours must change nothing (invariant 7). Before the ack, a
`block_actions` request is refused with 400 when its action id is not one of ours, when its
value is not a request (approve/deny) or incident (snooze/timeline) in the store, or not a
button of the message clicked (a tampered value); a store that is down is a 503. This check is
bolt middleware (`_receiving`), so it holds for Socket Mode too.

After the ack: approve and deny go to the engine, whose answer is what the person sees (the
message's buttons replaced by the decision, a thread line after a first vote of two, or an
ephemeral answer for the clicker alone). Snooze mutes the incident's thread lines in this
process for `snooze_s` (the timeline keeps them and records the snooze); approving or denying
on the incident ends it.

What it must never do: decide who may approve, count how many must, or act. The engine
(`Engine.approve` / `Engine.deny`) does all three; even the "1 of 2" after a first vote
takes its 2 from the engine's answer (`Outcome.approvals_needed`, the request's policy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from slack_bolt import Respond

from bot.chat.blocks import (
    ACTION_IDS,
    APPROVE_ACTION,
    DENY_ACTION,
    SNOOZE_ACTION,
    TIMELINE_ACTION,
    decision_text,
    escape,
    mention,
)
from bot.chat.slack._handling import (
    INCIDENT_ID,
    REQUEST_ID,
    Handling,
    ephemeral,
    timeline_blocks,
)
from bot.chat.slack._texts import for_slack, hhmm
from bot.errors import GpubotError, StoreUnavailable
from bot.model import Lang
from bot.ports import Store
from bot.texts import say


@dataclass(frozen=True)
class Click:
    user: str
    action_id: str
    value: str


def click_of(body: Mapping[str, Any]) -> Click:
    """The click of a `block_actions` body that `click_problem` let through."""
    action = body["actions"][0]
    return Click(body["user"]["id"], action["action_id"], action["value"])


# -- before the ack: is it ours? -------------------------------------------------------------


def _buttons_of(message: object) -> set[tuple[str, str]] | None:
    """(action_id, value) of every button of the message clicked; None without a message."""
    if not isinstance(message, dict) or not isinstance(message.get("blocks"), list):
        return None
    found: set[tuple[str, str]] = set()
    for block in message["blocks"]:
        if not isinstance(block, dict):
            continue
        for element in block.get("elements", []) or []:
            if isinstance(element, dict):
                aid, value = element.get("action_id"), element.get("value")
                if isinstance(aid, str) and isinstance(value, str):
                    found.add((aid, value))
    return found


def click_problem(store: Store, body: Mapping[str, Any]) -> str | None:
    """Why a verified request is not a click on one of our buttons; None when it is one (or
    is no click at all). Raises `StoreUnavailable` when the store cannot tell."""
    if body.get("type") != "block_actions":
        return None
    actions = body.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        return "expected one action"
    action_id, value = actions[0].get("action_id"), actions[0].get("value")
    if action_id not in ACTION_IDS:
        return f"unknown action {str(action_id)[:100]!r}"
    if not isinstance(value, str) or not _known(store, str(action_id), value):
        return f"unknown value for {action_id}"
    buttons = _buttons_of(body.get("message"))
    if buttons is not None and (action_id, value) not in buttons:
        return f"no such {action_id} button on the message"
    user = body.get("user")
    if not isinstance(user, dict) or not isinstance(user.get("id"), str):
        return "no user"
    return None


def _known(store: Store, action_id: str, value: str) -> bool:
    try:
        if action_id in (APPROVE_ACTION, DENY_ACTION):
            if not REQUEST_ID.fullmatch(value):
                return False
            store.request(value)
        else:
            if not INCIDENT_ID.fullmatch(value):
                return False
            store.incident(value)
    except StoreUnavailable:
        raise
    except GpubotError:
        return False
    return True


# -- after the ack ---------------------------------------------------------------------------


def handle_click(h: Handling, click: Click, respond: Respond) -> None:
    if click.action_id == APPROVE_ACTION:
        _approve(h, click, respond)
    elif click.action_id == DENY_ACTION:
        _deny(h, click, respond)
    elif click.action_id == SNOOZE_ACTION:
        _snooze(h, click, respond)
    elif click.action_id == TIMELINE_ACTION:
        title = say(h.lang, "slack.timeline_title")
        ephemeral(respond, title, timeline_blocks(h.engine.store, click.value, h.lang))


def _approve(h: Handling, click: Click, respond: Respond) -> None:
    outcome = h.engine.approve(click.value, click.user)
    store = h.engine.store
    request = store.request(click.value)
    incident = h.incident(request.incident)
    if incident is not None:
        h.chat.unmute(incident.id)  # someone is on it: they want to see the thread
    now = h.clock()
    status = outcome.status
    if status == "need-another":
        voters = [mention(v.approver) for v in store.votes(request.id)]
        if incident is not None:
            needed = outcome.approvals_needed or len(voters) + 1
            h.chat.post_thread_mrkdwn(incident, _approvals_so_far(voters, needed, h.lang))
        ephemeral(respond, say(h.lang, "slack.recorded", message=for_slack(outcome.message)))
    elif status in ("succeeded", "approved", "dry-run", "failed"):
        approvers = [v.approver for v in store.votes(request.id)]
        text = decision_text(request, "approved", approvers, now, h.lang)
        h.chat.update_decision(incident, request, text)
    elif status == "refused":
        # Approved, but not run (the pool's budget, the health gate): the buttons go, the
        # reason stays where they were, and the clicker hears it at once.
        h.chat.update_decision(incident, request, f"⏸ {for_slack(outcome.message)}")
        ephemeral(respond, for_slack(outcome.message))
    elif status == "expired":
        text = decision_text(request, "expired", [], request.expires_at, h.lang)
        h.chat.update_decision(incident, request, text)
        ephemeral(respond, for_slack(outcome.message))
    elif status == "changed":
        pass  # the service asked again (`Chat.ask_again`), wherever the action ran
    else:  # not-allowed, duplicate: for the clicker only, nothing changed
        ephemeral(respond, for_slack(outcome.message))


def _approvals_so_far(voters: list[str], needed: int, lang: Lang = Lang.EN) -> str:
    """The thread line after a vote that is not yet enough: `needed` is the engine's number
    (the request's policy), never this module's."""
    missing = max(1, needed - len(voters))
    if len(voters) == 1 and missing == 1:
        key = "slack.votes_second"
    else:
        key = "slack.votes_more" if missing > 1 else "slack.votes_one_more"
    return say(
        lang,
        key,
        votes=len(voters),
        needed=needed,
        voters=", ".join(voters),
        missing=missing,
    )


def _deny(h: Handling, click: Click, respond: Respond) -> None:
    outcome = h.engine.deny(click.value, click.user, say(h.lang, "slack.denied_reason"))
    if outcome.status != "denied":
        ephemeral(respond, for_slack(outcome.message))
        return
    request = h.engine.store.request(click.value)
    text = decision_text(request, "denied", [click.user], h.clock(), h.lang)
    h.chat.update_decision(h.incident(request.incident), request, text)


def _snooze(h: Handling, click: Click, respond: Respond) -> None:
    now = h.clock()
    until = now + timedelta(seconds=h.settings.snooze_s)
    h.chat.snooze(click.value, until)
    h.engine.timeline.snoozed(click.value, click.user, until, now)
    ephemeral(
        respond,
        say(h.lang, "slack.snoozed", id=escape(click.value), until=hhmm(until)),
    )
