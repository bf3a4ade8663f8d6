"""Issue 15 item 5, seen where the on-call reads it: alerts whose labels name nodes like
`gpu-y; rm -rf / #`, `$(reboot)` or `` gpu-`id` `` (none of them in the cluster), and an alert
on a real node whose text says `*bold*`. Posted commands once carried that text verbatim, and
Slack showed `*bold*` in bold. Now: an absent node is said to be absent and gets no command
and no proposal; no command posted carries an alert's text; outside
text is shown as it is, in Slack (through the Slack double) and on the console. Since issue 31
item 4 an absent node opens no incident either: it is said to be absent in one notice for its
Alertmanager group (tests/integration/test_look_alike_nodes.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.model import Action
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from tests.helpers.mrkdwn import shown
from tests.integration import test_service, test_slack_adapter
from tests.integration.test_service import Bot
from tests.integration.test_slack_adapter import CHANNEL, Rig

bot = test_service.bot
rig = test_slack_adapter.rig

HOSTILE = ["gpu-y; rm -rf / #", "$(reboot)", "gpu-`id`"]
SAYS = "*bold* _it_ ~gone~ `code` <!channel> <!date^00000000^{_}|X>"


def _payload() -> dict[str, Any]:
    def alert(fingerprint: str, labels: dict[str, str]) -> dict[str, Any]:
        return {
            "status": "firing",
            "labels": labels,
            "annotations": {"summary": SAYS},
            "startsAt": datetime.now(UTC).isoformat(),
            "endsAt": "0001-01-01T00:00:00Z",
            "fingerprint": fingerprint,
            "generatorURL": "",
        }

    alerts = [
        alert(f"h{i}", {"alertname": "GPUXidError", "node": name, "xid": "79", "gpu": "3"})
        for i, name in enumerate(HOSTILE)
    ]
    # A real node: its alert's own words come through as "also firing" evidence.
    alerts.append(alert("real", {"alertname": "SomeVendorAlert *bold*", "node": "gpu-a2"}))
    alerts.append(alert("xid", {"alertname": "GPUXidError", "node": "gpu-a2", "xid": "79"}))
    return {
        "version": "4",
        "groupKey": "g",
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "gpubot",
        "groupLabels": {},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager",
        "alerts": alerts,
    }


def _deliver(store: Any, service: Any) -> None:
    signals = signals_from_payload(validate_payload(_payload()), ["node"])
    fresh = store.add_signals(signals, datetime.now(UTC))
    service.process([s for s, new in zip(signals, fresh, strict=True) if new])


def _walk(value: Any) -> Any:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _commands(blocks: Any) -> list[str]:
    """Every command line of the runbook: the preformatted rich text."""
    found: list[str] = []
    for d in _walk(blocks):
        if d.get("type") == "rich_text_preformatted":
            text = "".join(e.get("text", "") for e in d.get("elements", []))
            found.extend(text.splitlines())
    return found


def _mrkdwn(blocks: Any) -> list[str]:
    return [d["text"] for d in _walk(blocks) if d.get("type") == "mrkdwn"]


def test_in_slack_absent_nodes_get_no_command_and_outside_text_shows_as_it_is(rig: Rig) -> None:
    _deliver(rig.store, rig.service)
    rig.settle()
    posted = [c.params for c in rig.double.calls_to("chat.postMessage")]
    messages = {p.get("text", ""): p for p in posted}
    assert len(messages) >= 2  # the real node's diagnosis, and the notice of the absent ones

    for name in HOSTILE:
        [message] = [p for p in posted if name in shown(p.get("text", "")).text]
        blocks = message.get("blocks", [])
        said = "\n".join(shown(t).text for t in [message["text"], *_mrkdwn(blocks)])
        assert f"no node {name} in the cluster (only alerts name it)" in said
        assert "no command is offered for it" in said
        assert _commands(blocks) == []
        assert [d for d in _walk(blocks) if d.get("action_id")] == [
            d for d in _walk(blocks) if d.get("action_id", "").endswith(("snooze", "timeline"))
        ]  # no approve or deny button: nothing is proposed for a node that is not there

    incidents = {i.node: i for i in rig.store.incidents()}
    assert not set(incidents) & set(HOSTILE)  # no incident, so no request either
    assert not any(
        r.action is not Action.NONE
        for i in incidents.values()
        for r in rig.store.requests(i.id)
        if r.node in HOSTILE
    )
    for p in posted:
        for line in _commands(p.get("blocks", [])):
            assert not any(name in line for name in HOSTILE), line

    [real] = [p for p in posted if p.get("blocks") and "gpu-a2" in p.get("text", "")]
    assert "kubectl describe node gpu-a2" in _commands(real["blocks"])  # a real node's are there
    texts = [shown(t) for t in _mrkdwn(real["blocks"])]
    everything = "\n".join(t.text for t in texts)
    assert "SomeVendorAlert *bold*" in everything
    assert SAYS in everything  # the summary, every character as written
    formatted = [f for t in texts for f in t.formatted]
    assert not [f for f in formatted if f[1] == "bold" or f[1] == "it" or f[1] == "gone"]
    assert not [live for t in texts for live in t.live]  # no @channel, no date
    assert CHANNEL in {p["channel"] for p in posted}


def test_on_the_console_absent_nodes_get_no_command(bot: Bot) -> None:
    _deliver(bot.store, bot.service)
    said = bot.said
    for name in HOSTILE:
        assert f"no node {name} in the cluster (only alerts name it)" in said
    for line in said.splitlines():
        if line.strip().startswith("kubectl"):
            assert not any(name in line for name in HOSTILE), line
