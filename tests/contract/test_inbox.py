"""The webhook's inbox (`bot.sources.alertmanager.inbox`, `Store.add_delivery` /
`split_deliveries`): a delivery stored as received is split into signals in the order it
came, exactly once — also when two replicas split at the same moment, and after a crash that
left it unsplit."""

from __future__ import annotations

import json
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.model import Signal
from bot.process.telemetry import Telemetry
from bot.sources.alertmanager.inbox import SPLIT_BATCH, SPLIT_SIGNALS, Inbox
from bot.store.sql import SqlStore
from tests.helpers.processes import NODE, cluster, running_gpubot, simulator, wait_for, xid_alert
from tests.helpers.stores import STORE_KINDS, open_store

T0 = datetime(2026, 12, 3, 3, 0, tzinfo=UTC)
NODE_LABELS = ["node", "Hostname", "instance"]


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


def body(*fingerprints: str, status: str = "firing", node: str = "gpu-a1") -> bytes:
    alerts = [
        {
            "status": status,
            "labels": {"alertname": "GPUXidError", "Hostname": node, "xid": "79"},
            "annotations": {},
            "startsAt": "2026-12-03T02:58:30Z",
            "endsAt": "0001-01-01T00:00:00Z" if status == "firing" else "2026-12-03T03:05:00Z",
            "fingerprint": fingerprint,
        }
        for fingerprint in fingerprints
    ]
    payload: dict[str, Any] = {"version": "4", "status": status, "alerts": alerts}
    return json.dumps(payload).encode()


def sample(telemetry: Telemetry, name: str, **labels: str) -> float:
    return telemetry.registry.get_sample_value(name, labels) or 0.0


def test_deliveries_are_split_in_order_once_and_repeats_are_counted(store: SqlStore) -> None:
    telemetry = Telemetry()
    inbox = Inbox(store, NODE_LABELS, telemetry)
    store.add_delivery("alertmanager", body("a", "b"), T0)
    store.add_delivery("alertmanager", body("b", "c"), T0 + timedelta(seconds=1))
    store.add_delivery("alertmanager", body("a", status="resolved"), T0 + timedelta(seconds=2))
    new = inbox.split()
    assert [(s.fingerprint, s.status) for s in new] == [
        ("a", "firing"),
        ("b", "firing"),
        ("c", "firing"),
        ("a", "resolved"),
    ]
    assert store.deliveries_waiting() == 0
    assert sample(telemetry, "gpubot_signals_received_total", source="alertmanager") == 5
    assert sample(telemetry, "gpubot_signals_duplicate_total", source="alertmanager") == 1
    assert [(s.fingerprint, s.count) for s in store.firing_alerts()] == [("c", 2)]
    assert inbox.split() == []  # nothing is split twice


def test_more_deliveries_than_one_batch_are_all_split(store: SqlStore) -> None:
    for index in range(SPLIT_BATCH * 2 + 3):
        store.add_delivery("alertmanager", body(f"f{index}"), T0)
    new = Inbox(store, NODE_LABELS).split()
    assert [s.fingerprint for s in new] == [f"f{i}" for i in range(SPLIT_BATCH * 2 + 3)]
    assert store.count_signals() == SPLIT_BATCH * 2 + 3


def backlog(store: SqlStore, signals: int, per_delivery: int = 250) -> list[str]:
    """Deliveries of `per_delivery` firing alerts each, stored as the webhook stores them
    while nothing splits them (the worker busy, or the process down): their fingerprints."""
    fingerprints = [f"f{i}" for i in range(signals)]
    for start in range(0, signals, per_delivery):
        store.add_delivery("alertmanager", body(*fingerprints[start : start + per_delivery]), T0)
    return fingerprints


