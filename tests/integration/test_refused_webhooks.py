"""A webhook over `serve.max_body_bytes` (issue 31, item 6): it was refused 413 with nothing in
the log. Alertmanager does not retry a 4xx (notify.Retrier.Check: only a 5xx, or a code the
integration lists, is tried again), so that notification's alerts were lost without a word,
while the shipped receiver set `max_alerts: 0` (every alert of a group in one body).

Now the refusal is logged once per cause (a body that said its length, one that did not),
again at most every `REFUSALS_TOLD_EVERY_S` (10 minutes) with how many came in between,
naming the size, the limit and the fix (`max_alerts` in the receiver's webhook_config, and
how many fit); the 413's body says the same, which Alertmanager writes to its own log
("unexpected status code 413: ..."); each is counted in
`gpubot_webhook_requests_total{code="413"}`. And the shipped receiver caps a notification at
`max_alerts` alerts, a body the default limit takes: the real Alertmanager, with the shipped
route and receiver, sends a group of 2,000 alerts that gpubot stores (the rest counted as
truncated), where `max_alerts: 0` made it a 413.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from bot.config import ServeSettings
from bot.process.telemetry import Telemetry
from bot.replica.http import build_app, server_config
from bot.sources.alertmanager.endpoint import WebSettings
from bot.sources.alertmanager.payloads import alerts_that_fit
from bot.store.sql import SqlStore
from tests.helpers.clocks import FakeClock
from tests.helpers.paths import NOW, REPO
from tests.helpers.servers import alertmanager_server, requires_alertmanager

TOKEN = "refusals-test-token-61c2"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
CAPTURES = REPO / "tests" / "data" / "alertmanager" / "community"
CAPTURE = CAPTURES / "issue-captures-GpuXidError.json"
"""A real notification (Alertmanager 0.25): dcgm-exporter's labels behind a ServiceMonitor."""
RECEIVER = REPO / "deploy" / "alertmanager" / "receiver.yaml"
LIMIT = ServeSettings().max_body_bytes
GROUP = 2000
"""Alerts in one group: about 1 kB each as Alertmanager sends them, 1.9 MB in one body."""
ENDPOINT_LOG = "bot.sources.alertmanager.endpoint"


def _alert(i: int) -> dict[str, Any]:
    """The captured alert, on one node, its GPU index made `i`: one group of distinct alerts."""
    alert: dict[str, Any] = json.loads(CAPTURE.read_bytes())["alerts"][0]
    alert["labels"] = {**alert["labels"], "node": "gpu-node-1", "gpu": str(i)}
    alert["fingerprint"] = f"{i:016x}"
    return alert


def _notification(count: int) -> bytes:
    """A notification of `count` alerts, as Alertmanager writes one (compact JSON)."""
    body = json.loads(CAPTURE.read_bytes())
    body["alerts"] = [_alert(i) for i in range(count)]
    return json.dumps(body, separators=(",", ":")).encode()


def _scraped(client: TestClient, name: str, **labels: str) -> float:
    """One sample of `GET /metrics`, as Prometheus reads it."""
    response = client.get("/metrics")
    assert response.status_code == 200
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def _told(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == ENDPOINT_LOG and r.levelno >= logging.WARNING
    ]


def test_a_body_over_the_limit_is_told_once_per_cause_with_its_size_and_max_alerts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock(NOW)
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    try:
        app = build_app(
            store, WebSettings(bearer_token=TOKEN), lambda: None, metrics=Telemetry(), clock=clock
        )
        client = TestClient(app)
        body = _notification(GROUP)
        assert len(body) > LIMIT
        with caplog.at_level(logging.INFO):
            declared = [client.post("/alertmanager", content=body, headers=AUTH) for _ in range(3)]
            # Without Content-Length (chunked): refused once past the limit, its size unknown.
            chunked = [
                client.post("/alertmanager", content=iter([body]), headers=AUTH) for _ in range(2)
            ]
            first = _told(caplog)
            clock.advance(3600)
            client.post("/alertmanager", content=body, headers=AUTH)
        assert [r.status_code for r in declared + chunked] == [413] * 5
        assert "max_alerts" in declared[0].json()["error"]  # Alertmanager logs this body
        assert _scraped(client, "gpubot_webhook_requests_total", code="413") == 6
        assert store.deliveries_waiting() == 0
    finally:
        store.close()

    assert len(first) == 2, first  # one line per cause, not one per request
    by_length, by_stream = first
    assert f"{len(body)} bytes" in by_length and f"{LIMIT}" in by_length
    assert "max_alerts" in by_length and "serve.max_body_bytes" in by_length
    assert f"about {alerts_that_fit(LIMIT)} alerts fit" in by_length
    assert "Content-Length" in by_stream and "max_alerts" in by_stream
    again = _told(caplog)[2:]
    assert len(again) == 1 and "2 more" in again[0], again  # an hour on: the two not told


