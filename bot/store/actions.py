"""Proposed actions, the votes on them, and each one's single execution.

Why a part of its own: this is where an approval turns into action, at most once (invariant
3). A request has one row in `executions`, ever: a claim, a denial and a withdrawal are each
an INSERT that only the first can make (`insert_execution`), and a stale owner is replaced by
one conditional UPDATE (`take_over_execution`), so clicks, retries, restarts and replicas
meet a constraint, never a second drain. The signed chat requests that propose and vote are
taken once the same way (`note_signed_request`): a slash command replayed to another replica
meets a primary key, not a second request.

What it must never do: judge a vote (who may approve, how many are needed, whether the node
changed: `bot.approval`'s), act on the cluster, or claim a request whose incident is
resolved (`claim_execution` reads the incident, locked, in the transaction that claims).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from bot.errors import NotFound
from bot.incidents.lifecycle import withdrawal
from bot.model import ActionRequest, ExecutionOutcome, IncidentState, Vote
from bot.names import GPUBOT
from bot.ports import ActionStore
from bot.store.database import Part, insert_execution, insert_once, int_id
from bot.store.tables import executions, incidents, requests, signed_requests, votes

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ExecutionRecord:
    """One row of `executions`: the `Execution` port as the store reads it."""

    request_id: str
    executor: str
    started_at: datetime
    finished_at: datetime | None
    outcome: ExecutionOutcome
    detail: str
    heartbeat_at: datetime | None = None


class SqlActions(Part, ActionStore):
    """The `action_requests`, `approvals`, `executions` and `signed_requests` tables.

    Owns: requests as proposed, one vote per person and request, the one execution row per
    request with its owner and heartbeat, and the signed chat requests of the replay window.
    Never: decides whether the votes suffice or the request has expired (`Voting` and
    `Executor` do, from what it returns), records a result for an execution that another
    process has taken over (`finish_execution` with `executor=`, `beat`), or judges whether a
    chat request is genuine or how long its window is (the caller verified the signature and
    says what to forget).
    """

    def add_request(self, request: ActionRequest) -> None:
        with self.db.tx() as tx:
            tx.execute(
                requests.insert().values(
                    id=request.id,
                    incident_id=None if request.incident is None else int_id(request.incident),
                    node=request.node,
                    action=request.action.value,
                    expires_at=request.expires_at,
                    payload=request.model_dump(mode="json"),
                )
            )

    def request(self, request_id: str) -> ActionRequest:
        with self.db.tx() as tx:
            payload = tx.scalar(sa.select(requests.c.payload).where(requests.c.id == request_id))
        if payload is None:
            raise NotFound(f"no action request {request_id}")
        return ActionRequest.model_validate(payload)

    def requests(self, incident_id: str) -> list[ActionRequest]:
        with self.db.tx() as tx:
            payloads: list[Any] = list(
                tx.scalars(
                    sa.select(requests.c.payload)
                    .where(requests.c.incident_id == int_id(incident_id))
                    .order_by(requests.c.expires_at)
                )
            )
        return [ActionRequest.model_validate(p) for p in payloads]

    def incidents_waiting_in_vain(self, now: datetime) -> list[str]:
        """Incidents awaiting approval whose every request has expired undecided (no
        execution, no denial): one query, however many incidents wait."""
        live_or_decided = (
            sa.select(requests.c.incident_id)
            .where(
                # NOT IN over a NULL is never true: ad-hoc requests (no incident) stay out.
                requests.c.incident_id.is_not(None)
                & (
                    (requests.c.expires_at > now)
                    | sa.exists().where(executions.c.request_id == requests.c.id)
                )
            )
            .scalar_subquery()
        )
        any_request = sa.exists().where(requests.c.incident_id == incidents.c.id)
        query = (
            sa.select(incidents.c.id)
            .where(
                (incidents.c.state == IncidentState.AWAITING_APPROVAL.value)
                & any_request
                & incidents.c.id.not_in(live_or_decided)
            )
            .order_by(incidents.c.id)
        )
        with self.db.tx() as tx:
            found: list[int] = list(tx.scalars(query))
        return [str(i) for i in found]

    def requests_to_execute(self, now: datetime) -> list[ActionRequest]:
        """Unexpired requests with at least one vote and no execution yet."""
        voted = sa.select(votes.c.request_id).where(votes.c.request_id == requests.c.id).exists()
        executed = (
            sa.select(executions.c.request_id)
            .where(executions.c.request_id == requests.c.id)
            .exists()
        )
        query = (
            sa.select(requests.c.payload)
            .where((requests.c.expires_at > now) & voted & ~executed)
            .order_by(requests.c.expires_at)
        )
        with self.db.tx() as tx:
            payloads: list[Any] = list(tx.scalars(query))
        return [ActionRequest.model_validate(p) for p in payloads]

    def add_vote(self, vote: Vote) -> bool:
        """One vote per person: a double click meets the unique constraint."""
        try:
            with self.db.tx() as tx:
                tx.execute(
                    votes.insert().values(
                        request_id=vote.request_id, approver=vote.approver, at=vote.at
                    )
                )
        except IntegrityError:
            return False
        return True

    def votes(self, request_id: str) -> list[Vote]:
        with self.db.tx() as tx:
            rows = tx.execute(
                sa.select(votes).where(votes.c.request_id == request_id).order_by(votes.c.id)
            ).all()
        return [Vote(request_id=r.request_id, approver=r.approver, at=r.at) for r in rows]

    def claim_execution(self, request_id: str, executor: str, now: datetime) -> bool:
        with self.db.tx() as tx:
            incident_id = tx.scalar(
                sa.select(requests.c.incident_id).where(requests.c.id == request_id)
            )
            if incident_id is not None:
                # Locked with the claim: a resolve (which withdraws) and a claim never
                # interleave. A request whose incident was resolved by a gpubot that did not
                # withdraw yet is withdrawn here instead of claimed.
                incident = tx.execute(
                    sa.select(incidents.c.state, incidents.c.resolved_at)
                    .where(incidents.c.id == incident_id)
                    .with_for_update()
                ).one()
                if incident.state == IncidentState.RESOLVED.value:
                    detail = withdrawal(str(incident_id), incident.resolved_at or now)
                    insert_execution(tx, request_id, GPUBOT, "withdrawn", detail, now)
                    return False
            return insert_execution(tx, request_id, executor, "running", "", now)

    def record_withdrawal(self, request_id: str, detail: str, now: datetime) -> bool:
        with self.db.tx() as tx:
            return insert_execution(tx, request_id, GPUBOT, "withdrawn", detail, now)

    def record_denial(self, request_id: str, who: str, reason: str, now: datetime) -> bool:
        with self.db.tx() as tx:
            return insert_execution(tx, request_id, who, "denied", reason, now)

    def finish_execution(
        self,
        request_id: str,
        outcome: ExecutionOutcome,
        detail: str,
        now: datetime,
        executor: str | None = None,
    ) -> bool:
        where = executions.c.request_id == request_id
        if executor is not None:
            where &= (executions.c.executor == executor) & executions.c.finished_at.is_(None)
        with self.db.tx() as tx:
            result = tx.execute(
                executions.update()
                .where(where)
                .values(outcome=outcome, detail=detail, finished_at=now)
            )
        return bool(result.rowcount)

    def mark_acting(self, request_id: str, executor: str) -> None:
        with self.db.tx() as tx:
            tx.execute(
                executions.update().where(_owned_by(request_id, executor)).values(outcome="acting")
            )

    def release_execution(self, request_id: str, executor: str) -> bool:
        """The owner stopping: its heartbeat set to the epoch, so the next leader's duties
        take the execution over at once instead of after `execution_stale_s`."""
        with self.db.tx() as tx:
            result = tx.execute(
                executions.update()
                .where(_owned_by(request_id, executor))
                .values(heartbeat_at=_EPOCH)
            )
        return bool(result.rowcount)

    def beat(self, request_id: str, executor: str, now: datetime) -> bool:
        with self.db.tx() as tx:
            result = tx.execute(
                executions.update().where(_owned_by(request_id, executor)).values(heartbeat_at=now)
            )
        return bool(result.rowcount)

    def take_over_execution(
        self, request_id: str, executor: str, now: datetime, stale_before: datetime
    ) -> bool:
        last_sign_of_life = sa.func.coalesce(executions.c.heartbeat_at, executions.c.started_at)
        with self.db.tx() as tx:
            result = tx.execute(
                executions.update()
                .where(
                    (executions.c.request_id == request_id)
                    & executions.c.finished_at.is_(None)
                    & ((executions.c.executor == executor) | (last_sign_of_life < stale_before))
                )
                .values(executor=executor, heartbeat_at=now)
            )
        return bool(result.rowcount)

    def note_signed_request(self, digest: str, sent_at: datetime, forget_before: datetime) -> bool:
        """The first INSERT of `digest` wins (ON CONFLICT DO NOTHING: a lost race is an
        answer, not an error), after the rows signed before `forget_before` are deleted: a few
        minutes of requests at people's pace, so the table stays as small as the window."""
        with self.db.tx() as tx:
            tx.execute(signed_requests.delete().where(signed_requests.c.sent_at < forget_before))
            noted = tx.scalar(
                insert_once(signed_requests, signed_requests.c.digest, tx.dialect).values(
                    digest=digest, sent_at=sent_at
                )
            )
        return noted is not None

    def execution(self, request_id: str) -> ExecutionRecord | None:
        with self.db.tx() as tx:
            row = tx.execute(
                sa.select(executions).where(executions.c.request_id == request_id)
            ).first()
        return None if row is None else _execution(row)

    def unfinished_executions(self) -> list[ExecutionRecord]:
        with self.db.tx() as tx:
            rows = tx.execute(
                sa.select(executions)
                .where(executions.c.finished_at.is_(None))
                .order_by(executions.c.started_at)
            ).all()
        return [_execution(r) for r in rows]


def _owned_by(request_id: str, executor: str) -> sa.ColumnElement[bool]:
    """The request's execution, while `executor` owns it and it is unfinished."""
    return (
        (executions.c.request_id == request_id)
        & (executions.c.executor == executor)
        & executions.c.finished_at.is_(None)
    )


def _execution(row: sa.Row[Any]) -> ExecutionRecord:
    return ExecutionRecord(
        request_id=row.request_id,
        executor=row.executor,
        started_at=row.started_at,
        finished_at=row.finished_at,
        outcome=cast(ExecutionOutcome, row.outcome),
        detail=row.detail,
        heartbeat_at=row.heartbeat_at,
    )
