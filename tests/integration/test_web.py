"""`gpubot serve`'s HTTP service against the real store (SQLite in tmp_path; PostgreSQL where
it answers), through Starlette's TestClient and once through a real uvicorn on 127.0.0.1.

Invariant 8: a 200 means the signals are in the store. Invariant 7: bad input gets a 4xx and
stores nothing, and the app keeps answering.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import logging
import selectors
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient
from starlette.types import Message, Scope

from bot.errors import InputError
from bot.model import Signal
from bot.process.telemetry import Telemetry
from bot.replica.http import build_app, server_config
from bot.sources.alertmanager.endpoint import MiB, WebSettings
from bot.sources.alertmanager.inbox import Inbox
from bot.store.sql import SqlStore
from tests.helpers.stores import postgres_answers, postgres_schema

TOKEN = "8d2f-webhook-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

# Shaped exactly like Alertmanager's notify/webhook payload (version 4).
ALERT: dict[str, Any] = {
    "status": "firing",
    "labels": {
        "alertname": "GPUXidError",
        "Hostname": "gpu-a1",
        "gpu": "3",
        "xid": "79",
        "severity": "critical",
    },
    "annotations": {"summary": "Xid 79 on gpu-a1 GPU 3"},
    "startsAt": "2026-12-02T02:58:30.123Z",
    "endsAt": "0001-01-01T00:00:00Z",
    "generatorURL": "http://prometheus:9090/graph?g0.expr=...",
    "fingerprint": "a1b2c3d4e5f60718",
}


def payload(*alerts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "receiver": "gpubot",
        "status": "firing",
        "alerts": list(alerts) if alerts else [copy.deepcopy(ALERT)],
        "groupLabels": {"alertname": "GPUXidError"},
        "commonLabels": {"alertname": "GPUXidError"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "version": "4",
        "groupKey": '{}:{alertname="GPUXidError"}',
        "truncatedAlerts": 0,
    }
    body.update(fields)
    return body


def alert(**changes: Any) -> dict[str, Any]:
    result = copy.deepcopy(ALERT)
    result.update(changes)
    return result


class Harness:
    """An app on a real store, with its metrics at hand. Each stored delivery is split at
    once by the inbox the pipeline uses (in `gpubot serve` its worker does that, behind the
    200); `handed` is what the split found new."""

    def __init__(self, store: SqlStore, **build: Any) -> None:
        self.store = store
        self.handed: list[Signal] = []
        self.metrics = Telemetry()
        web_settings = build.pop("web_settings", WebSettings(bearer_token=TOKEN))
        self.inbox = Inbox(store, web_settings.node_labels, self.metrics)
        self.app = build_app(
            store,
            web_settings,
            build.pop("on_delivery", self.split),
            metrics=self.metrics,
            **build,
        )
        self.client = TestClient(self.app)

    def split(self) -> None:
        self.handed += self.inbox.split()

    def post(self, body: Any, headers: dict[str, Any] | None = None) -> httpx.Response:
        # json.dumps escapes non-ASCII, so even a lone surrogate travels (httpx's json= cannot).
        return self.post_raw(
            json.dumps(body).encode(),
            {"Content-Type": "application/json", **(AUTH if headers is None else headers)},
        )

    def post_raw(self, content: Any, headers: dict[str, Any] | None = None) -> httpx.Response:
        response: httpx.Response = self.client.post(
            "/alertmanager", content=content, headers=AUTH if headers is None else headers
        )
        return response

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqlStore]:
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}", lock_timeout_s=0.2)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def web(store: SqlStore) -> Harness:
    return Harness(store)


# ---- accepted ----------------------------------------------------------------------------


def test_a_valid_payload_is_stored_before_200_and_then_handed_on(web: Harness) -> None:
    response = web.post(payload())
    assert response.status_code == 200
    assert response.json() == {"accepted": 1, "truncated_alerts": 0}
    [stored] = web.store.signals()
    assert (stored.source, stored.name, stored.node, stored.gpu) == (
        "alertmanager",
        "GPUXidError",
        "gpu-a1",
        "3",
    )
    assert stored.labels["xid"] == "79"
    assert web.handed == [stored]


def test_the_same_payload_twice_is_stored_once_and_handed_on_once(web: Harness) -> None:
    assert web.post(payload()).json()["accepted"] == 1
    again = web.post(payload())
    assert again.status_code == 200
    assert again.json() == {"accepted": 1, "truncated_alerts": 0}
    assert web.store.count_signals() == 1
    assert len(web.handed) == 1
    assert web.sample("gpubot_signals_duplicate_total", source="alertmanager") == 1


def test_resolved_is_a_new_signal(web: Harness) -> None:
    web.post(payload())
    resolved = alert(status="resolved", endsAt="2026-12-02T03:10:00Z")
    response = web.post(payload(resolved, status="resolved"))
    assert response.json() == {"accepted": 1, "truncated_alerts": 0}
    assert [s.status for s in web.store.signals()] == ["firing", "resolved"]
    assert web.handed[-1].status == "resolved"
    assert web.handed[-1].ends_at is not None


def test_alerts_without_a_node_label_are_stored_with_node_none(web: Harness) -> None:
    nodeless = alert(labels={"alertname": "GPUFabricManagerDown", "job": "dcgm"}, fingerprint="")
    response = web.post(payload(nodeless))
    assert response.json()["accepted"] == 1
    [stored] = web.store.signals()
    assert stored.node is None
    assert stored.fingerprint  # computed from the labels when Alertmanager sent none


def test_node_labels_are_configurable(store: SqlStore) -> None:
    web = Harness(
        store, web_settings=WebSettings(bearer_token=TOKEN, node_labels=["exported_node"])
    )
    labels = {"alertname": "GPUXidError", "exported_node": "gpu-z9", "Hostname": "proxy"}
    web.post(payload(alert(labels=labels)))
    assert [s.node for s in store.signals()] == ["gpu-z9"]


def test_truncated_alerts_are_recorded_and_counted(web: Harness) -> None:
    response = web.post(payload(truncatedAlerts=7))
    assert response.json() == {"accepted": 1, "truncated_alerts": 7}
    assert web.store.signals()[0].truncated_alerts == 7
    assert web.sample("gpubot_alerts_truncated_total") == 7


def test_unknown_extra_fields_are_accepted(web: Harness) -> None:
    body = payload(alert(newAlertField={"x": 1}), newTopLevelField=[1, 2])
    assert web.post(body).status_code == 200
    assert web.store.count_signals() == 1


def test_a_thousand_alerts_in_one_payload_are_all_stored_quickly(web: Harness) -> None:
    alerts = [
        alert(
            labels={**ALERT["labels"], "Hostname": f"gpu-{i:04d}"},
            fingerprint=f"fp{i:014d}",
        )
        for i in range(1000)
    ]
    body = payload(*alerts)
    assert len(json.dumps(body)) < 1 << 20  # what Alertmanager could send within the limit
    started = time.perf_counter()
    response = web.post(body)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200
    assert response.json() == {"accepted": 1000, "truncated_alerts": 0}
    assert web.store.count_signals() == 1000
    assert len(web.handed) == 1000
    assert elapsed < 5.0, f"1,000 alerts took {elapsed:.2f} s"


# ---- bad input: a clear 4xx, nothing stored -----------------------------------------------

NESTED = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"", "empty"),
        (b"  \n", "empty"),
        (b"not json", "not JSON"),
        (b'{"status": "firing", "alerts": [', "not JSON"),
        (b"\xff\xfe\xfa", "not JSON"),
        (NESTED, "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b"42", "expected a JSON object"),
        (json.dumps({"status": "firing"}).encode(), "field alerts: Field required"),
        (json.dumps(payload(status="burning")).encode(), "field status"),
        (json.dumps(payload(alert(status="x"))).encode(), "field alerts.0.status"),
        (json.dumps(payload(alert(labels={"a": 1}))).encode(), "field alerts.0.labels.a"),
        (json.dumps(payload(alert(labels=None))).encode(), "field alerts.0.labels"),
        (json.dumps(payload(alert(startsAt="yesterday"))).encode(), "field alerts.0.startsAt"),
        (json.dumps(payload(alerts={"0": ALERT})).encode(), "field alerts"),
        (json.dumps(payload(truncatedAlerts="many")).encode(), "field truncatedAlerts"),
        (json.dumps(payload(truncatedAlerts=-1)).encode(), "field truncatedAlerts"),
        (json.dumps(payload(truncatedAlerts=2**70)).encode(), "field truncatedAlerts"),
        # Text the store cannot hold is bad input, named here, not a database error (5xx).
        (
            json.dumps(payload(alert(labels={"alertname": "X\x00", "node": "n"}))).encode(),
            "field alerts.0.labels.alertname: contains a NUL",
        ),
        (
            json.dumps(payload(alert(annotations={"summary": "\ud800"}))).encode(),
            "field alerts.0.annotations.summary: not valid Unicode",
        ),
        (
            json.dumps(payload(alert(labels={"alertname": "X", "node": "n" * 254}))).encode(),
            "longer than 253",
        ),
        (
            json.dumps(payload(alert(labels={"alertname": "X" * 201}))).encode(),
            "field alerts.0.labels.alertname: longer than 200",
        ),
        (json.dumps(payload(alert(fingerprint="f" * 201))).encode(), "field alerts.0.fingerprint"),
    ],
    ids=lambda v: v[:40].decode(errors="replace") if isinstance(v, bytes) else None,
)
def test_bad_input_is_a_400_naming_the_problem_and_stores_nothing(
    web: Harness, body: bytes, says: str
) -> None:
    response = web.post_raw(body, headers={**AUTH, "Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert says in response.json()["error"]
    assert len(response.json()["error"]) < 600
    assert web.store.count_signals() == 0
    assert web.handed == []
    assert web.sample("gpubot_webhook_requests_total", code="400") == 1


def test_one_bad_alert_rejects_the_whole_payload(web: Harness) -> None:
    response = web.post(payload(alert(), alert(fingerprint="other", status="firing!")))
    assert response.status_code == 400
    assert "alerts.1.status" in response.json()["error"]
    assert web.store.count_signals() == 0


TEN_MIB = b"x" * (10 * 1024 * 1024)


def test_a_10_mib_body_is_413_by_content_length(web: Harness) -> None:
    response = web.post_raw(TEN_MIB)
    assert response.status_code == 413
    assert "1048576 bytes" in response.json()["error"]
    assert web.store.count_signals() == 0


def test_a_declared_oversize_body_is_refused_without_reading_a_byte(web: Harness) -> None:
    """At the ASGI level: the app answers 413 without ever calling receive()."""
    reads: list[Message] = []
    sent: list[Message] = []

    async def receive() -> Message:
        message: Message = {"type": "http.request", "body": b"x" * 65536, "more_body": True}
        reads.append(message)
        return message

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/alertmanager",
        "raw_path": b"/alertmanager",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"authorization", f"Bearer {TOKEN}".encode()),
            (b"content-length", str(10 * MiB).encode()),
        ],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(web.app(scope, receive, send))
    assert sent[0]["status"] == 413
    assert reads == []


def test_a_10_mib_chunked_body_without_content_length_is_413(web: Harness) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(160):
            yield b"x" * 65536

    request = web.client.build_request("POST", "/alertmanager", content=chunks(), headers=AUTH)
    assert "content-length" not in request.headers
    assert request.headers["transfer-encoding"] == "chunked"
    response = web.client.send(request)
    assert response.status_code == 413
    assert web.store.count_signals() == 0


def test_the_body_limit_is_configurable_and_exact(store: SqlStore) -> None:
    body = json.dumps(payload()).encode()
    exact = Harness(store, web_settings=WebSettings(bearer_token=TOKEN, max_body_bytes=len(body)))
    assert exact.post_raw(body).status_code == 200
    short = Harness(
        store, web_settings=WebSettings(bearer_token=TOKEN, max_body_bytes=len(body) - 1)
    )
    assert short.post_raw(body).status_code == 413


# ---- credentials --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN[:-1]}"},
        {"Authorization": TOKEN},
        {"Authorization": f"Token {TOKEN}"},
        {"Authorization": "Basic " + base64.b64encode(f"alertmanager:{TOKEN}".encode()).decode()},
        {"Authorization": "Bearer tök€n".encode()},
    ],
    ids=["none", "empty", "no-token", "wrong", "longer", "shorter", "no-scheme", "scheme",
         "basic-not-configured", "non-ascii"],
)  # fmt: skip
def test_missing_or_wrong_credentials_are_401_counted_and_store_nothing(
    web: Harness, headers: dict[str, Any]
) -> None:
    response = web.post(payload(), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="gpubot"'
    assert web.store.count_signals() == 0
    assert web.handed == []
    assert web.sample("gpubot_webhook_auth_failures_total") == 1
    assert web.sample("gpubot_webhook_requests_total", code="401") == 1


def test_auth_comes_before_the_body_is_looked_at(web: Harness) -> None:
    assert web.post_raw(TEN_MIB, headers={}).status_code == 401
    assert web.post_raw(b"not json", headers={}).status_code == 401


def test_the_bearer_scheme_is_case_insensitive_as_rfc_6750_says(web: Harness) -> None:
    assert web.post(payload(), headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_basic_auth_as_alertmanager_sends_it(store: SqlStore) -> None:
    web = Harness(store, web_settings=WebSettings(basic_auth={"alertmanager": "pä55:word"}))
    assert web.post(payload(), headers=basic("alertmanager", "pä55:word")).status_code == 200
    for headers in [
        basic("alertmanager", "pä55"),
        basic("someone", "pä55:word"),
        basic("", ""),
        {"Authorization": "Basic !!notbase64!!"},
        {"Authorization": "Basic " + base64.b64encode(b"\xff\xfe").decode()},
        {"Authorization": "Basic " + base64.b64encode(b"alertmanager").decode()},
        AUTH,
    ]:
        response = web.post(payload(), headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"].startswith("Basic ")
    assert store.count_signals() == 1
    assert web.sample("gpubot_webhook_auth_failures_total") == 7


def test_the_webhook_never_runs_without_credentials(store: SqlStore) -> None:
    with pytest.raises(InputError, match="no webhook credentials"):
        build_app(store, WebSettings(), lambda _signals: None)
    with pytest.raises(ValueError, match="bearer_token"):
        WebSettings(bearer_token="")
    with pytest.raises(ValueError, match="basic_auth"):
        WebSettings(basic_auth={"alertmanager": ""})


def test_a_token_read_from_a_file_loses_its_newline(store: SqlStore) -> None:
    # Alertmanager trims its credentials_file; a token file written with echo ends in "\n".
    web = Harness(store, web_settings=WebSettings(bearer_token=f"{TOKEN}\n"))
    assert web.post(payload()).status_code == 200
    with pytest.raises(ValueError, match="bearer_token"):
        WebSettings(bearer_token=" \n")


def test_a_content_length_that_is_not_a_number_is_400(web: Harness) -> None:
    for declared in ["12abc", "²", "-5"]:
        request = web.client.build_request("POST", "/alertmanager", content=b"{}", headers=AUTH)
        request.headers["Content-Length"] = declared
        assert web.client.send(request).status_code == 400, declared


def test_credentials_do_not_show_in_a_repr() -> None:
    shown = repr(WebSettings(bearer_token=TOKEN, basic_auth={"am": "pw-secret"}))
    assert TOKEN not in shown
    assert "pw-secret" not in shown


# ---- the store, and the pipeline's hand-over -----------------------------------------------


def test_a_locked_store_is_503_then_the_retry_stores(web: Harness, tmp_path: Path) -> None:
    blocker = sqlite3.connect(tmp_path / "gpubot.db")
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        response = web.post(payload())
        assert response.status_code == 503
        assert "locked" in response.json()["error"]
        assert web.handed == []
    finally:
        blocker.rollback()
        blocker.close()
    assert web.store.count_signals() == 0
    retry = web.post(payload())  # Alertmanager retries a 5xx with the same payload
    assert retry.status_code == 200
    assert retry.json()["accepted"] == 1
    assert web.store.count_signals() == 1
    assert web.sample("gpubot_webhook_requests_total", code="503") == 1


def test_on_delivery_raising_still_answers_200_logs_and_counts(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("queue full")

    web = Harness(store, on_delivery=broken)
    with caplog.at_level(logging.ERROR, logger="bot.sources.alertmanager.endpoint"):
        response = web.post(payload())
    assert response.status_code == 200
    assert web.sample("gpubot_signal_handler_errors_total") == 1
    assert "queue full" in caplog.text
    # Stored is stored: the next split (the worker's next delivery, or the sweep) takes it.
    web.split()
    assert store.count_signals() == 1


def test_the_delivery_is_stored_before_200_and_split_behind_it(store: SqlStore) -> None:
    told: list[int] = []
    web = Harness(store, on_delivery=lambda: told.append(store.deliveries_waiting()))
    response = web.post(payload(alert(), alert(fingerprint="second")))
    assert response.json() == {"accepted": 2, "truncated_alerts": 0}
    assert told == [1]  # stored whole before the pipeline heard of it
    assert store.count_signals() == 0
    web.split()
    assert [s.fingerprint for s in web.handed] == [ALERT["fingerprint"], "second"]
    assert (store.count_signals(), store.deliveries_waiting()) == (2, 0)
    web.split()
    assert len(web.handed) == 2  # split once


def test_a_bug_while_storing_is_500_and_logged_never_a_silent_200(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    # A naive clock is a programming error the store refuses (it keeps UTC only).
    web = Harness(store, clock=lambda: datetime(2026, 12, 2, 3, 0))
    with caplog.at_level(logging.ERROR, logger="bot.sources.alertmanager.endpoint"):
        response = web.post(payload())
    assert response.status_code == 500
    assert store.count_signals() == 0
    assert web.handed == []
    assert "naive datetime" in caplog.text


# ---- health, readiness, metrics ---------------------------------------------------------


def test_healthz_and_readyz(store: SqlStore) -> None:
    up = {"ready": True}
    web = Harness(store, ready=lambda: up["ready"])
    assert web.client.get("/healthz").status_code == 200
    assert web.client.get("/readyz").status_code == 200
    up["ready"] = False
    assert web.client.get("/readyz").status_code == 503
    assert web.client.get("/healthz").status_code == 200


def test_readyz_is_503_when_the_store_is_down(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    store = SqlStore.open(f"sqlite:///{tmp_path / 'db' / 'gpubot.db'}", lock_timeout_s=0.2)
    web = Harness(store)
    assert web.client.get("/readyz").status_code == 200
    store.engine.dispose()
    for name in ("gpubot.db", "gpubot.db-wal", "gpubot.db-shm"):
        (tmp_path / "db" / name).unlink(missing_ok=True)
    (tmp_path / "db").rmdir()
    response = web.client.get("/readyz")
    assert response.status_code == 503
    assert "unable to open" in response.json()["reason"]
    assert web.client.get("/healthz").status_code == 200
    assert web.post(payload()).status_code == 503  # and Alertmanager will retry
    store.close()


def scrape(web: Harness) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = web.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_metrics_show_the_counters_moving(web: Harness) -> None:
    before = scrape(web)
    assert before[("gpubot_webhook_auth_failures_total", ())] == 0
    assert before[("gpubot_incidents_open", ())] == 0
    assert before[("gpubot_diagnoses_posted_total", ())] == 0
    web.post(payload(truncatedAlerts=3))
    web.post(payload(truncatedAlerts=3))
    web.post(payload(), headers={})
    web.post_raw(b"{")
    web.metrics.incidents_open.set(2)
    web.metrics.diagnoses_posted.inc()
    web.metrics.actions.labels(action="cordon", outcome="succeeded").inc()
    after = scrape(web)
    assert after[("gpubot_signals_received_total", (("source", "alertmanager"),))] == 2
    assert after[("gpubot_signals_duplicate_total", (("source", "alertmanager"),))] == 1
    assert after[("gpubot_webhook_requests_total", (("code", "200"),))] == 2
    assert after[("gpubot_webhook_requests_total", (("code", "401"),))] == 1
    assert after[("gpubot_webhook_requests_total", (("code", "400"),))] == 1
    assert after[("gpubot_webhook_auth_failures_total", ())] == 1
    assert after[("gpubot_alerts_truncated_total", ())] == 6
    assert after[("gpubot_webhook_duration_seconds_count", ())] == 4
    assert after[("gpubot_incidents_open", ())] == 2
    assert after[("gpubot_diagnoses_posted_total", ())] == 1
    assert after[("gpubot_actions_total", (("action", "cordon"), ("outcome", "succeeded")))] == 1


def test_each_app_has_its_own_registry(store: SqlStore) -> None:
    one = build_app(store, WebSettings(bearer_token=TOKEN), lambda _s: None)
    two = build_app(store, WebSettings(bearer_token=TOKEN), lambda _s: None)
    assert one.state.metrics.registry is not two.state.metrics.registry
    TestClient(one).post("/alertmanager", json=payload(), headers=AUTH)
    sample = two.state.metrics.registry.get_sample_value
    assert sample("gpubot_webhook_requests_total", {"code": "200"}) is None


# ---- PostgreSQL: the store's limits are the webhook's limits --------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    if request.param == "sqlite":
        store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
        yield store
        store.close()
        return
    why = postgres_answers()
    if why:
        pytest.skip(why)
    with postgres_schema() as url:
        store = SqlStore.open(url)
        yield store
        store.close()


def test_text_at_the_stores_limits_is_stored_past_them_is_400(any_store: SqlStore) -> None:
    web = Harness(any_store)
    at_limit = alert(
        labels={"alertname": "A" * 200, "node": "n" * 253, "note": "ü€😀" * 50},
        annotations={"summary": "x" * 10_000},
        fingerprint="f" * 200,
    )
    assert web.post(payload(at_limit, truncatedAlerts=2**31 - 1)).status_code == 200
    for bad in [
        alert(labels={"alertname": "A" * 201}),
        alert(labels={"alertname": "A", "node": "n" * 254}),
        alert(labels={"alertname": "A", "x\x00": "y"}),
        alert(labels={"alertname": "A", "x": "\udc80"}),
        alert(fingerprint="f" * 201),
    ]:
        assert web.post(payload(bad)).status_code == 400, bad
    assert web.post(payload(truncatedAlerts=2**31)).status_code == 400
    assert web.post(payload(groupKey="g\x00")).status_code == 400
    assert any_store.count_signals() == 1


# ---- hardening: nothing accepted blocks intake, nothing waits without end --------------------

SURROGATE = b"\xed\xa0\x80"  # U+D800 written out as UTF-8 bytes: not UTF-8, not the \\ud800 escape


def with_raw(raw: bytes, where: str = "alertname", fingerprint: str = "raw") -> bytes:
    """A payload whose label `where` (alertname, node: they are columns of their own in the
    store; v: only in the payload) holds `raw` as it is, bytes and all (JSON cannot carry
    them escaped: that is the point)."""
    labels = {"alertname": "X", "node": "n", "v": "v", where: "@@"}
    body = json.dumps(payload(alert(labels=labels, fingerprint=fingerprint)))
    return body.encode().replace(b'"@@"', b'"' + raw + b'"')


def test_raw_surrogate_bytes_are_a_400_and_the_deliveries_after_them_go_on(
    any_store: SqlStore,
) -> None:
    """Finding 1: a label holding raw surrogate bytes got a 200 and could never be split,
    and the oldest delivery is split first, so nothing after it was ever split again."""
    web = Harness(any_store)
    response = web.post_raw(with_raw(SURROGATE), {**AUTH, "Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    assert "not valid UTF-8" in response.json()["error"]
    assert any_store.deliveries_waiting() == 0
    for fingerprint in ("after-1", "after-2"):
        assert web.post(payload(alert(fingerprint=fingerprint))).status_code == 200
    assert [s.fingerprint for s in web.handed] == ["after-1", "after-2"]
    assert (any_store.deliveries_waiting(), web.sample("gpubot_signal_handler_errors_total")) == (
        0,
        0,
    )


@pytest.fixture
def table_lock(any_store: SqlStore, tmp_path: Path) -> Iterator[Callable[[], None]]:
    """Holds a lock on `deliveries` that makes every write wait (SQLite: an exclusive
    transaction; PostgreSQL: LOCK TABLE), until the returned function is called, or 15 s
    have passed (so a test of code that waits without end ends)."""
    released = threading.Event()
    if any_store.engine.dialect.name == "sqlite":
        blocker = sqlite3.connect(tmp_path / "gpubot.db", check_same_thread=False)
        blocker.execute("BEGIN EXCLUSIVE")

        def release() -> None:
            if not released.is_set():
                released.set()
                blocker.rollback()
                blocker.close()

    else:
        connection = any_store.engine.connect()
        transaction = connection.begin()
        connection.exec_driver_sql("LOCK TABLE deliveries IN ACCESS EXCLUSIVE MODE")

        def release() -> None:
            if not released.is_set():
                released.set()
                transaction.rollback()
                connection.close()

    timer = threading.Timer(15, release)
    timer.start()
    try:
        yield release
    finally:
        timer.cancel()
        release()


def test_a_table_lock_is_a_503_with_retry_after_within_the_store_deadline(
    any_store: SqlStore, table_lock: Callable[[], None]
) -> None:
    """Finding 6: a webhook waited 19 s behind a table lock instead of answering 503."""
    web = Harness(any_store, web_settings=WebSettings(bearer_token=TOKEN, store_deadline_s=2.0))
    started = time.monotonic()
    first = web.post(payload())
    waited = time.monotonic() - started
    assert first.status_code == 503, first.text
    assert first.headers["retry-after"] == "5"
    assert waited < 5.0, f"answered after {waited:.1f} s"
    assert "gpubot" not in first.json()["error"] and "sqlite" not in first.json()["error"]
    # The write still hangs: the next delivery is told at once, not queued behind it (which
    # would take the 2 s deadline again; the margin is for a loaded CI machine).
    started = time.monotonic()
    assert web.post(payload(alert(fingerprint="second"))).status_code == 503
    assert time.monotonic() - started < 1.5
    table_lock()
    deadline = time.monotonic() + 10
    while True:  # Alertmanager retries a 5xx with the same payload
        retry = web.post(payload())
        if retry.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert retry.status_code == 200, retry.text
    web.split()
    assert any_store.count_signals() == 1  # a late commit of the first try is the same alert
    assert any_store.deliveries_waiting() == 0
    assert web.sample("gpubot_webhook_requests_total", code="503") >= 2


def test_readyz_says_the_store_is_unavailable_without_its_address(tmp_path: Path) -> None:
    """Finding 12: with the store down, /readyz showed anyone its URL (host, user, db)."""
    secret_parts = ["127.0.0.1", "gpubot_reader", "gpubot_prod", "postgresql", "5499"]
    down = SqlStore.open(
        "postgresql://gpubot_reader:pw@127.0.0.1:5499/gpubot_prod", lock_timeout_s=1, migrate=False
    )
    (tmp_path / "db").mkdir()
    path = tmp_path / "db" / "gpubot.db"
    gone = SqlStore.open(f"sqlite:///{path}", lock_timeout_s=0.2)
    gone.engine.dispose()
    for name in ("gpubot.db", "gpubot.db-wal", "gpubot.db-shm"):
        (tmp_path / "db" / name).unlink(missing_ok=True)
    (tmp_path / "db").rmdir()
    try:
        for store, hidden in ((down, secret_parts), (gone, [str(tmp_path), "sqlite"])):
            response = Harness(store).client.get("/readyz")
            assert response.status_code == 503
            reason = response.json()["reason"]
            assert reason.startswith("store unavailable: "), reason
            for part in hidden:
                assert part not in response.text, (part, reason)
        assert "connection refused" in Harness(down).client.get("/readyz").json()["reason"]
    finally:
        down.close()
        gone.close()


def test_metrics_can_ask_for_a_bearer_token_of_their_own(store: SqlStore) -> None:
    """Finding 12: /metrics was open to anyone; now a token closes it when one is set
    (off by default), and it opens nothing else, nor does the webhook's token open it."""
    assert Harness(store).client.get("/metrics").status_code == 200  # off by default
    web = Harness(store, web_settings=WebSettings(bearer_token=TOKEN, metrics_token="m-7c1e"))
    for headers in [{}, AUTH, {"Authorization": "Bearer m-7c1ex"}, {"Authorization": "m-7c1e"}]:
        refused = web.client.get("/metrics", headers=headers)
        assert refused.status_code == 401, headers
        assert "gpubot_" not in refused.text
    allowed = web.client.get("/metrics", headers={"Authorization": "bearer m-7c1e"})
    assert allowed.status_code == 200
    assert "gpubot_webhook_requests_total" in allowed.text
    metrics_auth = {"Authorization": "Bearer m-7c1e"}
    assert web.post(payload(), headers=metrics_auth).status_code == 401
    assert web.client.get("/healthz").status_code == 200  # probes need no token
    assert web.client.get("/readyz").status_code == 200
    assert "m-7c1e" not in repr(WebSettings(bearer_token=TOKEN, metrics_token="m-7c1e"))


