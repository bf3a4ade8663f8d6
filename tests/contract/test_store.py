"""The Store contract, run on SQLite and on PostgreSQL: what is acknowledged is kept once,
incidents group and move only as the state machine allows, and an approval acts once."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from bot.errors import NotFound, StateChanged, StoreSchemaError, StoreUnavailable
from bot.incidents.lifecycle import IllegalTransition
from bot.model import (
    Incident,
    IncidentState,
    Recorded,
    Signal,
    TimelineEntry,
    Vote,
)
from bot.store import migrating
from bot.store.sql import SqlStore
from bot.store.tables import metadata
from tests.helpers.builders import (
    T0,
    S,
    diagnosis,
    request_for,
    signal,
)
from tests.helpers.stores import STORE_KINDS, open_store


def _opened(recorded: Recorded) -> tuple[Incident, bool]:
    """The incident, and whether recording opened it (new, or reopened)."""
    return recorded.incident, recorded.change in ("new", "reopened")


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SqlStore]:
    with open_store(request.param, tmp_path) as opened:
        yield opened


def test_the_same_alert_delivered_twice_is_one_signal(store: SqlStore) -> None:
    assert store.add_signals([signal(), signal("f2")], T0) == [True, True]
    # Alertmanager retried, repeated, and a second replica sent it too.
    assert store.add_signals([signal(), signal()], T0 + timedelta(seconds=30)) == [False, False]
    assert store.add_signals([signal(status="resolved")], T0 + timedelta(minutes=5)) == [True]
    assert store.count_signals() == 3
    kept = store.signals(node="gpu-a1")
    assert [(s.fingerprint, s.status) for s in kept] == [
        ("f1", "firing"),
        ("f2", "firing"),
        ("f1", "resolved"),
    ]
    assert kept[0].labels == {"xid": "79"} and kept[0].starts_at == T0


def test_diagnoses_group_by_cluster_node_and_rule(store: SqlStore) -> None:
    first, new = _opened(store.record_diagnosis("prod", diagnosis(), T0, reopen_window_s=3600))
    assert new and first.state is S.OPEN and first.node == "gpu-a1"
    again, new_again = _opened(
        store.record_diagnosis("prod", diagnosis(), T0 + timedelta(minutes=1), reopen_window_s=3600)
    )
    assert (again.id, new_again) == (first.id, False)
    other_rule = store.record_diagnosis("prod", diagnosis("ecc-double-bit"), T0, 3600).incident
    other_cluster = store.record_diagnosis("staging", diagnosis(), T0, 3600).incident
    pool_wide = store.record_diagnosis("prod", diagnosis("pool-wide", node=None), T0, 3600).incident
    ids = {first.id, other_rule.id, other_cluster.id, pool_wide.id}
    assert len(ids) == 4
    assert [i.id for i in store.incidents(node="gpu-a1")] == [
        first.id,
        other_rule.id,
        other_cluster.id,
    ]
    assert [i.id for i in store.incidents_for_signal("f1")] == sorted(ids, key=int)
    assert store.diagnosis(first.id) == diagnosis()


def test_every_legal_move_is_a_timeline_entry_and_illegal_ones_change_nothing(
    store: SqlStore,
) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.transition(incident.id, S.DIAGNOSED, "gpubot", T0)
    store.transition(incident.id, S.AWAITING_APPROVAL, "gpubot", T0, "drain proposed")
    with pytest.raises(IllegalTransition, match="cannot go from awaiting_approval to executing"):
        store.transition(incident.id, S.EXECUTING, "U1", T0)
    assert store.incident(incident.id).state is S.AWAITING_APPROVAL
    store.transition(incident.id, S.APPROVED, "U1", T0, data={"request": "r1"})
    entries = store.timeline(incident.id)
    assert [(e.kind, e.actor, e.data.get("to")) for e in entries] == [
        ("state", "gpubot", "open"),
        ("state", "gpubot", "diagnosed"),
        ("state", "gpubot", "awaiting_approval"),
        ("state", "U1", "approved"),
    ]
    assert entries[2].text == "drain proposed" and entries[3].data["request"] == "r1"
    assert all(e.at.tzinfo is not None for e in entries)
    with pytest.raises(NotFound):
        store.transition("999999", S.DIAGNOSED, "gpubot", T0)


def test_firing_again_soon_after_resolve_reopens_later_opens_anew(store: SqlStore) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    resolved = store.transition(incident.id, S.RESOLVED, "gpubot", T0 + timedelta(minutes=10))
    assert resolved.resolved_at == T0 + timedelta(minutes=10)
    reopened, new = _opened(
        store.record_diagnosis("prod", diagnosis(), T0 + timedelta(minutes=40), 3600)
    )
    assert new and reopened.id == incident.id
    assert reopened.reopened == 1 and reopened.state is S.OPEN and reopened.resolved_at is None
    assert store.timeline(incident.id)[-1].text.endswith("reopened")

    store.transition(incident.id, S.RESOLVED, "gpubot", T0 + timedelta(hours=1))
    later = store.record_diagnosis("prod", diagnosis(), T0 + timedelta(hours=3), 3600).incident
    assert later.id != incident.id and later.reopened == 0


def test_one_vote_per_person_and_request(store: SqlStore) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.add_request(request_for(incident.id))
    assert store.request("r1") == request_for(incident.id)
    assert store.requests(incident.id) == [request_for(incident.id)]
    assert store.add_vote(Vote(request_id="r1", approver="U1", at=T0))
    assert not store.add_vote(Vote(request_id="r1", approver="U1", at=T0 + timedelta(seconds=1)))
    assert store.add_vote(Vote(request_id="r1", approver="U2", at=T0 + timedelta(seconds=2)))
    assert [v.approver for v in store.votes("r1")] == ["U1", "U2"]
    with pytest.raises(NotFound):
        store.request("nope")


def test_a_signed_request_is_taken_once_by_whichever_replica_notes_it_first(
    request: pytest.FixtureRequest, store: SqlStore
) -> None:
    """Issue 31, item 7: a signed Slack request (its signature's digest) is taken by the
    first replica that notes it, as a vote is (a uniqueness constraint, the first INSERT
    wins); every other replica, and the same one restarted, is told it is a replay until the
    request has left Slack's 5-minute window, when it is forgotten."""
    other = SqlStore.open(store.engine.url.render_as_string(hide_password=False))
    request.addfinalizer(other.close)
    window = timedelta(minutes=5, seconds=30)
    digest = "a" * 64
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def note(replica: SqlStore) -> None:
        barrier.wait()
        results.append(replica.note_signed_request(digest, T0, T0 - window))

    threads = [threading.Thread(target=note, args=((store, other)[i % 2],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]
    later = T0 + timedelta(minutes=5)
    assert not other.note_signed_request(digest, T0, later - window)  # still in the window
    assert other.note_signed_request("b" * 64, later, later - window)  # another request
    # Once its timestamp has left the window Slack's verification refuses it anyway: the row
    # is deleted by the next request noted, and the store does not grow with the traffic.
    gone = T0 + window + timedelta(seconds=1)
    assert store.note_signed_request("c" * 64, gone, gone - window)
    assert store.note_signed_request(digest, T0, gone - window)


def test_an_approval_is_claimed_for_execution_exactly_once_under_a_race(store: SqlStore) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.add_request(request_for(incident.id))
    results: list[bool] = []
    barrier = threading.Barrier(8)

    def claim(who: int) -> None:
        barrier.wait()
        results.append(store.claim_execution("r1", f"replica-{who}", T0))

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]
    assert [e.request_id for e in store.unfinished_executions()] == ["r1"]
    store.finish_execution("r1", "succeeded", "cordoned", T0 + timedelta(seconds=3))
    done = store.execution("r1")
    assert done is not None and done.outcome == "succeeded"
    assert done.finished_at == T0 + timedelta(seconds=3)
    assert store.unfinished_executions() == []
    assert not store.claim_execution("r1", "after-restart", T0 + timedelta(minutes=1))


def test_a_stale_execution_is_taken_over_by_exactly_one_and_a_live_one_by_none(
    store: SqlStore,
) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.add_request(request_for(incident.id))
    assert store.claim_execution("r1", "replica-0", T0)
    later = T0 + timedelta(seconds=30)
    assert store.beat("r1", "replica-0", later)
    assert not store.beat("r1", "replica-1", later)  # only the owner beats
    # Alive: the heartbeat is newer than the cut-off.
    assert not store.take_over_execution("r1", "replica-1", later, T0 + timedelta(seconds=10))
    # Dead: eight replicas race for it, one wins.
    results: list[bool] = []
    barrier = threading.Barrier(8)
    cutoff = T0 + timedelta(minutes=5)

    def take(who: int) -> None:
        barrier.wait()
        results.append(store.take_over_execution("r1", f"new-{who}", cutoff, cutoff))

    threads = [threading.Thread(target=take, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 7 + [True]
    [owner] = store.unfinished_executions()
    assert owner.executor.startswith("new-") and owner.heartbeat_at == cutoff
    assert not store.beat("r1", "replica-0", cutoff)  # the old owner learns it lost it
    store.finish_execution("r1", "succeeded", "drained", cutoff)
    assert not store.take_over_execution("r1", owner.executor, cutoff, cutoff + timedelta(days=1))


def test_the_same_alert_stored_by_two_replicas_at_once_is_one_signal(store: SqlStore) -> None:
    """Two replicas take one Alertmanager delivery at the same moment: one stores it, the
    other is told it was known, and neither fails."""
    signal = Signal(
        source="alertmanager",
        name="GPUXidError",
        status="firing",
        node="gpu-a1",
        fingerprint="f00d",
        starts_at=T0,
        labels={"xid": "79"},
    )
    results: list[list[bool]] = []
    barrier = threading.Barrier(6)

    def deliver() -> None:
        barrier.wait()
        results.append(store.add_signals([signal], T0))

    threads = [threading.Thread(target=deliver) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [[False]] * 5 + [[True]]
    assert len(store.signals("gpu-a1")) == 1


def test_two_replicas_diagnosing_the_same_alert_share_one_incident(store: SqlStore) -> None:
    ids: list[str] = []
    barrier = threading.Barrier(6)

    def record() -> None:
        barrier.wait()
        ids.append(store.record_diagnosis("prod", diagnosis(), T0, 3600).incident.id)

    threads = [threading.Thread(target=record) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ids) == 6 and len(set(ids)) == 1
    assert len(store.incidents()) == 1


def test_timeline_entries_keep_their_data(store: SqlStore) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.append(
        TimelineEntry(
            incident=incident.id,
            at=T0 + timedelta(seconds=5),
            actor="gpubot",
            kind="action-progress",
            text="evicted 37/110",
            data={"evicted": 37, "total": 110, "blocked_by": ["train-job-pdb"]},
        )
    )
    last = store.timeline(incident.id)[-1]
    assert last.data == {"evicted": 37, "total": 110, "blocked_by": ["train-job-pdb"]}
    assert last.at == T0 + timedelta(seconds=5)


def test_the_migrations_build_exactly_the_schema_the_code_uses(store: SqlStore) -> None:
    with store.engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), metadata)
    assert diff == []


# ---- bad databases: SQLite files are enough to show the errors -----------------------------


def test_a_locked_database_is_unavailable_and_nothing_is_half_written(tmp_path: Path) -> None:
    path = tmp_path / "gpubot.db"
    store = SqlStore.open(f"sqlite:///{path}", lock_timeout_s=0.2)
    blocker = sqlite3.connect(path)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreUnavailable, match="locked"):
            store.add_signals([signal(), signal("f2")], T0)
    finally:
        blocker.rollback()
        blocker.close()
    assert store.count_signals() == 0
    assert store.add_signals([signal()], T0) == [True]


def test_a_database_that_is_down_is_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1/"):
        SqlStore.open("postgresql://postgres@127.0.0.1:1/test", lock_timeout_s=1)


def test_an_unknown_schema_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    SqlStore.open(url).close()
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(StoreSchemaError, match="schema 9999, which this gpubot does not know"):
        SqlStore.open(url)


def test_someone_elses_database_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'other.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE customers (id INTEGER)"))
    engine.dispose()
    with pytest.raises(StoreSchemaError, match="no gpubot schema version"):
        SqlStore.open(url)


def kinds(store: SqlStore, node: str | None = None, **bounds: int) -> list[tuple[str, int]]:
    """What a diagnosis is handed: (newest fingerprint, how many fire) per kind of alert."""
    return [(s.fingerprint, s.count) for s in store.firing_alerts(node, **bounds)]


def on_gpu(fingerprint: str, gpu: str, xid: str = "79", node: str = "gpu-a1") -> Signal:
    return signal(fingerprint, node=node).model_copy(update={"gpu": gpu, "labels": {"xid": xid}})


def test_firing_alerts_are_counted_per_kind_and_resolved_ones_leave(store: SqlStore) -> None:
    store.add_signals([signal("a"), signal("b"), signal("c")], T0)
    store.add_signals([signal("b", status="resolved")], T0 + timedelta(minutes=1))
    assert kinds(store) == [("c", 2)]
    # b fires again later (a new startsAt): counted again, and the newest of its kind.
    again = signal("b").model_copy(update={"starts_at": T0 + timedelta(minutes=5)})
    store.add_signals([again], T0 + timedelta(minutes=5))
    assert kinds(store) == [("b", 3)]
    # A retry of b's old resolve changes nothing: it was not the last word.
    store.add_signals([signal("b", status="resolved")], T0 + timedelta(minutes=6))
    assert kinds(store) == [("b", 3)]
    # Another GPU, another Xid, another node: kinds of their own, oldest first.
    store.add_signals(
        [on_gpu("g2", "2"), on_gpu("g2-48", "2", xid="48"), signal("x", node="gpu-a2")],
        T0 + timedelta(minutes=7),
    )
    assert kinds(store) == [("b", 3), ("g2", 1), ("g2-48", 1), ("x", 1)]
    assert kinds(store, "gpu-a2") == [("x", 1)]
    [newest] = [s for s in store.firing_alerts() if s.fingerprint == "g2-48"]
    assert (newest.node, newest.gpu, newest.labels) == ("gpu-a1", "2", {"xid": "48"})
    resolved = [
        s.model_copy(update={"status": "resolved"})
        for s in (signal("a"), again, signal("c"), on_gpu("g2", "2"), on_gpu("g2-48", "2", "48"))
    ]
    store.add_signals(resolved, T0 + timedelta(minutes=8))
    assert kinds(store) == [("x", 1)]
    store.ping()


def test_a_resolve_of_an_alert_never_seen_firing_is_kept_and_counts_nothing(
    store: SqlStore,
) -> None:
    """Alertmanager sends the resolve of an alert that fired before gpubot listened."""
    assert store.add_signals([signal("before-us", status="resolved")], T0) == [True]
    assert kinds(store) == []
    store.add_signals([signal("a")], T0 + timedelta(minutes=1))
    assert kinds(store) == [("a", 1)]


def test_thousands_alike_on_one_node_are_one_kind_read_once(store: SqlStore) -> None:
    """An alert storm on one node costs the reader one payload, not one per alert."""
    store.add_signals([signal(f"storm-{i}") for i in range(3000)], T0)
    store.add_signals([signal("elsewhere", node="gpu-a2")], T0 + timedelta(minutes=1))
    assert kinds(store) == [("storm-2999", 3000), ("elsewhere", 1)]


def test_past_the_bounds_the_newest_kinds_are_the_ones_kept(store: SqlStore) -> None:
    """Thousands of old warnings must not hide the Xid that fired a minute ago."""
    store.add_signals([on_gpu(f"old-{i}", str(i)) for i in range(5)], T0)
    store.add_signals([on_gpu("other", "0", node="gpu-a2")], T0 + timedelta(seconds=30))
    store.add_signals([on_gpu("new-xid", "7", xid="48")], T0 + timedelta(minutes=1))
    assert kinds(store, per_node=3) == [("old-3", 1), ("old-4", 1), ("other", 1), ("new-xid", 1)]
    assert kinds(store, limit=3) == [("old-4", 1), ("other", 1), ("new-xid", 1)]


def test_an_upgraded_database_counts_the_alerts_it_already_had(tmp_path: Path) -> None:
    """Alerts stored before the aggregated view existed are in it after the upgrade."""
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    engine = sa.create_engine(url)
    migrating.upgrade(engine, "0006")
    payload = {
        "source": "alertmanager",
        "name": "GPUXidError",
        "node": "gpu-a1",
        "gpu": "3",
        "labels": {"xid": "79"},
        "fingerprint": "",
    }
    with engine.begin() as connection:
        for id_, fingerprint, status in [
            (1, "a", "firing"),
            (2, "b", "firing"),
            (3, "a", "resolved"),
        ]:
            connection.execute(
                sa.text(
                    "INSERT INTO signals (id, dedup_key, fingerprint, source, name, status, node,"
                    " received_at, truncated_alerts, payload) VALUES (:id, :key, :fp,"
                    " 'alertmanager', 'GPUXidError', :status, 'gpu-a1', '2026-12-03 03:00:00', 0,"
                    " :payload)"
                ),
                {
                    "id": id_,
                    "key": f"{fingerprint}|{status}",
                    "fp": fingerprint,
                    "status": status,
                    "payload": json.dumps(
                        {**payload, "status": status, "fingerprint": fingerprint}
                    ),
                },
            )
    migrating.upgrade(engine)
    engine.dispose()
    store = SqlStore.open(url)
    try:
        assert [(s.fingerprint, s.gpu, s.count) for s in store.firing_alerts()] == [("b", "3", 1)]
    finally:
        store.close()


def test_the_outbox_keeps_each_message_once_and_in_order_per_group(store: SqlStore) -> None:
    post = store.outbox_put("inc-1/post", "inc-1", "chat.postMessage", {"text": "a"}, T0)
    again = store.outbox_put("inc-1/post", "inc-1", "chat.postMessage", {"text": "b"}, T0)
    assert again.id == post.id and again.payload == {"text": "a"}
    update = store.outbox_put(
        "inc-1/update-1", "inc-1", "chat.update", {"text": "c"}, T0, refers_to="inc-1/post"
    )
    other = store.outbox_put("inc-2/post", "inc-2", "chat.postMessage", {"text": "d"}, T0)
    # The update waits for its message; another incident's message does not.
    assert [i.key for i in store.outbox_due(T0)] == ["inc-1/post", "inc-2/post"]

    store.outbox_retry(post.id, T0 + timedelta(seconds=30), "ratelimited")
    assert [i.key for i in store.outbox_due(T0 + timedelta(seconds=1))] == ["inc-2/post"]
    assert store.outbox_sent(other.id, {"ts": "2.0"}, T0)
    [due] = store.outbox_due(T0 + timedelta(seconds=30))
    assert (due.key, due.attempts, due.last_error) == ("inc-1/post", 1, "ratelimited")
    assert store.outbox_sent(post.id, {"channel": "C1", "ts": "1.0"}, T0)
    assert not store.outbox_sent(post.id, {"ts": "9.9"}, T0)  # a second worker: no
    assert [i.id for i in store.outbox_due(T0 + timedelta(seconds=30))] == [update.id]
    sent = store.outbox_item("inc-1/post")
    assert sent is not None and sent.result == {"channel": "C1", "ts": "1.0"}
    assert store.outbox_pending() == 1
    store.outbox_retry(update.id, T0, "channel_not_found", give_up=True)
    assert store.outbox_pending() == 0 and store.outbox_due(T0 + timedelta(days=1)) == []


def test_an_older_schema_is_refused_until_upgraded(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    engine = sa.create_engine(url)
    migrating.upgrade(engine, "0001")
    needs = rf"has schema 0001, this gpubot needs {migrating.head()}: run "
    with pytest.raises(StoreSchemaError, match=needs):
        SqlStore.open(url)
    migrating.upgrade(engine)
    engine.dispose()
    SqlStore.open(url).close()


def test_incidents_waiting_in_vain_are_those_whose_every_request_expired_undecided(
    store: SqlStore,
) -> None:
    def waiting(node: str) -> str:
        incident = store.record_diagnosis("prod", diagnosis(node=node), T0, 3600).incident
        store.transition(incident.id, IncidentState.DIAGNOSED, "gpubot", T0)
        store.transition(incident.id, IncidentState.AWAITING_APPROVAL, "gpubot", T0)
        return incident.id

    expired, decided, live, none = (waiting(n) for n in ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4"))
    store.add_request(request_for(expired, "r-expired"))
    store.add_request(request_for(decided, "r-decided"))
    assert store.claim_execution("r-decided", "bob", T0)
    store.finish_execution("r-decided", "denied", "not now", T0)
    store.add_request(request_for(live, "r-old"))
    longer = request_for(live, "r-new").model_copy(update={"expires_at": T0 + timedelta(days=1)})
    store.add_request(longer)
    # A live ad-hoc request (`/gpubot cordon`, no incident) must not hide the others.
    adhoc = request_for(live, "r-adhoc").model_copy(
        update={"incident": None, "expires_at": T0 + timedelta(days=1)}
    )
    store.add_request(adhoc)
    assert store.incidents_waiting_in_vain(T0) == []
    later = T0 + timedelta(minutes=31)
    assert store.incidents_waiting_in_vain(later) == [expired]
    assert none not in store.incidents_waiting_in_vain(later + timedelta(days=2))


def test_a_denial_is_one_finished_row_that_no_claim_can_follow(store: SqlStore) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.add_request(request_for(incident.id))
    assert store.record_denial("r1", "bob", "training finishes at 04:00", T0)
    assert not store.record_denial("r1", "carol", "me too", T0)
    assert store.unfinished_executions() == []
    denied = store.execution("r1")
    assert denied is not None and (denied.outcome, denied.executor) == ("denied", "bob")
    assert denied.finished_at == T0 and denied.detail == "training finishes at 04:00"
    assert not store.claim_execution("r1", "leader", T0)
    assert not store.take_over_execution("r1", "leader", T0, T0 + timedelta(days=1))


def test_only_an_execution_past_its_checks_is_marked_acting_by_its_owner(store: SqlStore) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.add_request(request_for(incident.id))
    assert store.claim_execution("r1", "replica-0", T0)
    store.mark_acting("r1", "replica-1")  # not its owner: nothing changes
    [running] = store.unfinished_executions()
    assert running.outcome == "running"
    store.mark_acting("r1", "replica-0")
    [acting] = store.unfinished_executions()
    assert acting.outcome == "acting"


def test_a_resolve_withdraws_what_is_undecided_and_waits_for_what_runs(store: SqlStore) -> None:
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    for request_id in ("r-open", "r-denied", "r-running"):
        store.add_request(request_for(incident.id, request_id))
    assert store.record_denial("r-denied", "bob", "not now", T0)
    assert store.claim_execution("r-running", "replica-0", T0)
    later = T0 + timedelta(minutes=5)
    with pytest.raises(StateChanged):
        store.transition(incident.id, S.RESOLVED, "gpubot", later, "the symptom is gone")
    assert store.execution("r-open") is None  # nothing half done by the refused resolve
    assert store.incident(incident.id).state is S.OPEN
    store.finish_execution("r-running", "succeeded", "cordoned", later)
    store.transition(incident.id, S.RESOLVED, "gpubot", later, "the symptom is gone")
    withdrawn = store.execution("r-open")
    assert withdrawn is not None and withdrawn.outcome == "withdrawn"
    assert withdrawn.finished_at == later
    assert withdrawn.detail == (
        f"incident {incident.id} was resolved at 2026-12-02 03:05:00 UTC: the symptom is gone"
    )
    denied = store.execution("r-denied")
    assert denied is not None and denied.outcome == "denied"
    assert not store.claim_execution("r-open", "leader", later)


def test_a_claim_on_a_resolved_incidents_request_withdraws_it_instead(store: SqlStore) -> None:
    """What a gpubot before withdrawals left: resolved, the request never withdrawn."""
    incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
    store.transition(incident.id, S.RESOLVED, "gpubot", T0)
    store.add_request(request_for(incident.id, "r-late"))
    assert not store.claim_execution("r-late", "leader", T0 + timedelta(minutes=1))
    withdrawn = store.execution("r-late")
    assert withdrawn is not None and withdrawn.outcome == "withdrawn"
    assert withdrawn.detail == f"incident {incident.id} was resolved at 2026-12-02 03:00:00 UTC"
