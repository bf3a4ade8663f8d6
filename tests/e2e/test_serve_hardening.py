"""`gpubot serve` hardened, as composed: readiness that fails while the Kubernetes API is away
(and a log that says so once), where it listens by default, the metrics token, and the
quarantine notice wired to the chat. One replica in this process on the simulated cluster,
through its real HTTP port."""

from __future__ import annotations

import io
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bot.chat.console import ConsoleChat
from bot.config import ServeSettings, Settings
from bot.roots import serve as runtime
from bot.store.sql import SqlStore
from gpusim.apiserver import SimulatedApiServer
from gpusim.scenarios import healthy_cluster
from gpusim.state import ClusterState
from tests.helpers.builders import webhook_alert, webhook_payload

TOKEN = "webhook-token"
METRICS_TOKEN = "metrics-token-5e2"


def wait_for(what: str, check: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def post_webhook(base: str, payload: dict[str, Any]) -> int:
    request = urllib.request.Request(
        base + "/alertmanager",
        data=json.dumps(payload).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return int(answer.status)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def settings(tmp_path: Path, **serve: Any) -> Settings:
    return Settings.model_validate(
        {
            "store_url": f"sqlite:///{tmp_path / 'gpubot.db'}",
            "schedule": {"leader_duties_s": 0.5},
            "serve": {
                "port": 0,
                "bearer_token": TOKEN,
                "lease_duration_s": 3,
                "renew_deadline_s": 2,
                "retry_period_s": 0.5,
                **serve,
            },
        }
    )


@dataclass
class Running:
    replica: runtime.Replica
    port: int
    api: SimulatedApiServer
    chat_output: io.StringIO

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Running]:
    """A replica whose store held, before it started, a delivery an older gpubot accepted and
    that cannot be split; its chat writes to a buffer."""
    sim = ClusterState()
    sim.load(healthy_cluster(2, datetime.now(UTC))["items"])
    api = SimulatedApiServer(sim).start()
    chosen = settings(tmp_path, kube_probe_ttl_s=0.5, metrics_token=METRICS_TOKEN)
    before = SqlStore.open(chosen.store_url)
    poison = json.dumps(
        {"status": "firing", "alerts": [{"status": "firing", "labels": {"a": "@@"}}]}
    ).encode()
    before.add_delivery("alertmanager", poison.replace(b"@@", b"\xed\xa0\x80"), datetime.now(UTC))
    before.close()
    output = io.StringIO()
    chat = ConsoleChat(Console(file=output, width=200), chosen.lang)
    replica = runtime.build_replica(chosen, kube_url=api.url, chat=chat)
    bound: list[int] = []
    thread = threading.Thread(
        target=runtime.run, args=(replica,), kwargs={"on_started": bound.append}, daemon=True
    )
    thread.start()
    try:
        wait_for("serve to listen", lambda: bound)
        yield Running(replica, bound[0], api, output)
    finally:
        replica.server.should_exit = True
        thread.join(timeout=30)
        api.stop()


def test_readyz_fails_while_the_kubernetes_api_is_away_and_the_log_says_so_once(
    serving: Running, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 10 (readiness): /readyz said 200 while the API server was unreachable, and
    the log held hundreds of urllib3 retry lines. Now /readyz fails with a reason that names
    no address, the watches and the leader election retry quietly, and the log has one line
    when the API goes and one when it is back."""
    caplog.set_level(logging.INFO)
    assert wait_for("ready", lambda: get(serving.base + "/readyz")[0] == 200)
    port = serving.api.port
    serving.api.stop()

    def not_ready() -> str | None:
        status, body = get(serving.base + "/readyz")
        return body if status == 503 else None

    body = wait_for("/readyz to fail", not_ready, timeout_s=10)
    reason = json.loads(body)["reason"]
    assert reason.startswith("kubernetes api "), reason
    for hidden in ("127.0.0.1", str(port), "http", "/version"):
        assert hidden not in body, (hidden, body)
    time.sleep(3)  # the watches and the lease retry meanwhile, every half second
    assert not_ready()
    assert get(serving.base + "/healthz")[0] == 200  # alive, only not ready
    back = SimulatedApiServer(serving.api.store, port=port).start()
    try:
        wait_for("ready again", lambda: get(serving.base + "/readyz")[0] == 200, timeout_s=15)
    finally:
        back.stop()
    messages = [record.getMessage() for record in caplog.records]
    went = [m for m in messages if m.startswith("kubernetes api unreachable")]
    came = [m for m in messages if m.startswith("kubernetes api answers again")]
    assert (len(went), len(came)) == (1, 1), messages
    assert not [m for m in messages if "Retrying" in m], messages
    assert "127.0.0.1" not in went[0]


def test_an_alert_taken_while_the_kubernetes_api_was_away_is_diagnosed_soon_after_it_is_back(
    serving: Running, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 10 (recovery): an alert stored while the API server was unreachable was
    diagnosed only by the sweep, minutes after the API came back (its pass failed once and
    the batch was dropped). Now the intake retries the batch (0.5 s, doubling to 5 s) and
    says so once when it starts waiting and once when it goes on."""
    caplog.set_level(logging.INFO)
    assert wait_for("ready", lambda: get(serving.base + "/readyz")[0] == 200)
    port = serving.api.port
    serving.api.stop()
    wait_for("/readyz to fail", lambda: get(serving.base + "/readyz")[0] == 503, timeout_s=10)
    # The alert alone tells it: nothing in the cluster changes that a watch could pick up.
    alert = webhook_alert(
        "GPUXidError", node="gpu-a2", gpu="0", xid="79", started=datetime.now(UTC)
    )
    nowhere = webhook_alert("GPUDriverMismatch", job="dcgm", started=datetime.now(UTC))
    assert post_webhook(serving.base, webhook_payload(alert, nowhere)) == 200
    time.sleep(4)  # the pass fails meanwhile, and is tried again
    assert serving.replica.store.incidents(node="gpu-a2") == []
    back = SimulatedApiServer(serving.api.store, port=port).start()
    try:
        came_back = time.monotonic()
        [incident] = wait_for(
            "the diagnosis", lambda: serving.replica.store.incidents(node="gpu-a2"), 15
        )
        assert time.monotonic() - came_back < 10
        assert incident.rule == "gpu-fell-off-bus"
        wait_for("the chat", lambda: f"incident {incident.id}" in serving.chat_output.getvalue())
    finally:
        back.stop()

    def said(start: str) -> list[str]:
        return [m for r in caplog.records if (m := r.getMessage()).startswith(start)]

    wait_for("the line that says it goes on", lambda: said("diagnosis goes on"))
    # Told once, though its batch was tried again and again.
    assert serving.chat_output.getvalue().count("GPUDriverMismatch (firing) names no node") == 1
    assert (len(said("diagnosis paused")), len(said("diagnosis goes on"))) == (1, 1)
    messages = [record.getMessage() for record in caplog.records]
    assert not [m for m in messages if m.startswith("processing")], messages


def test_the_quarantine_is_told_in_the_chat_and_metrics_ask_for_their_token(
    serving: Running,
) -> None:
    wait_for(
        "the quarantine notice",
        lambda: "webhook delivery 1 could not be split" in serving.chat_output.getvalue(),
    )
    assert serving.replica.store.quarantined_deliveries()[0].id == 1
    assert serving.replica.store.deliveries_waiting() == 0
    assert get(serving.base + "/metrics")[0] == 401
    assert get(serving.base + "/metrics", {"Authorization": f"Bearer {TOKEN}"})[0] == 401
    status, text = get(serving.base + "/metrics", {"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert status == 200
    assert "gpubot_deliveries_quarantined_total 1.0" in text


def test_a_bare_serve_listens_on_loopback_only(tmp_path: Path) -> None:
    """Finding 12: the default bind was 0.0.0.0. A bare `gpubot serve` now listens on
    127.0.0.1; the chart (tests/e2e/test_chart.py) sets 0.0.0.0 in its pods."""
    assert ServeSettings().host == "127.0.0.1"
    replica = runtime.build_replica(settings(tmp_path), kube_url="http://127.0.0.1:9", watch=False)
    try:
        config = replica.server.config
        assert (config.host, config.timeout_keep_alive) == ("127.0.0.1", 5)
    finally:
        replica.stop()
