"""Incidents and their timelines.

Why a part of its own: an incident is the store's one state machine. One unresolved incident
per (cluster, subject, rule) is a partial unique index, a move is a locked read and a
conditional UPDATE, and every move is written with its timeline entry in one transaction, so
the timeline is the whole story (the summary and the digest are read from it alone).

What it must never do: decide a move (which move is legal is `bot.incidents.lifecycle`'s,
when to make one the service's), resolve an incident while one of its approved actions runs,
or leave an undecided request of a resolved incident able to act (`transition` withdraws it
in the same transaction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from bot.errors import NotFound, StateChanged
from bot.incidents.lifecycle import check, supersession, withdrawal
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

    Owns: grouping diagnoses into incidents (open, update, reopen within the window), moving
    them with the state in the WHERE so a concurrent move loses (`StateChanged`), and the
    timeline. Never: chooses a target state, or lets a resolve and a claim interleave (the
    incident row is locked by both).
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
        subject = diagnosis.subject
        here = (incidents.c.cluster == cluster) & (incidents.c.subject == subject)
        same = here & (incidents.c.rule == diagnosis.rule)
        payload = diagnosis.model_dump(mode="json")
        seen = {
            "diagnosis": payload,
            "updated_at": now,
            "severity": diagnosis.severity.value,
            "title": diagnosis.title,
            "absent_since": None,
        }
        with self.db.tx() as tx:
            row = tx.execute(
                sa.select(incidents).where(same & (incidents.c.state != "resolved"))
            ).first()
            if row is not None:
                merged = sorted({*row._mapping["signals"], *diagnosis.signals})
                tx.execute(
                    incidents.update()
                    .where(incidents.c.id == row._mapping["id"])
                    .values(signals=merged, **seen)
                )
                return Recorded(incident=_fetch(tx, row._mapping["id"]), change="updated")
            older = (
                tx.execute(
                    sa.select(incidents)
                    .where(
                        here
                        & incidents.c.rule.in_(list(replaces))
                        & incidents.c.state.not_in(["resolved", "executing"])
                    )
                    .order_by(incidents.c.updated_at.desc())
                    .limit(1)
                    .with_for_update()
                ).first()
                if replaces
                else None
            )
            if older is not None:
                return self._supersede(tx, older, diagnosis, now, seen)
            recent = tx.execute(
                sa.select(incidents)
                .where(
                    same
                    & (incidents.c.state == "resolved")
                    & (incidents.c.resolved_at >= now - timedelta(seconds=reopen_window_s))
                )
                .order_by(incidents.c.resolved_at.desc())
                .limit(1)
            ).first()
            if recent is not None:
                incident_id = recent._mapping["id"]
                tx.execute(
                    incidents.update()
                    .where(incidents.c.id == incident_id)
                    .values(
                        state=IncidentState.OPEN.value,
                        reopened=incidents.c.reopened + 1,
                        resolved_at=None,
                        signals=sorted({*recent._mapping["signals"], *diagnosis.signals}),
                        **seen,
                    )
                )
                text = f"fired again within {reopen_window_s // 60} min of its resolve: reopened"
                data: dict[str, object] = {"from": "resolved", "to": "open"}
                change: RecordChange = "reopened"
            else:
                inserted = tx.execute(
                    incidents.insert().values(
                        cluster=cluster,
                        subject=subject,
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
                incident_id = inserted[0]
                text = f"opened: {diagnosis.title}"
                data = {"to": "open", "rule": diagnosis.rule}
                change = "new"
            entry = TimelineEntry(
                incident=str(incident_id), at=now, actor=GPUBOT, kind="state", text=text, data=data
            )
            _append(tx, entry)
            return Recorded(incident=_fetch(tx, incident_id), change=change)

    @staticmethod
    def _supersede(
        tx: Connection,
        older: sa.Row[Any],
        diagnosis: Diagnosis,
        now: datetime,
        seen: Mapping[str, Any],
    ) -> Recorded:
        """A better diagnosis of the same problem takes the incident over: same incident, same
        thread; the earlier diagnosis' undecided requests are withdrawn with it, and the story
        starts again (open) for the new one's proposals."""
        m = older._mapping
        key, previous, state = m["id"], m["rule"], IncidentState(m["state"])
        check(str(key), state, IncidentState.OPEN)
        why = f"superseded: {previous} -> {diagnosis.rule} ({diagnosis.title})"
        _withdraw_undecided(
            tx,
            key,
            supersession(str(key), now, diagnosis.rule, diagnosis.title, previous),
            now,
        )
        tx.execute(
            incidents.update()
            .where(incidents.c.id == key)
            .values(
                rule=diagnosis.rule,
                state=IncidentState.OPEN.value,
                held_until=None,
                signals=sorted({*m["signals"], *diagnosis.signals}),
                **seen,
            )
        )
        _append(
            tx,
            TimelineEntry(
                incident=str(key),
                at=now,
                actor=GPUBOT,
                kind="state",
                text=why,
                data={
                    "from": state.value,
                    "to": IncidentState.OPEN.value,
                    "superseded": previous,
                    "rule": diagnosis.rule,
                },
            ),
        )
        return Recorded(incident=_fetch(tx, key), change="superseded", replaced=previous)

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