def test_a_large_backlog_is_split_a_bounded_part_at_a_time_and_nothing_is_lost(
    store: SqlStore,
) -> None:
    """Issue 15, 4: a backlog is never split, nor handed to diagnosis, at once."""
    fingerprints = backlog(store, SPLIT_SIGNALS * 2 + 750)
    inbox = Inbox(store, NODE_LABELS)
    parts = []
    while part := inbox.split():
        parts.append(part)
    assert [(len(p), inbox.more_waiting(p)) for p in parts] == [
        (SPLIT_SIGNALS, True),
        (SPLIT_SIGNALS, True),
        (750, False),
    ]
    assert [s.fingerprint for p in parts for s in p] == fingerprints
    assert (store.deliveries_waiting(), store.count_signals()) == (0, len(fingerprints))


def test_a_delivery_that_cannot_be_split_is_dropped_and_counted_the_rest_go_on(
    store: SqlStore,
) -> None:
    telemetry = Telemetry()
    store.add_delivery("alertmanager", body("a"), T0)
    store.add_delivery("alertmanager", b'{"status": "firing"}', T0)  # stored by an older gpubot
    store.add_delivery("carrier-pigeon", body("x"), T0)
    store.add_delivery("alertmanager", body("b"), T0)
    new = Inbox(store, NODE_LABELS, telemetry).split()
    assert [s.fingerprint for s in new] == ["a", "b"]
    assert sample(telemetry, "gpubot_deliveries_dropped_total") == 2
    assert store.deliveries_waiting() == 0


def poisoned(fingerprint: str) -> bytes:
    """A body an older gpubot let in: a label holding raw surrogate bytes (U+D800 written
    out as UTF-8), which Python's JSON reader turns into a string no database can hold."""
    return body(fingerprint).replace(b'"xid": "79"', b'"xid": "\xed\xa0\x80"')


