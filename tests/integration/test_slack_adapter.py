"""The Slack adapter end to end: the Slack Web API double, the simulated cluster through the
real kubernetes client, a real SqlStore, the real Service and Executor, and the interaction
endpoint served by uvicorn on 127.0.0.1 — clicks and slash commands signed exactly as Slack
signs them (`tests/helpers/slack_double.py`), never with verification switched off.

Outbox behaviour (outages, 429, restarts) is driven with `deliver_once(now)` and a fake clock
shared with the double, so no test sleeps through a Retry-After.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import socket
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import uvicorn
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from slack_bolt import BoltRequest
from starlette.applications import Starlette

from bot.approval.policy import approvals_needed, new_request
from bot.chat.blocks import APPROVE_ACTION, DENY_ACTION, SNOOZE_ACTION, TIMELINE_ACTION
from bot.chat.slack import (
    OutboxDelivery,
    SlackChat,
    SlackGroups,
    SlackInteractions,
    SocketModeRunner,
    build_slack_outgoing,
    build_slack_routes,
    slack_client,
)
from bot.config import (
    ActionPolicy,
    ApprovalPolicy,
    Remediation,
    Settings,
    SlackSettings,
    Thresholds,
)
from bot.errors import InputError
from bot.facts.snapshots import Snapshot
from bot.model import (
    Action,
    ActionRequest,
    ClusterFacts,
    Diagnosis,
    Incident,
    Lang,
    Outcome,
    TimelineEntry,
)
from bot.pipeline.service import Service
from bot.replica.http import server_config
from bot.roots.offline import diagnose_snapshot, load_ruleset
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from bot.store.sql import SqlStore
from gpusim import faults, objects
from gpusim.resources import BY_KIND
from tests.helpers.clocks import FakeClock
from tests.helpers.mrkdwn import shown
from tests.helpers.paths import NOW, REPO
from tests.helpers.rigs import build_service, nobody_looked
from tests.helpers.slack_double import (
    DEFAULT_TOKEN,
    SIGNING_SECRET,
    SlackDouble,
    form_body,
    interaction_body,
    post_signed,
    sign,
    signature,
)

CHANNEL = "C0GPUALERTS"
ALICE, BOB, CAROL, MALLORY = "U0ALICE", "U0BOB", "U0CAROL", "U0MALLORY"
ONCALL = ActionPolicy(groups=["gpu-oncall"])
POLICY = ApprovalPolicy(
    cordon=ONCALL,
    drain=ActionPolicy(groups=["gpu-oncall"], two_person=True),
    uncordon=ONCALL,
)
ZERO_GPUS = {
    "kind": "Node",
    "name": "gpu-a2",
    "merge": {
        "status": {"capacity": {"nvidia.com/gpu": "0"}, "allocatable": {"nvidia.com/gpu": "0"}}
    },
}


def _walk(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def _buttons(blocks: Any) -> set[tuple[str, str]]:
    return {
        (d["action_id"], d.get("value", "")) for d in _walk(blocks) if d.get("type") == "button"
    }


def _texts(blocks: Any) -> str:
    return "\n".join(d["text"] for d in _walk(blocks) if isinstance(d.get("text"), str))


def _wait(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what or condition}"
        time.sleep(0.02)


# ---- the running bot ------------------------------------------------------------------------


class Gate:
    """The Service as the adapter sees it, with a switch that holds approvals (to show the
    click is answered before the work is done), and one that answers a first vote as a
    policy asking `needed` people would (no policy in the config can ask three: this shows
    whose number the adapter prints)."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.store = service.store
        self.proposals = service.proposals
        self.facts = service.facts
        self.timeline = service.timeline
        self.hold: threading.Event | None = None
        self.needed: int | None = None

    def approve(self, request_id: str, approver: str) -> Outcome:
        if self.hold is not None:
            assert self.hold.wait(10)
        outcome = self.service.approve(request_id, approver)
        if self.needed is not None and outcome.status == "need-another":
            return dataclasses.replace(outcome, approvals_needed=self.needed)
        return outcome

    def deny(self, request_id: str, who: str, reason: str = "") -> Outcome:
        return self.service.deny(request_id, who, reason)


@dataclass
class Rig:
    double: SlackDouble
    sim: Any
    cluster: Any
    store: SqlStore
    service: Service
    gate: Gate
    chat: SlackChat
    delivery: OutboxDelivery
    interactions: SlackInteractions
    url: str

    def alert_xid79(self, node: str = "gpu-a2") -> tuple[Incident, ActionRequest]:
        result = faults.inject(self.sim.store, "xid", node, datetime.now(UTC), code=79, gpu=3)
        signals = signals_from_payload(validate_payload(result.payload()), ["node"])
        fresh = self.store.add_signals(signals, datetime.now(UTC))
        opened = self.service.process([s for s, new in zip(signals, fresh, strict=True) if new])
        [incident] = [i for i in opened if i.node == node]
        [drain] = [r for r in self.store.requests(incident.id) if r.action is Action.DRAIN]
        self.settle()
        return self.store.incident(incident.id), drain

    def settle(self) -> None:
        """Every acknowledged click handled and every queued message delivered."""
        for _ in range(3):
            assert self.interactions.wait_idle(10)
            _wait(lambda: self.store.outbox_pending() == 0, what="the outbox to empty")

    def message_of(self, key: str) -> dict[str, Any]:
        item = self.store.outbox_item(key)
        assert item is not None and item.status == "sent", item
        assert item.result is not None
        return self.double.message(CHANNEL, str(item.result["ts"]))

    def click(
        self,
        user: str,
        action_id: str,
        message: dict[str, Any],
        value: str | None = None,
        *,
        stale: bool = False,
    ) -> int:
        """`stale`: clicked on `message` as this copy shows it, though Slack updated it since."""
        payload = self.double.block_actions(
            CHANNEL, message["ts"], user, action_id, value, as_seen=message if stale else None
        )
        status, _, _ = post_signed(self.url, interaction_body(payload))
        return status

    def command(self, user: str, text: str) -> tuple[int, str]:
        fields = self.double.slash_command(text, user, CHANNEL)
        status, _, _ = post_signed(self.url, form_body(fields))
        return status, fields["response_url"]

    def node(self, name: str) -> dict[str, Any]:
        node: dict[str, Any] = self.cluster.get("Node", "", name)
        return node

    def ephemerals_to(self, user: str) -> list[str]:
        return [e.get("text", "") for e in self.double.ephemerals if e.get("user") == user]

    def thread(self, message: dict[str, Any]) -> list[str]:
        return [m["text"] for m in self.double.replies(CHANNEL, message["ts"])]


