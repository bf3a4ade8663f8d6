"""The `/gpubot` slash command: `status`, `incidents`, `timeline`, and `cordon|drain|uncordon
NODE`, which proposes a request for someone else to approve.

Why it exists: people on call ask the bot from the channel they are in, and sometimes want an
action nothing diagnosed. Every answer is ephemeral (for the one who typed); a proposal is a
message in the channel with the request's buttons, approved like any other.

What it must never do: act, or approve. A proposal only creates a request (the proposals'
`request`, with the policy's expiry) and posts it; someone the approval policy names must
click approve (not the proposer, unless the policy allows).
"""

from __future__ import annotations

from slack_bolt import Respond

from bot.chat.blocks import code, escape
from bot.chat.slack._handling import INCIDENT_ID, Handling, ephemeral, timeline_blocks
from bot.chat.slack._texts import for_slack, hhmm
from bot.errors import GpubotError
from bot.gate.items import failing_facts_text
from bot.model import Action, IncidentState
from bot.texts import say, state_name

OPEN_STATES = tuple(s for s in IncidentState if s is not IncidentState.RESOLVED)


def handle_command(h: Handling, user: str, text: str, respond: Respond) -> None:
    words = text.split()
    sub = words[0].lower() if words else "help"
    arg = words[1] if len(words) > 1 else None
    try:
        if sub == "status":
            ephemeral(respond, _status(h, arg))
        elif sub == "incidents":
            ephemeral(respond, _incidents(h))
        elif sub == "timeline" and arg:
            _timeline(h, arg, respond)
        elif sub in ("cordon", "drain", "uncordon") and arg:
            _propose(h, Action(sub), arg, user, respond)
        else:
            unknown = "" if sub == "help" else say(h.lang, "slack.unknown", sub=code(text[:100]))
            ephemeral(respond, unknown + say(h.lang, "slack.help", command=h.settings.command))
    except GpubotError as error:
        ephemeral(respond, say(h.lang, "slack.failed", error=for_slack(str(error))))


def _status(h: Handling, node: str | None) -> str:
    store = h.engine.store
    if node is None:
        open_ = store.incidents(states=OPEN_STATES)
        if not open_:
            return say(h.lang, "slack.no_incidents")
        states: dict[str, int] = {}
        for incident in open_:
            states[incident.state.value] = states.get(incident.state.value, 0) + 1
        counts = say(h.lang, "list.comma").join(
            f"{n} {state_name(state, h.lang)}" for state, n in sorted(states.items())
        )
        return say(h.lang, "slack.open_count", n=len(open_), counts=counts)
    cluster = h.engine.facts.of_node(node)
    facts = cluster.nodes.get(node)
    if facts is None or not facts.known:
        return say(h.lang, "slack.no_node", node=code(node))
    gpus = (
        f"{facts.gpu.allocatable}/{facts.gpu.expected}" if facts.gpu else say(h.lang, "slack.none")
    )
    lines = [
        say(
            h.lang,
            "slack.node",
            node=escape(node),
            pool=escape(facts.pool) if facts.pool else say(h.lang, "slack.no_pool"),
            ready=facts.ready or "?",
            scheduling=say(
                h.lang, "slack.cordoned" if facts.unschedulable else "slack.schedulable"
            ),
            gpus=gpus,
            pods=facts.remaining_pods,
        )
    ]
    failing = failing_facts_text(facts, cluster.pools, h.lang)
    if failing:
        lines.append(say(h.lang, "slack.gate", failing=escape(failing)))
    for incident in store.incidents(node=node, states=OPEN_STATES):
        lines.append(
            say(
                h.lang,
                "slack.node_incident",
                id=incident.id,
                rule=code(incident.rule),
                state=state_name(incident.state, h.lang),
                title=escape(incident.title),
            )
        )
    return "\n".join(lines)


def _incidents(h: Handling) -> str:
    open_ = h.engine.store.incidents(states=OPEN_STATES)
    if not open_:
        return say(h.lang, "slack.no_incidents")
    lines = [
        say(
            h.lang,
            "slack.incident_row",
            id=i.id,
            where=escape(i.node or i.pool or "")
            if i.node or i.pool
            else say(h.lang, "slack.cluster"),
            rule=code(i.rule),
            state=state_name(i.state, h.lang),
            since=hhmm(i.opened_at),
        )
        for i in open_[-30:]
    ]
    more = say(h.lang, "slack.more", n=len(open_) - 30) if len(open_) > 30 else ""
    return say(h.lang, "slack.open_list", n=len(open_)) + "\n".join(lines) + more


def _timeline(h: Handling, arg: str, respond: Respond) -> None:
    store = h.engine.store
    incident_id: str | None = None
    if INCIDENT_ID.fullmatch(arg):
        incident_id = arg if h.incident(arg) is not None else None
    else:
        found = store.incidents(node=arg)
        incident_id = found[-1].id if found else None
    if incident_id is None:
        ephemeral(respond, say(h.lang, "slack.no_incident", arg=code(arg)))
        return
    title = say(h.lang, "slack.timeline", id=incident_id)
    ephemeral(respond, title, timeline_blocks(store, incident_id, h.lang))


def _propose(h: Handling, action: Action, node: str, user: str, respond: Respond) -> None:
    facts = h.engine.facts.of_node(node).nodes.get(node)
    if facts is None or not facts.known:
        ephemeral(respond, say(h.lang, "slack.no_node", node=code(node)))
        return
    open_ = h.engine.store.incidents(node=node, states=OPEN_STATES)
    incident = open_[-1] if open_ else None
    request = h.engine.proposals.request(action, facts, incident.id if incident else None, user)
    h.chat.post_proposal(request, incident)
    ephemeral(
        respond,
        say(
            h.lang,
            "slack.proposed",
            action=action.value,
            node=escape(node),
            id=code(request.id),
            channel=h.chat.channel,
            expires=hhmm(request.expires_at),
        ),
    )
