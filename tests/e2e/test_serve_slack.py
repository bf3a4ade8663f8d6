"""`gpubot serve` with Slack configured: the composition, not the adapter (which
tests/test_slack_adapter.py covers). One replica on the simulated cluster, the Slack Web API
double, and the real HTTP endpoints: Alertmanager's webhook in, the diagnosis out through
the outbox (sent because this replica leads), a signed click on `/slack/events` of the same
server, and the node drained on the simulator."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.chat.blocks import APPROVE_ACTION
from bot.config import Settings
from bot.errors import InputError
from bot.roots import serve as runtime
from gpusim import faults
from gpusim.resources import BY_KIND
from tests.helpers.builders import webhook_alert, webhook_payload
from tests.helpers.slack_double import (
    DEFAULT_TOKEN,
    SIGNING_SECRET,
    SlackDouble,
    interaction_body,
    post_signed,
)

CHANNEL = "C0GPUALERTS"
TOKEN = "webhook-token"
NODE = "gpu-a2"
ALICE, MALLORY = "U0ALICE", "U0MALLORY"


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def settings(tmp_path: Path, slack_url: str, **slack: Any) -> Settings:
    alice = {"users": [ALICE], "two_person": False}
    return Settings.model_validate(
        {
            "store_url": f"sqlite:///{tmp_path / 'gpubot.db'}",
            "remediation": {"approvals": {"cordon": alice, "drain": alice, "uncordon": alice}},
            "schedule": {"leader_duties_s": 0.5},
            "serve": {
                "host": "127.0.0.1",
                "port": 0,
                "bearer_token": TOKEN,
                "lease_duration_s": 3,
                "renew_deadline_s": 2,
                "retry_period_s": 0.5,
            },
            "slack": {
                "bot_token": DEFAULT_TOKEN,
                "signing_secret": SIGNING_SECRET,
                "channel": CHANNEL,
                "api_url": slack_url,
                **slack,
            },
        }
    )


@dataclass
class Running:
    replica: runtime.Replica
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def webhook(self, payload: dict[str, Any]) -> int:
        request = urllib.request.Request(
            self.base + "/alertmanager",
            data=json.dumps(payload).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)


@pytest.fixture
def double() -> Iterator[SlackDouble]:
    with SlackDouble() as started:
        yield started


@pytest.fixture
def serving(sim_cluster: Any, tmp_path: Path, double: SlackDouble) -> Iterator[Running]:
    server, _ = sim_cluster
    replica = runtime.build_replica(
        settings(tmp_path, double.url), kube_url=server.url, watch=False
    )
    bound: list[int] = []
    thread = threading.Thread(
        target=runtime.run, args=(replica,), kwargs={"on_started": bound.append}, daemon=True
    )
    thread.start()
    try:
        wait_for("serve to listen", lambda: bound)
        wait_for("the lease", lambda: replica.elector.is_leader)
        yield Running(replica, bound[0])
    finally:
        replica.server.should_exit = True
        thread.join(timeout=30)


def the_diagnosis(double: SlackDouble) -> dict[str, Any]:
    def posted() -> dict[str, Any] | None:
        for message in double.messages(CHANNEL):
            if APPROVE_ACTION in json.dumps(message.get("blocks", [])):
                return message
        return None

    found: dict[str, Any] = wait_for("the diagnosis in Slack", posted)
    return found


def test_an_alert_reaches_slack_and_an_allowed_click_drains_the_node(
    serving: Running, double: SlackDouble, sim_cluster: Any
) -> None:
    server, _ = sim_cluster
    payload = faults.inject(server.store, "xid", NODE, datetime.now(UTC), code=79, gpu=3).payload()
    assert serving.webhook(payload) == 200
    message = the_diagnosis(double)
    assert NODE in json.dumps(message["blocks"])
    events = serving.base + "/slack/events"

    # A stranger first: told privately, nothing changes.
    stranger = double.block_actions(CHANNEL, message["ts"], MALLORY, APPROVE_ACTION)
    status, _, _ = post_signed(events, interaction_body(stranger))
    assert status == 200
    wait_for("the stranger's answer", lambda: double.ephemerals)
    assert "not allowed" in json.dumps(double.ephemerals)
    node = server.store.get(BY_KIND["Node"], "", NODE)
    assert not node["spec"].get("unschedulable")

    # Forged: 401 from the same server, nothing changes.
    allowed = double.block_actions(CHANNEL, message["ts"], ALICE, APPROVE_ACTION)
    forged, _, _ = post_signed(events, interaction_body(allowed), secret="not-the-secret")
    assert forged == 401

    status, _, _ = post_signed(events, interaction_body(allowed))
    assert status == 200
    wait_for(
        "the drain",
        lambda: server.store.get(BY_KIND["Node"], "", NODE)["spec"].get("unschedulable"),
    )
    wait_for("the message to name the decision", lambda: double.calls_to("chat.update"))
    updated = double.message(CHANNEL, message["ts"])
    assert ALICE in json.dumps(updated)
    assert APPROVE_ACTION not in json.dumps(updated.get("blocks", []))


def test_the_webhook_token_does_not_open_slack_events(serving: Running) -> None:
    request = urllib.request.Request(
        serving.base + "/slack/events",
        data=b"payload=%7B%7D",
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
        method="POST",
    )
    try:
        urllib.request.urlopen(request, timeout=10)
        raise AssertionError("an unsigned request was accepted")
    except urllib.error.HTTPError as refused:
        assert refused.code == 401


@pytest.mark.parametrize(
    ("slack", "field"),
    [
        ({"mode": "socket"}, "slack.app_token"),
        ({"signing_secret": None}, "slack.signing_secret"),
        ({"channel": ""}, "slack.channel"),
    ],
)
def test_half_configured_slack_is_refused_at_start_before_the_store_is_touched(
    sim_cluster: Any, tmp_path: Path, double: SlackDouble, slack: dict[str, Any], field: str
) -> None:
    server, _ = sim_cluster
    with pytest.raises(InputError) as refused:
        runtime.build_replica(
            settings(tmp_path, double.url, **slack), kube_url=server.url, watch=False
        )
    assert refused.value.where == field
    assert not (tmp_path / "gpubot.db").exists()


def test_three_hundred_alerts_naming_no_node_are_one_channel_message(
    serving: Running, double: SlackDouble
) -> None:
    """Finding 9: each alert without a node label became a channel message of its own (300
    alerts, 300 messages). An Alertmanager group's alerts that name no node are now one
    notice, counting them by name."""
    started = datetime.now(UTC)
    alerts = [
        webhook_alert(
            "DCGMExporterDown" if i % 3 else "GPUXidError",
            job="dcgm",
            shard=str(i),
            started=started,
        )
        for i in range(300)
    ]
    group = '{}:{alertname=~"DCGM.*|GPUXid.*"}'
    assert serving.webhook(webhook_payload(*alerts, group_key=group)) == 200
    wait_for("the notice", lambda: double.calls_to("chat.postMessage"))
    wait_for(
        "every signal split and the outbox sent",
        lambda: (
            sum(s.count for s in serving.replica.store.firing_alerts()) == 300
            and serving.replica.store.outbox_pending() == 0
        ),
    )
    time.sleep(1)  # a second message, if any, would be queued by now
    assert serving.replica.store.outbox_pending() == 0
    [notice] = double.messages(CHANNEL)
    assert "300 alerts of Alertmanager group" in notice["text"], notice["text"]
    assert "DCGMExporterDown ×200" in notice["text"] and "GPUXidError ×100" in notice["text"]