@pytest.fixture
def rig(sim_cluster: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Rig]:
    """In English, or in the language given as the fixture's indirect parameter."""
    sim, cluster = sim_cluster
    lang: Lang = getattr(request, "param", Lang.EN)
    # Proposals at once (not held for an alert): the buttons are what these tests click;
    # revisions at once (not one in 30 s): what a revision keeps is what some test looks at.
    settings = Settings(
        lang=lang,
        remediation=Remediation(approvals=POLICY),
        thresholds=Thresholds(settle_s=0, revise_every_s=0),
    )
    slack = SlackSettings(
        bot_token=DEFAULT_TOKEN,
        signing_secret=SIGNING_SECRET,
        channel=CHANNEL,
        api_url="http://unused/",
    )
    with SlackDouble(
        groups={"S0ONCALL": [ALICE, BOB]}, group_handles={"S0ONCALL": "gpu-oncall"}
    ) as double:
        slack = slack.model_copy(update={"api_url": double.url})
        store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
        client = slack_client(slack)
        delivery = OutboxDelivery(store, client, poll_s=0.05)
        chat = SlackChat(store, CHANNEL, settings.lang, on_queued=delivery.wake)
        groups = SlackGroups.for_policy(client, POLICY, ttl_s=60)

        service = build_service(
            cluster,
            store,
            settings,
            clock=FakeClock(real_time=True),
            chat=chat,
            groups_of=groups,
            progress_to_chat=True,  # as bot/roots/serve.py wires it
        )
        gate = Gate(service)
        interactions = SlackInteractions(gate, chat, slack, client=client, lang=settings.lang)
        delivery.start()
        try:
            with _served(interactions) as url:
                try:
                    yield Rig(
                        double,
                        sim,
                        cluster,
                        store,
                        service,
                        gate,
                        chat,
                        delivery,
                        interactions,
                        url,
                    )
                finally:
                    if gate.hold is not None:
                        gate.hold.set()
        finally:
            interactions.close()
            delivery.stop()
            store.close()