# ---- the shipped receiver, through the real Alertmanager ------------------------------------


@contextmanager
def _serving(store: SqlStore, metrics: Telemetry) -> Iterator[int]:
    """gpubot's webhook on a real uvicorn on 127.0.0.1; yields its port."""
    app = build_app(store, WebSettings(bearer_token=TOKEN), lambda: None, metrics=metrics)
    server = uvicorn.Server(server_config(app, "127.0.0.1", 0))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _alertmanager_config(port: int, token_file: Path, max_alerts: int | None) -> str:
    """deploy/alertmanager/receiver.yaml pointed at `port`, waiting 1 s instead of 10 s and
    1 min; `max_alerts` as shipped unless given."""
    doc = yaml.safe_load(RECEIVER.read_text())
    doc["route"].update(group_wait="1s", group_interval="1s")
    (hook,) = doc["receivers"][0]["webhook_configs"]
    hook["url"] = f"http://127.0.0.1:{port}/alertmanager"
    hook["http_config"]["authorization"]["credentials_file"] = str(token_file)
    if max_alerts is not None:
        hook["max_alerts"] = max_alerts
    return yaml.safe_dump(doc, sort_keys=False)


def _posted(i: int) -> dict[str, Any]:
    """The captured alert as Prometheus posts it to Alertmanager's API, starting now (an alert
    that started longer than group_wait ago is sent at once: the group would go in pieces)."""
    alert = _alert(i)
    return {k: alert[k] for k in ("labels", "annotations", "generatorURL")}


def _sample(metrics: Telemetry, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


@requires_alertmanager
@pytest.mark.parametrize("max_alerts", [None, 0], ids=["shipped", "max_alerts-0"])
def test_a_group_of_2000_alerts_through_the_real_alertmanager(
    max_alerts: int | None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    metrics = Telemetry()
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    try:
        with (
            caplog.at_level(logging.INFO),
            _serving(store, metrics) as port,
            alertmanager_server(_alertmanager_config(port, token, max_alerts)) as alertmanager,
        ):
            alertmanager.post_alerts([_posted(i) for i in range(GROUP)])
            deadline = time.monotonic() + 30
            while not _sample(metrics, "gpubot_webhook_requests_total", code="200") + _sample(
                metrics, "gpubot_webhook_requests_total", code="413"
            ):
                assert time.monotonic() < deadline, alertmanager.log_tail()
                time.sleep(0.1)
            while max_alerts == 0 and "413" not in alertmanager.log_tail():
                assert time.monotonic() < deadline, alertmanager.log_tail()
                time.sleep(0.1)  # Alertmanager logs the failed notification once it is over
            log_tail = alertmanager.log_tail()
        stored = store.deliveries_waiting()
    finally:
        store.close()

    if max_alerts is None:  # the shipped receiver
        shipped = yaml.safe_load(RECEIVER.read_text())["receivers"][0]["webhook_configs"][0]
        assert _sample(metrics, "gpubot_webhook_requests_total", code="200") == 1
        assert _sample(metrics, "gpubot_webhook_requests_total", code="413") == 0
        assert stored == 1
        assert _sample(metrics, "gpubot_alerts_truncated_total") == GROUP - shipped["max_alerts"]
        assert _told(caplog) == [
            f"webhook: Alertmanager left out {GROUP - shipped['max_alerts']} alerts of a group"
        ]
    else:  # every alert in one body: refused, and Alertmanager does not send it again
        assert _sample(metrics, "gpubot_webhook_requests_total", code="413") == 1
        assert stored == 0
        (told,) = _told(caplog)
        assert "max_alerts" in told
        assert "413" in log_tail and "max_alerts" in log_tail  # Alertmanager's own log
