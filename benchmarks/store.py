"""The store: signals stored per second and incidents updated per second, on SQLite and on
PostgreSQL, next to the database driver doing the same inserts by hand.

    python benchmarks/store.py [--signals 20000] [--batch 100] [--incidents 2000]

Signals arrive as Alertmanager sends them, in batches of 100; gpubot stores each batch in
one transaction with its duplicate check (`SqlStore.add_signals`). The peer writes the same
rows with the bare driver (sqlite3 / psycopg `executemany`, one transaction per batch, no
duplicate check): the floor for that database on this machine. Incident updates are
`record_diagnosis` on an open incident (look up, merge signals, write), then a state move
with its timeline entry; the peer is an UPDATE plus an INSERT by hand.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psycopg

from bot.model import Diagnosis, IncidentState, Signal
from bot.store.sql import SqlStore, signal_key
from tests.helpers.builders import diagnosis as built_diagnosis

POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def signals(count: int) -> list[Signal]:
    return [
        Signal(
            source="alertmanager",
            name="GPUXidError",
            node=f"gpu-{i % 500:04d}",
            labels={"alertname": "GPUXidError", "xid": "79", "gpu": str(i % 8)},
            starts_at=NOW,
            fingerprint=f"{i:016x}",
        )
        for i in range(count)
    ]


def diagnosis(node: str, fingerprint: str) -> Diagnosis:
    return built_diagnosis(node=node).model_copy(update={"signals": [fingerprint]})


def timed(work: Callable[[], None]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def ours(url: str, batch: list[list[Signal]], incidents: int) -> tuple[float, float]:
    store = SqlStore.open(url)
    try:
        stored = timed(lambda: [store.add_signals(b, NOW) for b in batch])
        opened = [
            store.record_diagnosis("bench", diagnosis(f"gpu-{i:04d}", "f0"), NOW, 3600).incident
            for i in range(incidents)
        ]

        def update() -> None:
            for i, incident in enumerate(opened):
                store.record_diagnosis("bench", diagnosis(incident.node or "", f"f{i}"), NOW, 3600)
                store.transition(incident.id, IncidentState.DIAGNOSED, "gpubot", NOW)

        updated = timed(update)
    finally:
        store.close()
    count = sum(len(b) for b in batch)
    return count / stored, incidents / updated


def _rows(batch: list[Signal]) -> list[tuple[object, ...]]:
    return [
        (
            signal_key(s),
            s.fingerprint,
            s.source,
            s.name,
            s.status,
            s.node,
            NOW.isoformat(),
            0,
            json.dumps(s.model_dump(mode="json")),
        )
        for s in batch
    ]


INSERT = (
    "INSERT INTO signals (dedup_key, fingerprint, source, name, status, node, received_at,"
    " truncated_alerts, payload) VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p})"
)
UPDATE = "UPDATE incidents SET signals = {p}, updated_at = {p}, state = {p} WHERE id = {p}"
TIMELINE = (
    "INSERT INTO timeline (incident_id, at, actor, kind, text, data)"
    " VALUES ({p}, {p}, {p}, {p}, {p}, {p})"
)


def peer_sqlite(path: Path, batch: list[list[Signal]], incidents: int) -> tuple[float, float]:
    SqlStore.open(f"sqlite:///{path}").close()  # the same schema, then the bare driver
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    sql = INSERT.format(p="?")

    def store() -> None:
        for b in batch:
            with db:
                db.executemany(sql, _rows(b))

    stored = timed(store)
    with db:
        ids = [
            db.execute(
                "INSERT INTO incidents (cluster, subject, node, rule, state, severity, title,"
                " opened_at, updated_at, signals) VALUES (?,?,?,?,?,?,?,?,?,?)",
                ("bench", f"n{i}", f"n{i}", "r", "open", "critical", "t", NOW, NOW, "[]"),
            ).lastrowid
            for i in range(incidents)
        ]

    def update() -> None:
        for i in ids:
            with db:
                db.execute(UPDATE.format(p="?"), ('["f0", "f1"]', NOW, "diagnosed", i))
                db.execute(TIMELINE.format(p="?"), (i, NOW, "gpubot", "state", "x", "{}"))

    updated = timed(update)
    db.close()
    count = sum(len(b) for b in batch)
    return count / stored, incidents / updated


def peer_postgres(url: str, batch: list[list[Signal]], incidents: int) -> tuple[float, float]:
    SqlStore.open(url).close()
    schema = url.split("search_path%3D")[1]
    with psycopg.connect(POSTGRES, options=f"-csearch_path={schema}") as db:
        sql = INSERT.format(p="%s")

        def store() -> None:
            for b in batch:
                with db.transaction(), db.cursor() as cursor:
                    cursor.executemany(sql, _rows(b))

        stored = timed(store)
        with db.transaction(), db.cursor() as cursor:
            ids = []
            for i in range(incidents):
                cursor.execute(
                    "INSERT INTO incidents (cluster, subject, node, rule, state, severity, title,"
                    " opened_at, updated_at, signals) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                    " RETURNING id",
                    ("bench", f"n{i}", f"n{i}", "r", "open", "critical", "t", NOW, NOW, "[]"),
                )
                ids.append(cursor.fetchone()[0])  # type: ignore[index]

        def update() -> None:
            for i in ids:
                with db.transaction(), db.cursor() as cursor:
                    cursor.execute(UPDATE.format(p="%s"), ('["f0", "f1"]', NOW, "diagnosed", i))
                    cursor.execute(TIMELINE.format(p="%s"), (i, NOW, "gpubot", "state", "x", "{}"))

        updated = timed(update)
    count = sum(len(b) for b in batch)
    return count / stored, incidents / updated


def fresh_schema() -> tuple[str, Callable[[], None]]:
    name = f"gpubot_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(POSTGRES, autocommit=True) as db:
        db.execute(f'CREATE SCHEMA "{name}"')

    def drop() -> None:
        with psycopg.connect(POSTGRES, autocommit=True) as db:
            db.execute(f'DROP SCHEMA "{name}" CASCADE')

    return f"{POSTGRES}?options=-csearch_path%3D{name}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--signals", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--incidents", type=int, default=2_000)
    args = parser.parse_args()
    every = signals(args.signals)
    batch = [every[i : i + args.batch] for i in range(0, len(every), args.batch)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ours_sqlite = ours(f"sqlite:///{tmp}/ours.db", batch, args.incidents)
        theirs_sqlite = peer_sqlite(Path(tmp) / "peer.db", batch, args.incidents)
    rows.append(("SQLite (file, WAL)", ours_sqlite, theirs_sqlite))
    try:
        url, drop = fresh_schema()
    except psycopg.OperationalError as exc:
        print(f"PostgreSQL skipped: {exc}")
    else:
        try:
            ours_pg = ours(url, batch, args.incidents)
        finally:
            drop()
        url, drop = fresh_schema()
        try:
            theirs_pg = peer_postgres(url, batch, args.incidents)
        finally:
            drop()
        rows.append(("PostgreSQL 15 (127.0.0.1)", ours_pg, theirs_pg))
    print(f"{args.signals} signals in batches of {args.batch}; {args.incidents} incident updates\n")
    print(
        "| database | signals/s gpubot | bare driver | ratio "
        "| incident updates/s gpubot | bare driver | ratio |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, (our_s, our_i), (peer_s, peer_i) in rows:
        print(
            f"| {name} | {our_s:,.0f} | {peer_s:,.0f} | {our_s / peer_s:.2f} "
            f"| {our_i:,.0f} | {peer_i:,.0f} | {our_i / peer_i:.2f} |"
        )


if __name__ == "__main__":
    main()