@contextmanager
def _served(interactions: SlackInteractions) -> Iterator[str]:
    """`POST /slack/events` of `interactions` served by uvicorn on 127.0.0.1, as `serve`
    serves it; yields its URL."""
    app = Starlette(routes=build_slack_routes(interactions))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    _wait(lambda: server.started, what="uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/slack/events"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# ---- approvals through buttons --------------------------------------------------------------


def test_two_allowed_approvals_drain_the_node_and_the_message_says_who(rig: Rig) -> None:
    incident, drain = rig.alert_xid79()
    assert incident.chat_ref == f"incident/{incident.id}/message"
    message = rig.message_of(incident.chat_ref)
    assert (APPROVE_ACTION, drain.id) in _buttons(message["blocks"])
    assert (TIMELINE_ACTION, incident.id) in _buttons(message["blocks"])

    assert rig.click(ALICE, APPROVE_ACTION, message, drain.id) == 200
    rig.settle()
    assert rig.sim.store.evictions == []
    assert any("Your approval is recorded" in t for t in rig.ephemerals_to(ALICE))
    assert "1 of 2 approvals: <@U0ALICE>; needs a second approver" in rig.thread(message)
    assert rig.double.calls_to("chat.update") == []

    assert rig.click(BOB, APPROVE_ACTION, message, drain.id) == 200
    rig.settle()
    assert ("ml", "train-llm-0-worker-1") in rig.sim.store.evictions
    assert rig.node("gpu-a2")["spec"].get("unschedulable") is True
    [update] = rig.double.calls_to("chat.update")
    assert update.params["ts"] == message["ts"] and update.params["channel"] == CHANNEL
    blocks = update.params["blocks"]
    assert (APPROVE_ACTION, drain.id) not in _buttons(blocks)
    assert (DENY_ACTION, drain.id) not in _buttons(blocks)
    assert "approved by <@U0ALICE> and <@U0BOB>" in _texts(blocks)
    assert (SNOOZE_ACTION, incident.id) in _buttons(blocks)  # the incident row stays
    thread = [shown(t).text for t in rig.thread(message)]  # as people read it
    started = next(i for i, t in enumerate(thread) if t.startswith("running `kubectl drain gpu-a2"))
    progress = [i for i, t in enumerate(thread) if t.startswith("evicted ")]
    done = next(i for i, t in enumerate(thread) if t.startswith("drained gpu-a2"))
    assert progress and started < min(progress) and max(progress) < done, thread
    assert thread[max(progress)] == "evicted 2/2", thread


def test_the_first_vote_note_counts_to_the_number_the_policy_asks_not_to_a_literal(
    rig: Rig,
) -> None:
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    assert approvals_needed(POLICY, drain) == 2
    rig.gate.needed = 3
    assert rig.click(ALICE, APPROVE_ACTION, message, drain.id) == 200
    rig.settle()
    thread = rig.thread(message)
    assert "1 of 3 approvals: <@U0ALICE>; needs 2 more approvers" in thread
    assert not any("of 2 approvals" in line for line in thread), thread
    assert rig.sim.store.evictions == []


def test_the_daily_digest_goes_out_in_a_code_block_so_its_columns_line_up(rig: Rig) -> None:
    incident, _ = rig.alert_xid79()
    before = len(rig.double.calls_to("chat.postMessage"))
    told = rig.service.post_digest()
    rig.settle()
    [digest] = rig.double.calls_to("chat.postMessage")[before:]
    text = str(digest.params["text"])
    assert text.startswith("```") and text.endswith("```"), text
    assert "1 opened" in text and f"{incident.rule}  █ 1" in text and told[0] in text


def test_a_stranger_is_told_who_may_approve_and_nothing_changes(rig: Rig) -> None:
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    assert rig.click(MALLORY, APPROVE_ACTION, message, drain.id) == 200
    rig.settle()
    [told] = rig.ephemerals_to(MALLORY)
    assert "you are not allowed to approve drain on gpu-a2 (needs: @gpu-oncall)" in told
    assert rig.store.votes(drain.id) == []
    assert rig.store.execution(drain.id) is None
    assert rig.sim.store.evictions == []
    assert rig.node("gpu-a2")["spec"].get("unschedulable") is None
    assert rig.double.calls_to("chat.update") == []


def test_the_click_is_answered_before_the_work_is_done(rig: Rig) -> None:
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    rig.gate.hold = threading.Event()
    started = time.monotonic()
    assert rig.click(ALICE, APPROVE_ACTION, message, drain.id) == 200
    assert time.monotonic() - started < 3.0
    assert rig.store.votes(drain.id) == []  # acknowledged, not yet decided
    rig.gate.hold.set()
    rig.settle()
    assert [v.approver for v in rig.store.votes(drain.id)] == [ALICE]


def test_bad_requests_get_401_or_400_and_change_nothing(rig: Rig) -> None:
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    timeline_before = rig.store.timeline(incident.id)
    calls_before = len(rig.double.calls)
    good = rig.double.block_actions(CHANNEL, message["ts"], ALICE, APPROVE_ACTION, drain.id)
    body = interaction_body(good)

    def post(body: str, **kwargs: Any) -> int:
        return post_signed(rig.url, body, **kwargs)[0]

    # forged: another secret, or a body changed after signing
    assert post(body, secret="not-the-signing-secret") == 401
    headers = sign(body)
    tampered_body = body.replace(ALICE, BOB)
    assert post(tampered_body, headers=headers) == 401
    # stale: signed correctly, six minutes ago
    assert post(body, timestamp=time.time() - 6 * 60) == 401
    # unknown action id, signed correctly
    unknown = json.loads(json.dumps(good))
    unknown["actions"][0]["action_id"] = "gpubot.nuke"
    assert post(interaction_body(unknown)) == 400
    # tampered button values: no such request; a shape no id has; another request's id
    # that is not on this message
    other = rig.service.wing.proposals.request(
        Action.CORDON, rig.service.wing.facts.of_node("gpu-a4").nodes["gpu-a4"], None, CAROL
    )
    for value in ("adhoc-drain-00000000", "../../etc/passwd", other.id):
        tampered = rig.double.block_actions(CHANNEL, message["ts"], ALICE, APPROVE_ACTION, value)
        assert post(interaction_body(tampered)) == 400, value
    bad_incident = rig.double.block_actions(CHANNEL, message["ts"], ALICE, SNOOZE_ACTION, "999")
    assert post(interaction_body(bad_incident)) == 400
    # malformed: signed garbage is 400, unsigned garbage 401; oversized 413
    assert post("payload=%7Bnot-json") == 400
    assert post_signed(rig.url, "payload=%7Bnot-json", secret="x")[0] == 401
    assert post("payload=" + "x" * 300_000) == 413

    rig.settle()
    assert rig.store.votes(drain.id) == []
    assert rig.store.votes(other.id) == []
    assert rig.sim.store.evictions == []
    assert rig.store.timeline(incident.id) == timeline_before
    assert len(rig.double.calls) == calls_before  # no Slack call at all

    # replayed: the very same signed request twice (a harmless timeline click)
    click = rig.double.block_actions(CHANNEL, message["ts"], ALICE, TIMELINE_ACTION, incident.id)
    signed_at = time.time()
    assert post(interaction_body(click), timestamp=signed_at) == 200
    rig.settle()
    answered = len(rig.double.calls)
    assert answered == calls_before + 1  # the ephemeral timeline
    assert post(interaction_body(click), timestamp=signed_at) == 401
    rig.settle()
    assert len(rig.double.calls) == answered


def _unchanged(rig: Rig, incident: Incident, drain: ActionRequest, calls_before: int) -> None:
    rig.settle()
    assert rig.store.votes(drain.id) == []
    assert rig.sim.store.evictions == []
    assert rig.store.timeline(incident.id)[-1].kind != "approval"
    assert len(rig.double.calls) == calls_before


def test_a_timestamp_that_is_not_unix_seconds_is_401_not_500(rig: Rig) -> None:
    """Finding 7: `X-Slack-Request-Timestamp: abc` was answered 500 (slack_sdk's verifier
    calls int() on it). Each of these is a 401 now, and changes nothing."""
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    calls_before = len(rig.double.calls)
    body = interaction_body(
        rig.double.block_actions(CHANNEL, message["ts"], ALICE, APPROVE_ACTION, drain.id)
    )
    for timestamp in ["abc", "", " 1", "1e9", "1.5", "-1", "²", "1²", "9" * 40, "0x10", "nan"]:
        headers = {**sign(body), "X-Slack-Request-Timestamp": timestamp}
        headers["X-Slack-Signature"] = signature(body, SIGNING_SECRET, timestamp)
        assert post_signed(rig.url, body, headers=headers)[0] == 401, repr(timestamp)
    _unchanged(rig, incident, drain, calls_before)


def test_a_forged_request_is_one_short_log_line_without_its_body(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 8: slack_bolt logged the full body of every forged request at INFO (20 forged
    240 KB requests added 4.8 MB of log). Now: one short line each, no body, no signature."""
    marker = "FORGED-BODY-MARKER"
    forged = "payload=" + (marker + "x" * 1000) * 240
    assert len(forged) > 240_000
    with caplog.at_level(logging.DEBUG):
        for _ in range(20):
            status, _, _ = post_signed(rig.url, forged, secret="not-the-signing-secret")
            assert status == 401
        garbled = {"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=" + "0" * 64}
        assert post_signed(rig.url, forged, headers=garbled)[0] == 401
    lines = [r for r in caplog.records if "Slack request" in r.getMessage()]
    assert len(lines) == 21
    assert all(len(r.getMessage()) < 200 for r in lines)
    assert marker not in caplog.text
    assert "v0=" not in caplog.text
    assert len(caplog.text) < 21 * 300, f"{len(caplog.text)} bytes of log for 21 forgeries"


def test_handling_a_click_leaves_gpubots_own_loggers_alone(rig: Rig) -> None:
    """bolt configures the logger named after its app at every request (level copied from
    its base logger, or the root's). Named "gpubot", it reset every gpubot logger's level:
    with a quiet base logger, the log lost every INFO line of gpubot's."""
    incident, _ = rig.alert_xid79()
    ours = logging.getLogger("gpubot")
    ours.setLevel(logging.NOTSET)
    message = rig.message_of(str(incident.chat_ref))
    assert rig.click(ALICE, TIMELINE_ACTION, message, incident.id) == 200
    rig.settle()
    assert ours.level == logging.NOTSET
    assert not ours.disabled


def test_a_slack_body_that_never_ends_is_cut_with_408(rig: Rig) -> None:
    """Finding 6, on Slack's route: a body that stops coming is answered 408 and its
    connection closed once the body deadline passes."""
    app = Starlette(routes=build_slack_routes(rig.interactions, body_timeout_s=0.5))
    server = uvicorn.Server(server_config(app, "127.0.0.1", 0, header_timeout_s=1.0))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    _wait(lambda: server.started, what="uvicorn to start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(
            b"POST /slack/events HTTP/1.1\r\nHost: gpubot\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\np"
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408 "), answer
    finally:
        server.should_exit = True
        thread.join(timeout=10)


JSON_TEXT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
).map(json.dumps)
SLACK_TIMESTAMPS = st.sampled_from(["now", "stale", "abc", "", "²", "1e9", "-5"]) | st.text(
    max_size=12
)
FORM_FIELDS = st.dictionaries(
    st.sampled_from(["payload", "command", "text", "user_id", "type", "token", "response_url"])
    | st.text(max_size=8),
    st.text(max_size=40) | JSON_TEXT,
    max_size=5,
)


def _click_shaped(action_id: str, value: str, user: str) -> str:
    return json.dumps(
        {
            "type": "block_actions",
            "user": {"id": user},
            "channel": {"id": CHANNEL},
            "message": {"ts": "1.2"},
            "actions": [{"action_id": action_id, "value": value}],
        }
    )


SLACK_BODIES = (
    st.binary(max_size=400)
    | FORM_FIELDS.map(lambda fields: urlencode(fields).encode())
    | st.builds(
        lambda action, value, user: urlencode(
            {"payload": _click_shaped(action, value, user)}
        ).encode(),
        st.sampled_from([APPROVE_ACTION, DENY_ACTION, SNOOZE_ACTION, TIMELINE_ACTION])
        | st.text(max_size=20),
        st.text(max_size=30),
        st.sampled_from([ALICE, MALLORY]) | st.text(max_size=10),
    )
)


def test_fuzz_the_slack_endpoint_is_never_a_5xx_and_keeps_answering(rig: Rig) -> None:
    """Random bodies (raw bytes included), timestamps and signatures at `/slack/events`,
    signed with the real secret or not: never a 5xx, no vote, and the endpoint still
    answers a genuine click afterwards."""
    incident, drain = rig.alert_xid79()
    codes: dict[int, int] = {}

    with httpx.Client(timeout=10) as client:

        @settings(
            max_examples=200,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(
            body=SLACK_BODIES,
            timestamp=SLACK_TIMESTAMPS,
            signed=st.booleans(),
            content_type=st.sampled_from(
                ["application/x-www-form-urlencoded", "application/json", "text/plain", ""]
            ),
        )
        def post(body: bytes, timestamp: str, signed: bool, content_type: str) -> None:
            if timestamp == "now":
                timestamp = str(int(time.time()))
            elif timestamp == "stale":
                timestamp = str(int(time.time()) - 600)
            headers = {  # as bytes: a timestamp may be any text, sent as its UTF-8
                "Content-Type": content_type.encode(),
                "X-Slack-Request-Timestamp": timestamp.encode(),
                "X-Slack-Signature": (
                    signature(body, SIGNING_SECRET, timestamp) if signed else "v0=" + "ab" * 32
                ).encode(),
            }
            try:
                response = client.post(rig.url, content=body, headers=headers)
            except httpx.LocalProtocolError:  # a header httpx itself will not send
                return
            codes[response.status_code] = codes.get(response.status_code, 0) + 1
            assert response.status_code < 500, (response.status_code, response.text, body)

        post()
    assert codes.get(401, 0) > 0 and codes.get(400, 0) + codes.get(200, 0) > 0, codes
    rig.settle()
    assert rig.store.votes(drain.id) == []
    assert rig.sim.store.evictions == []
    message = rig.message_of(str(incident.chat_ref))
    assert rig.click(ALICE, TIMELINE_ACTION, message, incident.id) == 200


def test_a_double_click_acts_once(rig: Rig) -> None:
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))

    def twice(user: str) -> list[int]:
        statuses: list[int] = []
        threads = [
            threading.Thread(
                target=lambda: statuses.append(rig.click(user, APPROVE_ACTION, message, drain.id))
            )
            for _ in range(2)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rig.settle()
        return statuses

    assert twice(ALICE) == [200, 200]
    assert [v.approver for v in rig.store.votes(drain.id)] == [ALICE]
    assert twice(BOB) == [200, 200]
    assert [v.approver for v in rig.store.votes(drain.id)] == [ALICE, BOB]
    assert rig.sim.store.evictions, "the drain ran"
    assert set(Counter(rig.sim.store.evictions).values()) == {1}, "no pod evicted twice"
    execution = rig.store.execution(drain.id)
    assert execution is not None and execution.outcome == "succeeded"
    assert len(rig.double.calls_to("chat.update")) == 1
    assert len(rig.ephemerals_to(BOB)) == 1  # the second click: "already ..."


def test_deny_replaces_the_buttons(rig: Rig) -> None:
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    assert rig.click(BOB, DENY_ACTION, message, drain.id) == 200
    rig.settle()
    [update] = rig.double.calls_to("chat.update")
    assert (APPROVE_ACTION, drain.id) not in _buttons(update.params["blocks"])
    assert "denied by <@U0BOB>" in _texts(update.params["blocks"])
    assert rig.sim.store.evictions == []


def test_a_message_revised_for_a_new_blocker_still_says_who_approved(rig: Rig) -> None:
    """After the drain, someone starts a pod by hand on the cordoned node: the message is
    revised to name it, and keeps saying who approved the drain."""
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    for who in (ALICE, BOB):
        assert rig.click(who, APPROVE_ACTION, message, drain.id) == 200
        rig.settle()
    assert rig.node("gpu-a2")["spec"].get("unschedulable") is True
    stray = objects.pod("debug-shell", "default", "gpu-a2", datetime.now(UTC), age=timedelta(0))
    rig.sim.store.create(BY_KIND["Pod"], "default", stray)
    rig.service.process([])
    rig.settle()
    last = rig.double.message(CHANNEL, message["ts"])
    text = _texts(last["blocks"])
    assert "default/debug-shell" in text
    assert "approved by <@U0ALICE> and <@U0BOB>" in text
    assert (SNOOZE_ACTION, incident.id) in _buttons(last["blocks"])
    assert any(
        t.startswith("updated: now in the drain's way: no-controller default/debug-shell")
        for t in rig.thread(message)
    ), rig.thread(message)


def test_a_drain_proposal_names_the_blocking_budget_however_many_other_blockers(
    rig: Rig,
) -> None:
    """Six pods started by hand (no controller, emptyDir data: twelve blockers, more than the
    message shows) and a budget that allows no disruption: the budget is what stalls a drain
    on 429s, so the message names it with its disruptionsAllowed."""
    for n in range(6):
        stray = objects.pod(f"scratch-{n}", "default", "gpu-a2", datetime.now(UTC), emptydir=True)
        rig.sim.store.create(BY_KIND["Pod"], "default", stray)
    faults.inject(rig.sim.store, "pdb-block", "gpu-a2", datetime.now(UTC))
    incident, _ = rig.alert_xid79()
    text = _texts(rig.message_of(str(incident.chat_ref))["blocks"])
    assert "PDB train-llm-0-pdb (disruptionsAllowed=0" in text
    assert "more in the timeline" in text  # the other blockers are not all shown


def test_a_pool_wide_failure_is_one_channel_message_with_each_node_in_its_thread(
    rig: Rig,
) -> None:
    for node in ("gpu-a1", "gpu-a2", "gpu-a3"):
        faults.inject(rig.sim.store, "zero-capacity", node, datetime.now(UTC))
    rig.service.process([])
    rig.settle()
    [pool] = [i for i in rig.store.incidents() if i.node is None and i.pool == "a100-east"]
    assert pool.rule == "pool-wide-failure"
    nodes = [i for i in rig.store.incidents() if i.node in ("gpu-a1", "gpu-a2", "gpu-a3")]
    assert len(nodes) == 3
    in_channel = [m for m in rig.double.messages(CHANNEL) if m.get("thread_ts") in (None, m["ts"])]
    assert len(in_channel) == 1
    [message] = in_channel
    assert message["ts"] == rig.message_of(str(pool.chat_ref))["ts"]
    replies = rig.double.replies(CHANNEL, message["ts"])
    for incident in nodes:
        posted = rig.message_of(str(incident.chat_ref))
        assert posted in replies  # the node's diagnosis, in the pool's thread
        assert incident.node is not None and incident.node in _texts(posted["blocks"])


def test_a_strangers_deny_is_told_who_may_and_the_oncall_still_approve(rig: Rig) -> None:
    """Issue 15: someone named in no policy clicked Deny on a drain, and the rightful
    approvers were then refused."""
    incident, drain = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    assert rig.click(MALLORY, DENY_ACTION, message, drain.id) == 200
    rig.settle()
    [told] = rig.ephemerals_to(MALLORY)
    assert "you are not allowed to deny drain on gpu-a2 (may deny it: @gpu-oncall)" in told
    assert rig.store.execution(drain.id) is None
    assert rig.double.calls_to("chat.update") == []  # the buttons stay

    for person in (ALICE, BOB):
        assert rig.click(person, APPROVE_ACTION, message, drain.id) == 200
        rig.settle()
    execution = rig.store.execution(drain.id)
    assert execution is not None and execution.outcome == "succeeded", execution
    assert rig.node("gpu-a2")["spec"].get("unschedulable") is True


def test_a_superseded_incidents_buttons_are_replaced_and_a_late_click_changes_nothing(
    rig: Rig,
) -> None:
    """The GPU is seen missing first (a cordon proposed), the Xid 79 alert a moment later
    (a drain): the early message loses its buttons, and Alice clicking it anyway is told why
    in private while the node stays schedulable."""
    result = faults.inject(rig.sim.store, "xid", "gpu-a2", datetime.now(UTC), code=79, gpu=3)
    alert = signals_from_payload(validate_payload(result.payload()), ["node"])
    [early] = [i for i in rig.service.process([]) if i.node == "gpu-a2"]
    [cordon] = [r for r in rig.store.requests(early.id) if r.action is Action.CORDON]
    rig.settle()
    message = rig.message_of(str(rig.store.incident(early.id).chat_ref))
    assert (APPROVE_ACTION, cordon.id) in _buttons(message["blocks"])

    rig.store.add_signals(alert, datetime.now(UTC))
    [right] = [i for i in rig.service.process(alert) if i.node == "gpu-a2"]
    rig.settle()
    assert right.rule == "gpu-fell-off-bus" and right.id == early.id  # one incident
    updates = [u for u in rig.double.calls_to("chat.update") if u.params["ts"] == message["ts"]]
    assert updates and all(
        (APPROVE_ACTION, cordon.id) not in _buttons(u.params["blocks"]) for u in updates
    )
    assert any("withdrawn" in _texts(u.params["blocks"]) for u in updates)
    [drain] = [r for r in rig.store.requests(right.id) if r.action is Action.DRAIN]
    assert (APPROVE_ACTION, drain.id) in _buttons(updates[-1].params["blocks"])
    assert any("a better diagnosis of the same problem" in t for t in rig.thread(message))

    assert rig.click(ALICE, APPROVE_ACTION, message, cordon.id, stale=True) == 200
    rig.settle()
    [told] = rig.ephemerals_to(ALICE)
    assert "this request is no longer valid" in told and f"incident {right.id}" in told
    assert rig.store.votes(cordon.id) == []
    assert rig.node("gpu-a2")["spec"].get("unschedulable") is None


# ---- the slash command ----------------------------------------------------------------------


def test_slash_cordon_is_proposed_and_needs_someone_else(rig: Rig) -> None:
    status, _ = rig.command(ALICE, "cordon gpu-a3")
    assert status == 200
    rig.settle()
    [proposal] = [
        m
        for m in rig.double.messages(CHANNEL)
        if any(a == APPROVE_ACTION for a, _ in _buttons(m.get("blocks", [])))
    ]
    [request_id] = [v for a, v in _buttons(proposal["blocks"]) if a == APPROVE_ACTION]
    request = rig.store.request(request_id)
    assert request.action is Action.CORDON and request.requested_by == ALICE
    assert rig.message_of(f"request/{request.id}/message") == proposal
    assert any("Proposed *cordon gpu-a3*" in t for t in rig.ephemerals_to(ALICE))

    assert rig.click(ALICE, APPROVE_ACTION, proposal, request.id) == 200
    rig.settle()
    assert any("you asked for cordon on gpu-a3" in t for t in rig.ephemerals_to(ALICE))
    assert rig.node("gpu-a3")["spec"].get("unschedulable") is None

    assert rig.click(BOB, APPROVE_ACTION, proposal, request.id) == 200
    rig.settle()
    assert rig.node("gpu-a3")["spec"].get("unschedulable") is True
    [update] = rig.double.calls_to("chat.update")
    assert update.params["ts"] == proposal["ts"]
    assert (APPROVE_ACTION, request.id) not in _buttons(update.params["blocks"])
    assert "approved by <@U0BOB>" in _texts(update.params["blocks"])


def test_a_slash_drain_with_no_incident_tells_its_result_under_its_proposal(rig: Rig) -> None:
    """Finding 11: `/gpubot drain NODE` with no incident drained the node and told no one:
    the result was only in the executions table. It now comes in the thread of the proposal,
    in the channel where the request was made."""
    assert rig.command(CAROL, "drain gpu-a3")[0] == 200
    rig.settle()
    [proposal] = rig.double.messages(CHANNEL)
    [request_id] = [v for a, v in _buttons(proposal["blocks"]) if a == APPROVE_ACTION]
    assert rig.store.request(request_id).incident is None
    assert rig.click(ALICE, APPROVE_ACTION, proposal, request_id) == 200
    rig.settle()
    assert rig.click(BOB, APPROVE_ACTION, proposal, request_id) == 200
    rig.settle()
    assert rig.node("gpu-a3")["spec"].get("unschedulable") is True
    told = rig.thread(proposal)
    assert any(line.startswith("drained gpu-a3") for line in told), told
    tops = [m["ts"] for m in rig.double.messages(CHANNEL) if m.get("thread_ts") in (None, m["ts"])]
    assert tops == [proposal["ts"]]  # in its thread, not a message of its own


@contextmanager
def _another_replica(rig: Rig, store: SqlStore, executor_id: str) -> Iterator[str]:
    """Another `gpubot serve` behind the same Slack app: its own `Service`, chat and
    `SlackInteractions` on `store` (the rig's, or the same database opened again, as a
    restarted replica opens it), at its own URL, and not the leader (the rig's delivery sends
    what it queues). Yields its URL; every interaction it acknowledged is handled on exit."""
    chat = SlackChat(store, CHANNEL, rig.interactions.lang, on_queued=rig.delivery.wake)
    service = build_service(
        rig.cluster,
        store,
        rig.service.settings,
        clock=FakeClock(real_time=True),
        chat=chat,
        groups_of=SlackGroups.for_policy(rig.interactions.client, POLICY, ttl_s=60),
        is_leader=lambda: False,
        executor_id=executor_id,
    )
    interactions = SlackInteractions(
        service,
        chat,
        rig.interactions.settings,
        client=rig.interactions.client,
        lang=rig.interactions.lang,
    )
    try:
        with _served(interactions) as url:
            yield url
            assert interactions.wait_idle(10)
    finally:
        interactions.close()


def _proposed(rig: Rig) -> list[tuple[Action, str]]:
    """What the channel puts before people: each request with an approve button, once."""
    ids = {
        value
        for message in rig.double.messages(CHANNEL)
        for action_id, value in _buttons(message.get("blocks", []))
        if action_id == APPROVE_ACTION
    }
    return sorted((rig.store.request(i).action, rig.store.request(i).node) for i in ids)


def _lower(headers: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def test_a_slash_command_replayed_to_another_replica_makes_no_second_request(rig: Rig) -> None:
    """Issue 31, item 7: the same signed `/gpubot drain gpu-a2` sent to a second replica
    within the 5 minutes made a second request (each replica remembered only the signatures
    it had seen itself). Slack signs `v0:timestamp:body` and asks apps to refuse a timestamp
    more than 5 minutes away ("Verifying requests from Slack"): within those minutes the same
    signature twice is a replay, whichever replica it reaches, and the store remembers it.

    Slack never sends a slash command or a click twice: only Events API deliveries are
    retried, marked `X-Slack-Retry-Num` (gpubot subscribes to no event). That header is not
    signed, so a copy that carries it is a replay like any other: refused, and told with
    `X-Slack-No-Retry: 1` that sending it again cannot help. A replayed click is refused the
    same way, before its once-only vote is even asked."""
    body = form_body(rig.double.slash_command("drain gpu-a2", CAROL, CHANNEL))
    signed_at = time.time()
    as_retried = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    replays: list[tuple[int, str | None]] = []
    with _another_replica(rig, rig.store, "replica-b") as other:
        assert post_signed(rig.url, body, timestamp=signed_at)[0] == 200
        rig.settle()
        [proposal] = rig.double.messages(CHANNEL)
        [request_id] = [v for a, v in _buttons(proposal["blocks"]) if a == APPROVE_ACTION]
        for url, headers in ((other, {}), (other, as_retried), (rig.url, {})):
            status, answer, _ = post_signed(url, body, timestamp=signed_at, headers=headers)
            replays.append((status, _lower(answer).get("x-slack-no-retry")))
        rig.settle()

        click = rig.double.block_actions(CHANNEL, proposal["ts"], ALICE, APPROVE_ACTION, request_id)
        assert post_signed(rig.url, interaction_body(click), timestamp=signed_at)[0] == 200
        rig.settle()
        calls = len(rig.double.calls)
        status, answer, _ = post_signed(other, interaction_body(click), timestamp=signed_at)
        replays.append((status, _lower(answer).get("x-slack-no-retry")))
    rig.settle()
    assert _proposed(rig) == [(Action.DRAIN, "gpu-a2")]  # one request, however often sent
    assert [e for e in rig.ephemerals_to(CAROL) if "Proposed *drain gpu-a2*" in e] != []
    assert [v.approver for v in rig.store.votes(request_id)] == [ALICE]
    assert len(rig.double.calls) == calls  # nothing said to anyone for a replay
    assert rig.node("gpu-a2")["spec"].get("unschedulable") is None
    assert replays == [(401, "1")] * 4


def test_a_restarted_replica_still_refuses_a_command_it_took_before(
    rig: Rig, tmp_path: Path
) -> None:
    """Issue 31, item 7: what a replica has taken is in the store, not in its memory, so a
    replica restarted within the replay window refuses the same signed command."""
    body = form_body(rig.double.slash_command("cordon gpu-a3", CAROL, CHANNEL))
    signed_at = time.time()
    assert post_signed(rig.url, body, timestamp=signed_at)[0] == 200
    rig.settle()
    calls = len(rig.double.calls)
    reopened = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    try:
        with _another_replica(rig, reopened, "replica") as restarted:
            status = post_signed(restarted, body, timestamp=signed_at)[0]
    finally:
        reopened.close()
    rig.settle()
    assert _proposed(rig) == [(Action.CORDON, "gpu-a3")]
    assert len(rig.double.calls) == calls
    assert status == 401


def test_a_command_the_store_cannot_note_is_503_and_the_same_one_is_taken_after(
    rig: Rig, tmp_path: Path
) -> None:
    """The replay check writes to the store before the ack: while the store cannot be
    written it cannot tell a first copy from a replay, so it refuses (503, as a click meets
    a store that is down) and remembers nothing; the same signed command, once the store is
    back, is taken."""
    body = form_body(rig.double.slash_command("cordon gpu-a3", CAROL, CHANNEL))
    signed_at = time.time()
    impatient = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}", lock_timeout_s=0.5)
    try:
        with _another_replica(rig, impatient, "replica-b") as other:
            lock = sqlite3.connect(tmp_path / "gpubot.db")
            try:
                lock.execute("BEGIN EXCLUSIVE")
                locked = post_signed(other, body, timestamp=signed_at)[0]
            finally:
                lock.rollback()
                lock.close()
            assert _proposed(rig) == []
            taken = post_signed(other, body, timestamp=signed_at)[0]
    finally:
        impatient.close()
    rig.settle()
    assert (locked, taken) == (503, 200)
    assert _proposed(rig) == [(Action.CORDON, "gpu-a3")]


def test_a_node_that_changed_is_asked_again_with_new_buttons(rig: Rig) -> None:
    assert rig.command(CAROL, "cordon gpu-a3")[0] == 200
    rig.settle()
    [proposal] = rig.double.messages(CHANNEL)
    [first] = [v for a, v in _buttons(proposal["blocks"]) if a == APPROVE_ACTION]
    rig.cluster.patch_node("gpu-a3", {"spec": {"unschedulable": True}})  # by hand, meanwhile
    assert rig.click(BOB, APPROVE_ACTION, proposal, first) == 200
    rig.settle()
    again, second = _asked_again(rig, first)
    assert rig.store.execution(first) is not None  # settled: never runs
    assert rig.click(ALICE, APPROVE_ACTION, again, second) == 200
    rig.settle()
    assert rig.store.execution(second) is not None
    assert rig.double.calls_to("chat.update")[-1].params["ts"] == again["ts"]


def test_an_approval_run_later_by_the_leader_on_a_changed_node_gets_new_buttons(
    rig: Rig,
) -> None:
    """Bob approved on a follower (recorded, not run); by the time the leader's duties ran it,
    someone had cordoned gpu-a3 by hand. The new request needs buttons of its own, not only
    a line naming it."""
    assert rig.command(CAROL, "cordon gpu-a3")[0] == 200
    rig.settle()
    [proposal] = rig.double.messages(CHANNEL)
    [first] = [v for a, v in _buttons(proposal["blocks"]) if a == APPROVE_ACTION]
    assert rig.service.wing.approve(first, BOB, execute=False).status == "approved"
    rig.cluster.patch_node("gpu-a3", {"spec": {"unschedulable": True}})
    [outcome] = rig.service.run_leader_duties()
    assert outcome.status == "changed", outcome.message
    rig.settle()
    _asked_again(rig, first)


def _asked_again(rig: Rig, first: str) -> tuple[dict[str, Any], str]:
    """gpu-a3 changed after `first` was approved: its buttons gave way to why it will not
    run, and a new request came with buttons of its own. The new message and request id."""
    [update] = rig.double.calls_to("chat.update")
    assert (APPROVE_ACTION, first) not in _buttons(update.params["blocks"])
    assert "↻ not run: gpu-a3 changed since the approval" in _texts(update.params["blocks"])
    [again] = rig.double.messages(CHANNEL)[1:]
    [second] = [v for a, v in _buttons(again["blocks"]) if a == APPROVE_ACTION]
    assert second != first and rig.store.request(second).node == "gpu-a3"
    return again, second


def test_slash_answers_are_ephemeral_and_an_unknown_subcommand_gets_help(rig: Rig) -> None:
    incident, _ = rig.alert_xid79()
    answers: dict[str, str] = {}
    for text in ("status", "status gpu-a2", "incidents", f"timeline {incident.id}", "frobnicate"):
        status, url = rig.command(CAROL, text)
        assert status == 200, text
        rig.settle()
        [posted] = rig.double.response_posts(url)
        assert posted["response_type"] == "ephemeral", text
        answers[text] = posted["text"] + _texts(posted.get("blocks", []))
    assert "1 open incident(s): 1 awaiting approval" in answers["status"]
    assert "gpu-a2" in answers["status gpu-a2"] and "GPUs 7/8" in answers["status gpu-a2"]
    assert f"• {incident.id} · gpu-a2 · `gpu-fell-off-bus`" in answers["incidents"]
    assert f"Timeline of incident {incident.id}" in answers[f"timeline {incident.id}"]
    assert "Unknown subcommand `frobnicate`" in answers["frobnicate"]
    assert "`cordon NODE`" in answers["frobnicate"]
    assert rig.store.requests_to_execute(datetime.now(UTC)) == []


@pytest.mark.parametrize("rig", [Lang.ZH], indirect=True)
def test_slash_status_incidents_and_timeline_read_in_chinese_under_zh(rig: Rig) -> None:
    """Under zh, `/gpubot status` showed incident states as codes (`awaiting_approval`), the
    health gate's failing items in English, and the timeline its kinds as codes."""
    incident, _ = rig.alert_xid79()
    answers: dict[str, str] = {}
    for text in ("status", "status gpu-a2", "incidents", f"timeline {incident.id}"):
        status, url = rig.command(CAROL, text)
        assert status == 200, text
        rig.settle()
        [posted] = rig.double.response_posts(url)
        answers[text] = shown(posted["text"] + "\n" + _texts(posted.get("blocks", []))).text
    assert "1 个未解决的事件：1 等待审批" in answers["status"], answers["status"]
    node = answers["status gpu-a2"]
    gate = "健康门禁：GPU 可分配：可分配 GPU 7/8；GPU 错误告警：GPU 3 上的 Xid 79 错误"
    assert gate in node, node
    assert "gpu-fell-off-bus 等待审批：" in node, node
    assert "· 等待审批 ·" in answers["incidents"], answers["incidents"]
    timeline = answers[f"timeline {incident.id}"]
    assert "gpu-fell-off-bus · 等待审批" in timeline and " 诊断 " in timeline, timeline
    for answer in answers.values():
        assert not re.search(r"awaiting|Health gate|gpus-allocatable| diagnosis ", answer), answer


@pytest.mark.parametrize("rig", [Lang.ZH], indirect=True)
def test_a_slash_proposal_and_its_denial_read_in_chinese_under_zh(rig: Rig) -> None:
    """Under zh the proposal said "… asks to *cordon gpu-a3*", its notification
    "cordon gpu-a3: needs an approver", and a denial's reason "denied in Slack"."""
    incident, _ = rig.alert_xid79("gpu-a3")
    assert rig.command(CAROL, "cordon gpu-a3")[0] == 200
    rig.settle()
    [proposal] = [m for m in rig.double.messages(CHANNEL) if "🛠" in _texts(m.get("blocks", []))]
    assert proposal["text"] == "cordon gpu-a3：需要审批人"
    intro = shown(_texts(proposal["blocks"])).text
    assert f"🛠 @{CAROL} 请求 cordon gpu-a3（事件 {incident.id}：" in intro, intro
    [request_id] = [v for a, v in _buttons(proposal["blocks"]) if a == APPROVE_ACTION]
    assert rig.click(ALICE, DENY_ACTION, proposal, request_id) == 200
    rig.settle()
    denial = [e.text for e in rig.store.timeline(incident.id) if e.kind == "denial"]
    assert denial and denial[-1].endswith("：在 Slack 中拒绝"), denial


def test_snooze_mutes_the_thread_and_the_timeline_fits_block_kit(rig: Rig) -> None:
    incident, _ = rig.alert_xid79()
    message = rig.message_of(str(incident.chat_ref))
    before = len(rig.thread(message))
    assert rig.click(BOB, SNOOZE_ACTION, message, incident.id) == 200
    rig.settle()
    assert any(t.startswith("Snoozed incident") for t in rig.ephemerals_to(BOB))
    assert "snoozed by U0BOB" in rig.store.timeline(incident.id)[-1].text
    rig.chat.post_thread(rig.store.incident(incident.id), "evicted 37/110")
    rig.settle()
    assert len(rig.thread(message)) == before

    for n in range(400):
        rig.store.append(
            TimelineEntry(
                incident=incident.id,
                at=datetime.now(UTC),
                actor="gpubot",
                kind="note",
                text=f"line {n} " + "é" * 600,
            )
        )
    assert rig.click(BOB, TIMELINE_ACTION, message, incident.id) == 200
    rig.settle()
    [answer] = [c for c in rig.double.calls_to("response_url") if c.params.get("blocks")][-1:]
    assert answer.ok, answer.answer  # the double validates blocks as Slack does
    blocks = answer.params["blocks"]
    assert len(blocks) <= 50
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks)
    assert "earlier entries" in _texts(blocks) and "line 399" in _texts(blocks)


# ---- delivery: outages, 429, restarts -------------------------------------------------------


@pytest.fixture
def capacity_zero(
    settings: Settings,
    edited: Callable[..., Snapshot],
    facts_of: Callable[..., ClusterFacts],
) -> tuple[Diagnosis, ClusterFacts]:
    snapshot = edited(ZERO_GPUS)
    result = diagnose_snapshot(snapshot, [], load_ruleset(settings), settings, NOW)
    [diagnosis] = [d for d in result.diagnoses if d.rule == "gpu-capacity-zero"]
    return diagnosis, facts_of(snapshot)


@dataclass
class Quiet:
    """The outbox side alone: no worker thread, time moved by hand."""

    clock: FakeClock
    double: SlackDouble
    store: SqlStore
    chat: SlackChat
    path: Path

    def delivery(self) -> OutboxDelivery:
        client = slack_client(SlackSettings(bot_token=self.double.token, api_url=self.double.url))
        return OutboxDelivery(self.store, client, clock=self.clock)


@pytest.fixture
def quiet(tmp_path: Path) -> Iterator[Quiet]:
    clock = FakeClock(NOW)
    with SlackDouble(clock=clock.time, channels={CHANNEL: "gpu-alerts"}) as double:
        path = tmp_path / "gpubot.db"
        store = SqlStore.open(f"sqlite:///{path}")
        chat = SlackChat(store, CHANNEL, clock=clock)
        quiet = Quiet(clock, double, store, chat, path)
        yield quiet
        quiet.store.close()


def _incident(
    store: SqlStore, diagnosis: Diagnosis, facts: ClusterFacts, node: str
) -> tuple[Incident, ActionRequest]:
    d = diagnosis.model_copy(update={"node": node})
    incident = store.record_diagnosis("test", d, NOW, 3600).incident
    request = new_request(
        f"{incident.id}-cordon",
        Action.CORDON,
        facts.nodes[node],
        "gpubot",
        NOW,
        POLICY,
        incident=incident.id,
    )
    return incident, request


def test_after_an_outage_every_message_arrives_in_order(
    quiet: Quiet, capacity_zero: tuple[Diagnosis, ClusterFacts]
) -> None:
    diagnosis, facts = capacity_zero
    chat, clock = quiet.chat, quiet.clock
    quiet.double.outage(120)
    plan = []
    for node in ("gpu-a1", "gpu-a2"):
        incident, request = _incident(quiet.store, diagnosis, facts, node)
        ref = chat.post_diagnosis(incident, diagnosis, [request])
        incident = incident.model_copy(update={"chat_ref": ref})
        for n in range(3):
            chat.post_thread(incident, f"{node} line {n}")
        chat.update_decision(incident, request, f"✅ cordon {node} approved by <@U0BOB>")
        chat.post_thread(incident, f"{node} after the decision")
        plan.append((incident, request))
    chat.post_notice("a notice")

    delivery = quiet.delivery()
    while clock.time() < NOW.timestamp() + 120:
        delivery.deliver_once(clock())
        clock.advance(5)
    attempts_during = len(quiet.double.calls)
    assert quiet.double.messages() == []
    assert 1 <= attempts_during <= 12, "backoff, not one call per message per round"
    assert quiet.store.outbox_pending() == 2 * 6 + 1

    for _ in range(100):
        if quiet.store.outbox_pending() == 0:
            break
        delivery.deliver_once(clock())
        clock.advance(5)
    assert quiet.store.outbox_pending() == 0
    messages = quiet.double.messages(CHANNEL)
    tops = [m for m in messages if "thread_ts" not in m or m["thread_ts"] == m["ts"]]
    assert [m["text"] for m in tops if "blocks" not in m] == ["a notice"]
    for incident, request in plan:
        node = request.node
        [top] = [m for m in tops if (SNOOZE_ACTION, incident.id) in _buttons(m.get("blocks", []))]
        replies = [m["text"] for m in quiet.double.replies(CHANNEL, top["ts"])]
        lines = [f"{node} line {n}" for n in range(3)]
        assert replies == [*lines, f"{node} after the decision"]
        versions = quiet.double.history(CHANNEL, top["ts"])
        assert len(versions) == 2  # posted, then updated once
        assert (APPROVE_ACTION, request.id) in _buttons(versions[0]["blocks"])
        assert (APPROVE_ACTION, request.id) not in _buttons(versions[1]["blocks"])
        assert f"cordon {node} approved by <@U0BOB>" in _texts(versions[1]["blocks"])
    sent = [c for c in quiet.double.calls if c.ok]
    assert len(sent) == 2 * 6 + 1  # each once


def test_429_waits_for_retry_after(quiet: Quiet) -> None:
    quiet.chat.post_notice("first")
    quiet.chat.post_notice("second")
    quiet.double.fail(status=429, retry_after=30, times=1)
    delivery = quiet.delivery()
    t0 = quiet.clock.time()
    assert delivery.deliver_once(quiet.clock()) == 0
    [limited] = quiet.double.calls
    assert limited.status == 429
    [waiting] = quiet.store.outbox_due(quiet.clock() + timedelta(days=1))
    assert waiting.next_attempt_at == datetime.fromtimestamp(t0 + 30, UTC)
    quiet.clock.now = datetime.fromtimestamp(t0 + 29, UTC)
    assert delivery.deliver_once(quiet.clock()) == 0
    assert len(quiet.double.calls) == 1, "nothing before Retry-After"
    quiet.clock.now = datetime.fromtimestamp(t0 + 30, UTC)
    assert delivery.deliver_once(quiet.clock()) == 2
    retried = quiet.double.calls[1]
    assert retried.ok and retried.at - limited.at >= 30
    assert [m["text"] for m in quiet.double.messages(CHANNEL)] == ["first", "second"]


def test_a_restart_delivers_what_was_pending_once(
    quiet: Quiet, capacity_zero: tuple[Diagnosis, ClusterFacts]
) -> None:
    diagnosis, facts = capacity_zero
    incident, _ = _incident(quiet.store, diagnosis, facts, "gpu-a2")
    ref = quiet.chat.post_diagnosis(incident, diagnosis, [])
    incident = incident.model_copy(update={"chat_ref": ref})
    assert quiet.delivery().deliver_once(quiet.clock()) == 1
    quiet.chat.post_thread(incident, "queued before the crash 1")
    quiet.chat.post_thread(incident, "queued before the crash 2")
    quiet.store.close()  # the process dies with two messages in the outbox

    quiet.store = SqlStore.open(f"sqlite:///{quiet.path}")
    assert quiet.store.outbox_pending() == 2
    assert quiet.delivery().deliver_once(quiet.clock()) == 2
    assert quiet.delivery().deliver_once(quiet.clock()) == 0  # and a third process
    [top] = quiet.double.messages(CHANNEL)[:1]
    assert [m["text"] for m in quiet.double.replies(CHANNEL, top["ts"])] == [
        "queued before the crash 1",
        "queued before the crash 2",
    ]
    assert len(quiet.double.calls_to("chat.postMessage")) == 3


def test_a_permanent_error_is_given_up_and_the_rest_goes_on(quiet: Quiet) -> None:
    SlackChat(quiet.store, "C0NOWHERE", clock=quiet.clock).post_notice("lost")
    quiet.chat.post_notice("kept")
    assert quiet.delivery().deliver_once(quiet.clock()) == 1
    failed = [c for c in quiet.double.calls if not c.ok]
    assert [c.error for c in failed] == ["channel_not_found"]
    assert [m["text"] for m in quiet.double.messages(CHANNEL)] == ["kept"]
    assert quiet.store.outbox_pending() == 0


# ---- user groups ----------------------------------------------------------------------------


def test_groups_of_knows_ids_and_handles_and_caches_for_a_minute() -> None:
    clock = FakeClock(NOW)
    with SlackDouble(
        groups={"S0ONCALL": [ALICE, BOB], "S0SRE": [CAROL]},
        group_handles={"S0ONCALL": "gpu-oncall", "S0SRE": "sre"},
    ) as double:
        client = slack_client(SlackSettings(bot_token=double.token, api_url=double.url))
        groups = SlackGroups(client, ["@gpu-oncall", "S0SRE", "nobody"], ttl_s=60, clock=clock.time)
        assert groups(ALICE) == {"S0ONCALL", "gpu-oncall"}
        assert groups(CAROL) == {"S0SRE", "sre"}
        assert groups(MALLORY) == set()
        calls = len(double.calls)
        assert [c.method for c in double.calls] == ["usergroups.list"] + [
            "usergroups.users.list"
        ] * 2
        clock.advance(30)
        double.set_group("S0ONCALL", [BOB])
        assert groups(ALICE) == {"S0ONCALL", "gpu-oncall"}  # cached
        assert len(double.calls) == calls
        clock.advance(31)
        assert groups(ALICE) == set()  # refreshed: she left the group
        double.outage(10_000)
        clock.advance(61)
        assert groups(BOB) == {"S0ONCALL", "gpu-oncall"}  # Slack down: the last answer
        clock.advance(601)
        assert groups(BOB) == set()  # too old to trust


# ---- composition --------------------------------------------------------------------------


def test_the_outgoing_parts_wire_together_and_socket_mode_keeps_http_shut(
    sim_cluster: Any, tmp_path: Path
) -> None:
    with SlackDouble() as double:
        store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
        settings = SlackSettings(
            mode="socket", bot_token=double.token, app_token="xapp-test", api_url=double.url
        )
        with pytest.raises(InputError, match=r"slack\.channel"):
            build_slack_outgoing(settings, store, POLICY, Lang.EN)
        settings = settings.model_copy(update={"channel": CHANNEL})
        parts = build_slack_outgoing(settings, store, POLICY, Lang.EN)
        assert parts.groups.names == ["gpu-oncall"]
        parts.chat.post_notice("hello")
        assert parts.delivery.deliver_once() == 1
        assert [m["text"] for m in double.messages(CHANNEL)] == ["hello"]

        service = build_service(
            sim_cluster[1],
            store,
            Settings(),
            clock=FakeClock(NOW),
            chat=parts.chat,
            executor_id="x",
            external=nobody_looked,
        )
        interactions = SlackInteractions(service, parts.chat, settings, client=parts.client)
        runner = SocketModeRunner(interactions, "xapp-test")  # not connected: no websocket here
        assert runner.handler.app is interactions.app
        with pytest.raises(InputError, match="signing_secret"):
            SlackInteractions(
                service,
                parts.chat,
                settings.model_copy(update={"mode": "http"}),
                client=parts.client,
            )
        # A request that reaches a Socket Mode app over HTTP is refused, however it is signed.
        body = form_body(double.slash_command("help", ALICE, CHANNEL))
        headers: dict[str, str | Sequence[str]] = dict(sign(body))
        answer = interactions.app.dispatch(BoltRequest(body=body, headers=headers))
        assert answer.status == 401
        interactions.close()
        store.close()


# ---- the app manifest -----------------------------------------------------------------------


def test_the_manifest_parses_and_has_what_the_adapter_needs() -> None:
    manifest = yaml.safe_load((REPO / "deploy" / "slack" / "manifest.yaml").read_text())
    assert manifest["display_information"]["name"]
    assert manifest["features"]["bot_user"]["display_name"]
    [command] = manifest["features"]["slash_commands"]
    assert command["command"] == "/gpubot"
    assert command["url"] == "https://gpubot.example.com/slack/events"
    assert command["should_escape"] is False
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    assert {"chat:write", "commands", "usergroups:read"} <= scopes
    settings = manifest["settings"]
    assert settings["interactivity"] == {
        "is_enabled": True,
        "request_url": "https://gpubot.example.com/slack/events",
    }
    assert isinstance(settings["socket_mode_enabled"], bool)
    assert settings["token_rotation_enabled"] is False
