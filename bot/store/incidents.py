"""Incidents and their timelines.

Why a part of its own: an incident is the store's one state machine. One unresolved incident
per (cluster, subject, rule) is a partial unique index, a move is a locked read and a
conditional UPDATE, and every move is written with its timeline entry in one transaction, so
the timeline is the whole story (the summary and the digest are read from it alone).

What it must never do: decide a move (which move is legal is `bot.incidents.lifecycle`'s,
which incident a diagnosis joins `bot.incidents.grouping`'s, when to make one the
service's), resolve an incident while one of its approved actions runs, or leave an
undecided request of a resolved incident able to act (`transition` withdraws it in the same
transaction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from bot.errors import NotFound, StateChanged
from bot.incidents.grouping import Grouping, group, reopen_since
from bot.incidents.lifecycle import check, withdrawal
from bot.model import (
    Diagnosis,
    Incident,
    IncidentState,
    RecordChange,
    Recorded,
    TimelineEntry,
    TimelineKind,
)
from bot.names import GPUBOT
from bot.ports import IncidentStore
from bot.store.database import Part, insert_execution, int_id
from bot.store.tables import executions, incidents, requests, timeline


class SqlIncidents(Part, IncidentStore):
    """The `incidents` and `timeline` tables (and, on a resolve, the withdrawal of the
    incident's undecided requests in `executions`).

    Owns: writing each diagnosis where `bot.incidents.grouping` puts it (read and written in
    one transaction, the candidates locked), moving incidents with the state in the WHERE so a
    concurrent move loses (`StateChanged`), and the timeline. Never: chooses a target state or
    an incident for a diagnosis, or lets a resolve and a claim interleave (the incident row is
    locked by both).
    """

    def record_diagnosis(
        self,
        cluster: str,
        diagnosis: Diagnosis,
        now: datetime,
        reopen_window_s: int,
        replaces: Sequence[str] = (),
    ) -> Recorded:
        for _attempt in range(3):
            try:
                return self._record_diagnosis(cluster, diagnosis, now, reopen_window_s, replaces)
            except IntegrityError:
                # Another replica opened the same incident a moment ago: use theirs.
                continue
        return self._record_diagnosis(cluster, diagnosis, now, reopen_window_s, replaces)

    def _record_diagnosis(
        self,
        cluster: str,
        diagnosis: Diagnosis,
        now: datetime,
        reopen_window_s: int,
        replaces: Sequence[str],
    ) -> Recorded:
        seen = {
            "diagnosis": diagnosis.model_dump(mode="json"),
            "updated_at": now,
            "severity": diagnosis.severity.value,
            "title": diagnosis.title,
            "absent_since": None,
        }
        with self.db.tx() as tx:
            # Locked as read, so the incident the grouping chooses cannot be resolved or
            # claimed before its move is written; in id order, so two recordings of one
            # subject take the locks in the same order and never deadlock.
            rows = tx.execute(
                sa.select(*_HEAD, incidents.c.signals)
                .where(
                    (incidents.c.cluster == cluster)
                    & (incidents.c.subject == diagnosis.subject)
                    & (
                        (incidents.c.state != IncidentState.RESOLVED.value)
                        | (
                            (incidents.c.rule == diagnosis.rule)
                            & (incidents.c.resolved_at >= reopen_since(now, reopen_window_s))
                        )
                    )
                )
                .order_by(incidents.c.id)
                .with_for_update()
            ).all()
            grouping = group(
                diagnosis, [_incident(r) for r in rows], now, reopen_window_s, replaces
            )
            signals = {str(r.id): r.signals for r in rows}
            if grouping.incident is None:
                inserted = tx.execute(
                    incidents.insert().values(
                        cluster=cluster,
                        subject=diagnosis.subject,
                        node=diagnosis.node,
                        pool=diagnosis.pool,
                        rule=diagnosis.rule,
                        state=IncidentState.OPEN.value,
                        opened_at=now,
                        signals=sorted(diagnosis.signals),
                        **seen,
                    )
                ).inserted_primary_key
                assert inserted is not None
                key = inserted[0]
            else:
                key = int_id(grouping.incident.id)
                if grouping.withdrawal is not None:
                    _withdraw_undecided(tx, key, grouping.withdrawal, now)
                merged = sorted({*signals[grouping.incident.id], *diagnosis.signals})
                tx.execute(
                    incidents.update()
                    .where(incidents.c.id == key)
                    .values(signals=merged, **seen, **_moved(grouping.change, diagnosis))
                )
            if grouping.change != "updated":
                entry = TimelineEntry(
                    incident=str(key),
                    at=now,
                    actor=GPUBOT,
                    kind="state",
                    text=_said(grouping, diagnosis, reopen_window_s),
                    data=dict(grouping.data),
                )
                _append(tx, entry)
            return Recorded(
                incident=_fetch(tx, key), change=grouping.change, replaced=grouping.replaced
            )

    def hold(self, incident_id: str, until: datetime | None) -> None:
        with self.db.tx() as tx:
            tx.execute(
                incidents.update()
                .where(incidents.c.id == int_id(incident_id))
                .values(held_until=until)
            )

    def mark_absent(self, incident_id: str, since: datetime) -> Incident:
        """The symptom was not seen: since `since`, unless it was already absent earlier."""
        with self.db.tx() as tx:
            key = int_id(incident_id)
            tx.execute(
                incidents.update()
                .where((incidents.c.id == key) & incidents.c.absent_since.is_(None))
                .values(absent_since=since)
            )
            return _fetch(tx, key)

    def mark_present(self, incident_id: str) -> None:
        with self.db.tx() as tx:
            tx.execute(
                incidents.update()
                .where(
                    (incidents.c.id == int_id(incident_id)) & incidents.c.absent_since.is_not(None)
                )
                .values(absent_since=None)
            )

    def diagnosis(self, incident_id: str) -> Diagnosis | None:
        with self.db.tx() as tx:
            payload = tx.scalar(
                sa.select(incidents.c.diagnosis).where(incidents.c.id == int_id(incident_id))
            )
        return None if payload is None else Diagnosis.model_validate(payload)

    def incident(self, incident_id: str) -> Incident:
        with self.db.tx() as tx:
            row = tx.execute(sa.select(*_HEAD).where(incidents.c.id == int_id(incident_id))).first()
        if row is None:
            raise NotFound(f"no incident {incident_id}")
        return _incident(row)

    def incidents(
        self, node: str | None = None, states: Sequence[IncidentState] = ()
    ) -> list[Incident]:
        query = sa.select(*_HEAD).order_by(incidents.c.id)
        if node is not None:
            query = query.where(incidents.c.node == node)
        if states:
            query = query.where(incidents.c.state.in_([s.value for s in states]))
        with self.db.tx() as tx:
            return [_incident(r) for r in tx.execute(query)]

    def count_incidents(self, states: Sequence[IncidentState]) -> int:
        query = sa.select(sa.func.count()).select_from(incidents)
        query = query.where(incidents.c.state.in_([s.value for s in states]))
        with self.db.tx() as tx:
            return int(tx.scalar(query) or 0)

    def incidents_for_signal(self, fingerprint: str) -> list[Incident]:
        # JSON containment differs between SQLite and PostgreSQL; the candidates are few
        # (unresolved or recent), so filter in Python.
        with self.db.tx() as tx:
            rows = tx.execute(sa.select(incidents).order_by(incidents.c.id)).all()
        return [_incident(r) for r in rows if fingerprint in r._mapping["signals"]]

    def transition(
        self,
        incident_id: str,
        target: IncidentState,
        actor: str,
        now: datetime,
        text: str = "",
        data: Mapping[str, object] | None = None,
    ) -> Incident:
        key = int_id(incident_id)
        with self.db.tx() as tx:
            row = tx.execute(
                sa.select(incidents).where(incidents.c.id == key).with_for_update()
            ).first()
            if row is None:
                raise NotFound(f"no incident {incident_id}")
            current = IncidentState(row._mapping["state"])
            check(incident_id, current, target)
            values: dict[str, Any] = {"state": target.value, "updated_at": now}
            if target is IncidentState.RESOLVED:
                values["resolved_at"] = now
                _withdraw_undecided(tx, key, withdrawal(incident_id, now, text), now)
            # The state in the WHERE makes a concurrent move from the same state lose.
            moved = tx.execute(
                incidents.update()
                .where((incidents.c.id == key) & (incidents.c.state == current.value))
                .values(**values)
            ).rowcount
            if moved != 1:
                raise StateChanged(f"incident {incident_id} changed meanwhile; read it again")
            kind: TimelineKind = "resolve" if target is IncidentState.RESOLVED else "state"
            _append(
                tx,
                TimelineEntry(
                    incident=incident_id,
                    at=now,
                    actor=actor,
                    kind=kind,
                    text=text or f"{current.value} → {target.value}",
                    data={"from": current.value, "to": target.value, **dict(data or {})},
                ),
            )
            return _incident(tx.execute(sa.select(*_HEAD).where(incidents.c.id == key)).one())

    def set_chat_ref(self, incident_id: str, chat_ref: str) -> None:
        with self.db.tx() as tx:
            tx.execute(
                incidents.update()
                .where(incidents.c.id == int_id(incident_id))
                .values(chat_ref=chat_ref)
            )

    def set_parent(self, incident_id: str, parent_id: str) -> None:
        with self.db.tx() as tx:
            tx.execute(
                incidents.update()
                .where(incidents.c.id == int_id(incident_id))
                .values(parent=int_id(parent_id))
            )

    def append(self, entry: TimelineEntry) -> None:
        with self.db.tx() as tx:
            _append(tx, entry)

    def timeline(self, incident_id: str) -> list[TimelineEntry]:
        with self.db.tx() as tx:
            rows = tx.execute(
                sa.select(timeline)
                .where(timeline.c.incident_id == int_id(incident_id))
                .order_by(timeline.c.id)
            ).all()
        return [
            TimelineEntry(
                incident=incident_id,
                at=r.at,
                actor=r.actor,
                kind=cast(TimelineKind, r.kind),
                text=r.text,
                data=r.data,
            )
            for r in rows
        ]


_HEAD = [c for c in incidents.c if c.name not in ("diagnosis", "signals")]
"""What an `Incident` is read from: its diagnosis and signals are JSON that every pass would
parse for each open incident (twice a pass) and never read (issue 18's one-node pass)."""


def _incident(row: sa.Row[Any]) -> Incident:
    m = row._mapping
    return Incident(
        id=str(m["id"]),
        cluster=m["cluster"],
        node=m["node"],
        pool=m["pool"],
        rule=m["rule"],
        state=IncidentState(m["state"]),
        severity=m["severity"],
        title=m["title"],
        opened_at=m["opened_at"],
        updated_at=m["updated_at"],
        resolved_at=m["resolved_at"],
        reopened=m["reopened"],
        parent=None if m["parent"] is None else str(m["parent"]),
        chat_ref=m["chat_ref"],
        held_until=m["held_until"],
        absent_since=m["absent_since"],
    )


def _said(grouping: Grouping, diagnosis: Diagnosis, reopen_window_s: int) -> str:
    """A move's timeline line, worded in English as the store has always kept it (the data
    beside it is what code reads)."""
    if grouping.change == "reopened":
        return f"fired again within {reopen_window_s // 60} min of its resolve: reopened"
    if grouping.change == "superseded":
        return f"superseded: {grouping.replaced} -> {diagnosis.rule} ({diagnosis.title})"
    return f"opened: {diagnosis.title}"


def _moved(change: RecordChange, diagnosis: Diagnosis) -> dict[str, Any]:
    """What a move sets beyond what every sighting sets (an update moves nothing)."""
    if change == "superseded":
        return {"rule": diagnosis.rule, "state": IncidentState.OPEN.value, "held_until": None}
    if change == "reopened":
        return {
            "state": IncidentState.OPEN.value,
            "reopened": incidents.c.reopened + 1,
            "resolved_at": None,
        }
    return {}


def _fetch(tx: Connection, key: Any) -> Incident:
    return _incident(tx.execute(sa.select(*_HEAD).where(incidents.c.id == key)).one())


def _append(tx: Connection, entry: TimelineEntry) -> None:
    tx.execute(
        timeline.insert().values(
            incident_id=int(entry.incident),
            at=entry.at,
            actor=entry.actor,
            kind=entry.kind,
            text=entry.text,
            data=dict(entry.data),
        )
    )


def _withdraw_undecided(tx: Connection, incident_key: int, detail: str, now: datetime) -> None:
    """Every request of the incident without an execution gets a finished `withdrawn` one;
    an execution still running makes the resolve wait (`StateChanged`)."""
    rows = tx.execute(
        sa.select(requests.c.id, executions.c.finished_at, executions.c.outcome)
        .select_from(requests.outerjoin(executions, executions.c.request_id == requests.c.id))
        .where(requests.c.incident_id == incident_key)
    ).all()
    if any(r.outcome is not None and r.finished_at is None for r in rows):
        raise StateChanged(
            f"incident {incident_key}: an approved action is running; resolve it afterwards"
        )
    for row in rows:
        if row.outcome is None:
            insert_execution(tx, row.id, GPUBOT, "withdrawn", detail, now)
