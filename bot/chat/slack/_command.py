"""The `/gpubot` slash command: `status`, `incidents`, `timeline`, and `cordon|drain|uncordon
NODE`, which proposes a request for someone else to approve.

Why it exists: people on call ask the bot from the channel they are in, and sometimes want an
action nothing diagnosed. Every answer is ephemeral (for the one who typed); a proposal is a
message in the channel with the request's buttons, approved like any other.

What it must never do: act, or approve. A proposal only creates a request (the executor's
`request`, with the policy's expiry) and posts it; someone the approval policy names must
click approve (not the proposer, unless the policy allows).
"""

from __future__ import annotations

from slack_bolt import Respond

from bot.chat.blocks import code, escape
from bot.chat.slack._handling import INCIDENT_ID, Handling, ephemeral, timeline_blocks
from bot.chat.slack._texts import for_slack, hhmm
from bot.errors import GpubotError
from bot.model import Action, IncidentState

OPEN_STATES = tuple(s for s in IncidentState if s is not IncidentState.RESOLVED)

HELP = """*gpubot* — `{command} <subcommand>`
• `status [NODE]` — open incidents, or one node's state
• `incidents` — the open incidents
• `timeline INCIDENT|NODE` — what happened, in order
• `cordon NODE` · `drain NODE` · `uncordon NODE` — propose it; someone the policy names \
must approve it in the channel (not you, unless the policy allows)
• `help` — this"""


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
            unknown = "" if sub == "help" else f"Unknown subcommand {code(text[:100])}.\n"
            ephemeral(respond, unknown + HELP.format(command=h.settings.command))
    except GpubotError as error:
        ephemeral(respond, f"Could not do that: {for_slack(str(error))}")


def _status(h: Handling, node: str | None) -> str:
    store = h.engine.store
    if node is None:
        open_ = store.incidents(states=OPEN_STATES)
        if not open_:
            return "No open incidents."
        states: dict[str, int] = {}
        for incident in open_:
            states[incident.state.value] = states.get(incident.state.value, 0) + 1
        counts = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
        return f"{len(open_)} open incident(s): {counts}"
    facts = h.engine.executor.read_facts(node).nodes.get(node)
    if facts is None or not facts.known:
        return f"No node {code(node)} in the cluster."
    gpus = f"{facts.gpu.allocatable}/{facts.gpu.expected}" if facts.gpu else "none"
    lines = [
        f"*{escape(node)}* ({escape(facts.pool or 'no pool')}): ready {facts.ready or '?'}, "
        f"{'cordoned' if facts.unschedulable else 'schedulable'}, GPUs {gpus}, "
        f"{facts.remaining_pods} pod(s) a drain would move",
    ]
    if facts.gate_failures:
        lines.append("Health gate: " + escape("; ".join(facts.gate_failures)))
    for incident in store.incidents(node=node, states=OPEN_STATES):
        lines.append(
            f"• incident {incident.id} {code(incident.rule)} {incident.state.value}: "
            f"{escape(incident.title)}"
        )
    return "\n".join(lines)


def _incidents(h: Handling) -> str:
    open_ = h.engine.store.incidents(states=OPEN_STATES)
    if not open_:
        return "No open incidents."
    lines = [
        f"• {i.id} · {escape(i.node or i.pool or 'cluster')} · {code(i.rule)} · "
        f"{i.state.value} · since {hhmm(i.opened_at)} UTC"
        for i in open_[-30:]
    ]
    more = f"\n… and {len(open_) - 30} more" if len(open_) > 30 else ""
    return f"{len(open_)} open incident(s):\n" + "\n".join(lines) + more


def _timeline(h: Handling, arg: str, respond: Respond) -> None:
    store = h.engine.store
    incident_id: str | None = None
    if INCIDENT_ID.fullmatch(arg):
        incident_id = arg if h.incident(arg) is not None else None
    else:
        found = store.incidents(node=arg)
        incident_id = found[-1].id if found else None
    if incident_id is None:
        ephemeral(respond, f"No incident {code(arg)}, nor one for a node of that name.")
        return
    ephemeral(respond, f"timeline of incident {incident_id}", timeline_blocks(store, incident_id))


def _propose(h: Handling, action: Action, node: str, user: str, respond: Respond) -> None:
    facts = h.engine.executor.read_facts(node).nodes.get(node)
    if facts is None or not facts.known:
        ephemeral(respond, f"No node {code(node)} in the cluster.")
        return
    open_ = h.engine.store.incidents(node=node, states=OPEN_STATES)
    incident = open_[-1] if open_ else None
    request = h.engine.executor.request(action, facts, incident.id if incident else None, user)
    h.chat.post_proposal(request, incident)
    ephemeral(
        respond,
        f"Proposed *{action.value} {escape(node)}* as request {code(request.id)} in "
        f"<#{h.chat.channel}>. Someone the approval policy names must approve it "
        f"(not you, unless the policy allows); it expires at {hhmm(request.expires_at)} UTC.",
    )
