"""Issue 31 item 4, seen where the on-call reads it: alerts whose `Hostname` is `gpu-a1` with a
zero-width space, a right-to-left override, isolates or a Cyrillic `а` (each renders exactly
as `gpu-a1`), and a plain `gpu-z9` the cluster does not have. Each became a CRITICAL "GPU fell
off the bus" incident, posted raw, and "6 node(s) in the cluster show this" counted four nodes
the cluster does not have.

Now: a node an alert names is matched to the cluster's nodes exactly; one the cluster does not
have opens no incident and counts nowhere. The channel is told once per Alertmanager group,
each name shown escaped (`gpu-a1\\u200b`) and marked "not in the cluster"; no character of
such a name reaches Slack or the console unescaped. Kubernetes node names are DNS-1123
subdomains (the API server's `ValidateNodeName`), so none of these could ever be a node's.
The real gpu-a1's own Xid 79 is diagnosed as before."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.model import Signal
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from tests.helpers.look_alikes import (
    ABSENT,
    HIDDEN,
    LOOK_ALIKES,
    SAYS_SHOWN,
    payload,
)
from tests.helpers.mrkdwn import shown
from tests.integration import test_service, test_slack_adapter
from tests.integration.test_service import Bot
from tests.integration.test_slack_adapter import Rig

bot = test_service.bot
rig = test_slack_adapter.rig


def _deliver(store: Any, service: Any) -> None:
    signals: list[Signal] = signals_from_payload(validate_payload(payload()), ["Hostname"])
    assert {s.node for s in signals} == {*LOOK_ALIKES, ABSENT, "gpu-a1"}
    fresh = store.add_signals(signals, datetime.now(UTC))
    service.process([s for s, new in zip(signals, fresh, strict=True) if new])


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_in_slack_look_alike_nodes_open_nothing_and_are_told_once_escaped(rig: Rig) -> None:
    _deliver(rig.store, rig.service)
    rig.settle()

    # Only the real node has an incident; the others open nothing.
    assert sorted(i.node or "" for i in rig.store.incidents()) == ["gpu-a1"]
    posted = [c.params for c in rig.double.calls_to("chat.postMessage")]
    diagnoses = [p for p in posted if p.get("blocks")]
    assert len(diagnoses) == 1 and "gpu-a1" in diagnoses[0]["text"]
    fields = "\n".join(shown(t).text for t in _strings(diagnoses[0]["blocks"]))
    assert "1 of 4 nodes in pool a100-east show this" in fields
    assert f"also firing: VendorDiskFull ({SAYS_SHOWN})" in fields

    # Nothing of a hidden character reaches the channel as itself, anywhere in any message.
    for params in posted:
        for text in _strings(params):
            assert not set(text) & set(HIDDEN), repr(text)
        assert "node(s) in the cluster show this" not in str(params)

    # One notice for the group names every node it does not have, escaped and marked.
    notices = [shown(p["text"]).text for p in posted if not p.get("blocks")]
    [notice] = [n for n in notices if ABSENT in n]
    for escaped in [*LOOK_ALIKES.values(), ABSENT]:
        assert f"no node {escaped} in the cluster" in notice, notice
    assert notice.count("no Kubernetes node can have this name") == len(LOOK_ALIKES)


def test_on_the_console_look_alike_nodes_open_nothing_and_are_shown_escaped(bot: Bot) -> None:
    _deliver(bot.store, bot.service)

    assert sorted(i.node or "" for i in bot.store.incidents()) == ["gpu-a1"]
    said = bot.said
    assert not set(said) & set(HIDDEN), [c for c in said if c in HIDDEN]
    assert said.count("GPU fell off the bus") == 1
    assert "1 of 4 nodes in pool a100-east show this" in said
    assert f"({SAYS_SHOWN})" in said
    assert "node(s) in the cluster show this" not in said
    flat = " ".join(said.split())
    for escaped in [*LOOK_ALIKES.values(), ABSENT]:
        assert f"no node {escaped} in the cluster" in flat, flat

    # Alertmanager sends the group again: nothing new is said.
    before = bot.said
    _deliver(bot.store, bot.service)
    assert bot.said == before


def test_a_look_alike_name_costs_no_request_to_the_api_server(bot: Bot) -> None:
    """A name no node can have is never looked for: no field selector is built of it (where
    `gpu-a1,status.phase=x` would be two), and it does not turn a pass about gpu-a1 into a
    read of the whole cluster. The API requests are those of a pass about gpu-a1 alone."""

    def requests_of(names: Sequence[str]) -> list[str]:
        signals = signals_from_payload(validate_payload(payload(names)), ["Hostname"])
        bot.store.add_signals(signals, datetime.now(UTC))
        before = len(bot.server.audit())
        bot.service.process(signals)
        return sorted(str(e) for e in bot.server.audit()[before:])

    requests_of(["gpu-a1"])  # the incident opened and its drain proposed: reads of their own
    alone = requests_of(["gpu-a1"])
    assert any("list pods" in r for r in alone)
    assert requests_of([*LOOK_ALIKES, "gpu-a1"]) == alone