def test_a_delivery_that_cannot_be_split_is_quarantined_and_never_blocks_the_ones_behind(
    store: SqlStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Finding 1: splitting such a delivery raised, and since the oldest delivery is always
    split first, no delivery after it was ever split again, across sweeps and restarts."""
    telemetry = Telemetry()
    told: list[tuple[int, str]] = []
    inbox = Inbox(store, NODE_LABELS, telemetry, on_quarantine=lambda i, why: told.append((i, why)))
    poison = store.add_delivery("alertmanager", poisoned("p"), T0)
    store.add_delivery("alertmanager", body("a"), T0 + timedelta(seconds=1))
    with caplog.at_level("ERROR", logger="gpubot.inbox"):
        new = inbox.split()
    assert [s.fingerprint for s in new] == ["a"]
    assert [delivery_id for delivery_id, _ in told] == [poison]
    assert "UTF-8" in told[0][1]
    assert f"delivery {poison} cannot be split" in caplog.text
    assert sample(telemetry, "gpubot_deliveries_quarantined_total") == 1
    assert store.deliveries_waiting() == 0
    [kept] = store.quarantined_deliveries()
    assert (kept.id, kept.source, kept.reason) == (poison, "alertmanager", told[0][1])
    # The next split, and the next process on the same database, pass it over.
    store.add_delivery("alertmanager", body("b"), T0 + timedelta(seconds=2))
    assert [s.fingerprint for s in inbox.split()] == ["b"]
    again = SqlStore.open(store.engine.url.render_as_string(hide_password=False))
    try:
        again.add_delivery("alertmanager", body("c"), T0 + timedelta(seconds=3))
        assert [s.fingerprint for s in Inbox(again, NODE_LABELS).split()] == ["c"]
        assert [q.id for q in again.quarantined_deliveries()] == [poison]
    finally:
        again.close()
    assert len(told) == 1  # told once, not at every split
    assert [(s.fingerprint, s.count) for s in store.firing_alerts()] == [("c", 3)]


def test_signals_the_database_refuses_quarantine_their_delivery_alone(store: SqlStore) -> None:
    """The safety net behind the door: when the write of a batch fails on one delivery's
    signals, that delivery is found and set aside; the others in the batch are stored."""
    store.add_delivery("alertmanager", body("a"), T0)
    bad = store.add_delivery("alertmanager", b"refused by the database", T0)
    store.add_delivery("alertmanager", body("b"), T0)
    inbox = Inbox(store, NODE_LABELS)

    def split(source: str, raw: bytes) -> list[Signal]:
        if raw == b"refused by the database":
            # A value no driver can encode: what a lone surrogate did before the door.
            [signal] = inbox._signals(source, body("x"))
            return [signal.model_copy(update={"name": "GPU\ud800"})]
        return inbox._signals(source, raw)

    taken = store.split_deliveries(split, limit=10)
    assert [s.fingerprint for s in taken.signals] == ["a", "b"]
    assert [delivery_id for delivery_id, _ in taken.quarantined] == [bad]
    assert taken.quarantined[0][1].startswith("UnicodeEncodeError: ")
    assert (taken.dropped, store.deliveries_waiting(), store.count_signals()) == (1, 0, 2)


def test_two_replicas_splitting_at_once_store_each_signal_once(
    request: pytest.FixtureRequest, store: SqlStore
) -> None:
    """Two processes' inboxes (two engines on one database) split the same deliveries at
    the same moment: every signal is stored once, and handed on by exactly one of them."""
    other = SqlStore.open(store.engine.url.render_as_string(hide_password=False))
    request.addfinalizer(other.close)
    for index in range(60):
        store.add_delivery("alertmanager", body(f"f{index}", f"g{index}"), T0)
    found: list[list[str]] = []
    barrier = threading.Barrier(4)

    def split(on: SqlStore) -> None:
        barrier.wait()
        found.append([s.fingerprint for s in Inbox(on, NODE_LABELS).split()])

    threads = [threading.Thread(target=split, args=(s,)) for s in (store, other, store, other)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    handed = [fingerprint for one in found for fingerprint in one]
    assert sorted(handed) == sorted(f"{p}{i}" for i in range(60) for p in "fg")
    assert store.count_signals() == 120
    assert store.deliveries_waiting() == 0


def test_a_delivery_a_crash_left_unsplit_is_diagnosed_at_the_next_start(tmp_path: Path) -> None:
    """The 200 went out, then the process died before its worker split the delivery: the
    next `gpubot serve` on the same store splits it first and opens the incident."""
    sim_store = cluster()
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    store = SqlStore.open(url)
    try:
        store.add_delivery(
            "alertmanager", json.dumps(xid_alert(sim_store, NODE)).encode(), datetime.now(UTC)
        )
        with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
            served = bot.start("gpubot-0")
            incident = wait_for(
                "the incident",
                lambda: [i for i in store.incidents(node=NODE) if i.rule == "gpu-fell-off-bus"],
                30,
                bot,
            )
            assert len(incident) == 1
            assert store.deliveries_waiting() == 0
            assert [s.node for s in store.signals() if s.source == "alertmanager"] == [NODE]
            # What the pipeline did shows on /metrics, from the one registry serve builds
            # (the open-incident gauge is set as the pass ends).
            expected = (
                'gpubot_signals_received_total{source="alertmanager"} 1.0',
                "gpubot_diagnoses_posted_total 1.0",
                "gpubot_incidents_open 1.0",
            )

            def metrics() -> str:
                with urllib.request.urlopen(f"{served.url}/metrics", timeout=10) as response:
                    return str(response.read().decode())

            wait_for("the metrics", lambda: all(line in metrics() for line in expected), 10, bot)
    finally:
        store.close()


def test_a_backlog_larger_than_one_split_left_by_a_crash_is_all_taken_at_the_next_start(
    tmp_path: Path,
) -> None:
    """The worker splits a backlog a part at a time and asks again until none waits: the
    last delivery of a backlog past one split's bound is diagnosed without waiting for the
    sweep."""
    sim_store = cluster()
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    store = SqlStore.open(url)
    try:
        fingerprints = backlog(store, SPLIT_SIGNALS + 1000, per_delivery=500)
        store.add_delivery(
            "alertmanager", json.dumps(xid_alert(sim_store, NODE)).encode(), datetime.now(UTC)
        )
        with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
            bot.start("gpubot-0")
            wait_for(
                "the incident of the last delivery",
                lambda: [i for i in store.incidents(node=NODE) if i.rule == "gpu-fell-off-bus"],
                60,
                bot,
            )
            assert store.deliveries_waiting() == 0
            assert store.count_signals() == len(fingerprints) + 1
    finally:
        store.close()