# ---- fuzz: bad input is never a 5xx --------------------------------------------------------

NASTY = st.sampled_from(
    [
        "",
        "\x00",
        "a\x00b",
        "\ud800",
        "\udc80x",
        "x" * 201,
        "n" * 254,
        "gpu-a1:9400",
        "[::1]:94",
        "é😀",
    ]
)
TEXT = st.text(max_size=20) | NASTY
INTS = st.integers() | st.sampled_from([-1, 0, 2**31 - 1, 2**31, 2**63, 10**30])
JSONISH = st.recursive(
    st.none() | st.booleans() | INTS | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)
LABELS = st.dictionaries(
    st.sampled_from(["alertname", "node", "Hostname", "instance", "gpu", "xid"]) | TEXT,
    TEXT,
    max_size=6,
)
TIMES = st.sampled_from(
    ["2026-12-02T02:58:30Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "2026-12-02T02:58:30"]
)
STATUS = st.sampled_from(["firing", "resolved"])


def shaped(loose: Callable[[st.SearchStrategy[Any]], st.SearchStrategy[Any]]) -> Any:
    """Webhook-shaped payloads; `loose` lets a field also be any JSON (usually a 400)."""
    alerts = st.fixed_dictionaries(
        {"status": loose(STATUS), "labels": loose(LABELS)},
        optional={
            "annotations": loose(LABELS),
            "startsAt": loose(TIMES),
            "endsAt": loose(TIMES),
            "fingerprint": loose(TEXT),
            "generatorURL": loose(TEXT),
            "extra": JSONISH,
        },
    )
    return st.fixed_dictionaries(
        {"status": loose(STATUS), "alerts": loose(st.lists(alerts, max_size=5))},
        optional={
            "version": loose(TEXT),
            "groupKey": loose(TEXT),
            "truncatedAlerts": loose(INTS),
            "receiver": loose(TEXT),
            "groupLabels": loose(LABELS),
            "extra": JSONISH,
        },
    )


VALID_SHAPE = shaped(lambda strategy: strategy)  # valid types, nasty values: 200 or 400
ANY_SHAPE = shaped(lambda strategy: strategy | JSONISH)
BODIES = (
    VALID_SHAPE.map(lambda p: json.dumps(p).encode())
    | ANY_SHAPE.map(lambda p: json.dumps(p).encode())
    | JSONISH.map(lambda p: json.dumps(p).encode())
    | st.binary(max_size=300)
)


def test_fuzz_bad_input_is_never_a_5xx_and_the_app_keeps_working(any_store: SqlStore) -> None:
    store = any_store
    web = Harness(store)
    codes: dict[int, int] = {}

    @settings(
        max_examples=250,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=BODIES)
    def post(body: bytes) -> None:
        before = store.count_signals()
        response = web.post_raw(body)
        codes[response.status_code] = codes.get(response.status_code, 0) + 1
        assert response.status_code in (200, 400), (response.status_code, response.text, body)
        if response.status_code == 400:
            assert store.count_signals() == before
            assert response.json()["error"]

    post()
    assert codes.get(400, 0) > 0 and codes.get(200, 0) > 0, codes
    assert web.sample("gpubot_webhook_requests_total", code="500") == 0
    before = store.count_signals()
    final = web.post(payload(alert(fingerprint="after-the-fuzz")))
    assert final.json() == {"accepted": 1, "truncated_alerts": 0}
    assert store.count_signals() == before + 1


POISON = st.sampled_from(
    [
        SURROGATE,
        b"\xed\xbf\xbf",  # U+DFFF
        b"\xed\xa0\x80\xed\xb0\x80",  # a surrogate pair written as two 3-byte sequences
        b"\xc0\x80",  # overlong NUL
        b"\xf4\x90\x80\x80",  # past U+10FFFF
        b"\xff",
        b"\x00",
        b"\\u0000",
        b"\\ud800",
        b"\\udc80\\ud800",
        "é😀".encode(),
    ]
)
RAW_IN_A_LABEL = st.builds(
    with_raw,
    POISON | st.binary(max_size=12) | st.lists(POISON, max_size=3).map(b"".join),
    st.sampled_from(["alertname", "node", "v"]),
    st.text(max_size=8),
)


def test_fuzz_whatever_gets_a_200_is_split_or_quarantined_and_never_blocks_the_next(
    any_store: SqlStore,
) -> None:
    """Finding 1, fuzzed: webhook bodies with raw bytes in their texts (and every body the
    other fuzz sends). No 5xx; every delivery that got a 200 is split at once (or set
    aside), none is left waiting, and the one after the fuzz is split as always."""
    store = any_store
    quarantined: list[int] = []
    web = Harness(store)
    web.inbox.on_quarantine = lambda delivery_id, _why: quarantined.append(delivery_id)
    codes: dict[int, int] = {}

    @settings(
        max_examples=300,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=RAW_IN_A_LABEL | BODIES)
    def post(body: bytes) -> None:
        response = web.post_raw(body, {**AUTH, "Content-Type": "application/json"})
        codes[response.status_code] = codes.get(response.status_code, 0) + 1
        assert response.status_code in (200, 400), (response.status_code, response.text, body)
        assert store.deliveries_waiting() == 0, body  # split behind the 200, or set aside
        assert web.sample("gpubot_signal_handler_errors_total") == 0, body

    post()
    assert codes.get(400, 0) > 0 and codes.get(200, 0) > 0, codes
    assert quarantined == []  # the door refused everything that could not be split
    assert web.sample("gpubot_webhook_requests_total", code="500") == 0
    final = web.post(payload(alert(fingerprint="after-the-raw-fuzz")))
    assert final.status_code == 200
    assert web.handed[-1].fingerprint == "after-the-raw-fuzz"


# ---- a real server ------------------------------------------------------------------------


@pytest.fixture
def served(web: Harness) -> Iterator[str]:
    config = uvicorn.Config(web.app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped before it started"
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_through_a_real_uvicorn_server(served: str, web: Harness) -> None:
    def oversized() -> Iterator[bytes]:
        for _ in range(160):
            yield b"x" * 65536

    with httpx.Client(base_url=served, timeout=10) as client:
        body = json.dumps(payload()).encode()
        response = client.post(
            "/alertmanager",
            content=body,
            headers={**AUTH, "Content-Type": "application/json", "User-Agent": "Alertmanager/0.28"},
        )
        assert response.status_code == 200
        assert response.json() == {"accepted": 1, "truncated_alerts": 0}
        assert web.store.count_signals() == 1
        assert client.post("/alertmanager", content=body, headers=AUTH).status_code == 200
        assert web.store.count_signals() == 1  # the same alert again: no second signal
        assert client.post("/alertmanager", content=body).status_code == 401
        chunked = client.post("/alertmanager", content=oversized(), headers=AUTH)
        assert chunked.status_code == 413
        assert client.post("/alertmanager", content=TEN_MIB, headers=AUTH).status_code == 413
        assert client.get("/readyz").status_code == 200
        assert "gpubot_webhook_requests_total" in client.get("/metrics").text
        assert client.get("/alertmanager").status_code == 405
        # Still serving after the refusals, on a fresh connection too.
        fresh = payload(alert(fingerprint="second"))
        assert client.post("/alertmanager", json=fresh, headers=AUTH).json()["accepted"] == 1
    assert web.store.count_signals() == 2


def test_concurrent_deliveries_of_the_same_alert_store_it_once(served: str, web: Harness) -> None:
    """Alertmanager replicas deliver the same group at the same moment, and retry every 5xx
    as Alertmanager does. Whatever the interleaving: every first try is a 200, and the alert
    is stored once and handed on once."""
    first_answers: list[int] = []
    final_answers: list[int] = []

    def deliver() -> None:
        with httpx.Client(base_url=served, timeout=10) as client:
            for attempt in range(3):
                response = client.post("/alertmanager", json=payload(), headers=AUTH)
                if attempt == 0:
                    first_answers.append(response.status_code)
                if response.status_code < 500:
                    break
            final_answers.append(response.status_code)

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert first_answers == [200] * 4, first_answers
    assert final_answers == [200] * 4
    assert web.store.count_signals() == 1
    assert len(web.handed) == 1


# ---- a real server: nothing holds a connection for good -----------------------------------


@pytest.fixture
def strict_server(store: SqlStore) -> Iterator[tuple[Harness, int]]:
    """The app behind `gpubot serve`'s server configuration, with one-second deadlines."""
    web = Harness(store, web_settings=WebSettings(bearer_token=TOKEN, body_timeout_s=1.0))
    server = uvicorn.Server(server_config(web.app, "127.0.0.1", 0, header_timeout_s=1.0))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield web, server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _until_closed(sockets: list[socket.socket], within_s: float) -> dict[socket.socket, bytes]:
    """What each socket received until the server closed it; raises if one is still open
    after `within_s`."""
    received = {sock: b"" for sock in sockets}
    open_ = set(sockets)
    deadline = time.monotonic() + within_s
    with selectors.DefaultSelector() as selector:
        for sock in sockets:
            selector.register(sock, selectors.EVENT_READ)
        while open_:
            left = deadline - time.monotonic()
            assert left > 0, f"{len(open_)} of {len(sockets)} connections still open"
            for key, _ in selector.select(timeout=left):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    chunk = sock.recv(65536)
                except ConnectionResetError:
                    chunk = b""
                received[sock] += chunk
                if not chunk:
                    selector.unregister(sock)
                    open_.discard(sock)
    return received


def test_slow_bodies_and_slow_headers_are_cut_and_the_server_goes_on(
    strict_server: tuple[Harness, int],
) -> None:
    """Finding 6: incomplete bodies were held for good (300 of 300 slow connections still
    open after 20 s). Each is now answered 408 and closed once its deadline passes; headers
    that never end, and a connection that sends nothing, are closed too."""
    web, port = strict_server
    slow_bodies, slow_headers, silent = [], [], []
    for _ in range(100):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(
            b"POST /alertmanager HTTP/1.1\r\nHost: gpubot\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n".encode()
            + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        slow_bodies.append(sock)
    for _ in range(50):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /alertmanager HTTP/1.1\r\nHost: gpubot\r\nX-Slow: ")
        slow_headers.append(sock)
    for _ in range(10):
        silent.append(socket.create_connection(("127.0.0.1", port)))
    everyone = slow_bodies + slow_headers + silent
    try:
        received = _until_closed(everyone, within_s=8.0)
    finally:
        for sock in everyone:
            sock.close()
    assert all(received[sock].startswith(b"HTTP/1.1 408 ") for sock in slow_bodies)
    assert all(received[sock] == b"" for sock in slow_headers + silent)
    assert web.sample("gpubot_webhook_requests_total", code="408") == 100
    assert web.store.deliveries_waiting() == 0 and web.store.count_signals() == 0
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        assert client.post("/alertmanager", json=payload(), headers=AUTH).status_code == 200
    assert web.store.count_signals() == 1
