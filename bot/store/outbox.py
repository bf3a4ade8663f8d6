"""The chat outbox: every call gpubot means to make to Slack, kept before it is made.

Why a part of its own: a Slack message must survive a Slack outage and a restart (invariant
8), so `SlackChat` only queues here, and `OutboxDelivery` (the leader's) sends what is due.
The same key queued twice is one call, and a group's calls go out in the order queued (an
update never overtakes its message).

What it must never do: call Slack, or anything else over the network (the sender does, between
two of these transactions), or decide what a message says. Delivery is at least once: this
table has no claim, so it must never be sent from by two processes at once (the leader only).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from bot.model import OutboxItem
from bot.ports import Outbox
from bot.store.database import Part
from bot.store.tables import outbox


class SqlOutbox(Part, Outbox):
    """The `chat_outbox` table.

    Owns: one row per call key, its attempts and its result, and which calls are due (first
    pending of their group, their time come). Never: sends, or marks a call sent that it did
    not see pending (`outbox_sent` is False for a second sender).
    """

    def outbox_put(
        self,
        key: str,
        group_key: str,
        method: str,
        payload: Mapping[str, object],
        now: datetime,
        refers_to: str | None = None,
    ) -> OutboxItem:
        """Queues one chat call; the same key twice is one call (the first)."""
        try:
            with self.db.tx() as tx:
                tx.execute(
                    outbox.insert().values(
                        key=key,
                        group_key=group_key,
                        method=method,
                        payload=dict(payload),
                        refers_to=refers_to,
                        status="pending",
                        attempts=0,
                        next_attempt_at=now,
                        created_at=now,
                    )
                )
        except IntegrityError:
            pass
        found = self.outbox_item(key)
        assert found is not None
        return found

    def outbox_item(self, key: str) -> OutboxItem | None:
        with self.db.tx() as tx:
            row = tx.execute(sa.select(outbox).where(outbox.c.key == key)).first()
        return None if row is None else _outbox_item(row)

    def outbox_latest_update(self, key: str) -> OutboxItem | None:
        """The last `chat.update` queued for the message `key` (what it reads like now, sent or
        not), or None when it was never updated."""
        with self.db.tx() as tx:
            row = tx.execute(
                sa.select(outbox)
                .where((outbox.c.refers_to == key) & (outbox.c.method == "chat.update"))
                .order_by(outbox.c.id.desc())
                .limit(1)
            ).first()
        return None if row is None else _outbox_item(row)

    def outbox_due(self, now: datetime, limit: int = 50) -> list[OutboxItem]:
        """Pending calls whose time has come and that are first in their group: a later
        message of a group waits for every earlier one, so updates never overtake."""
        earlier = outbox.alias("earlier")
        blocked = (
            sa.select(earlier.c.id)
            .where(
                (earlier.c.group_key == outbox.c.group_key)
                & (earlier.c.status == "pending")
                & (earlier.c.id < outbox.c.id)
            )
            .exists()
        )
        query = (
            sa.select(outbox)
            .where((outbox.c.status == "pending") & (outbox.c.next_attempt_at <= now) & ~blocked)
            .order_by(outbox.c.id)
            .limit(limit)
        )
        with self.db.tx() as tx:
            return [_outbox_item(r) for r in tx.execute(query)]

    def outbox_sent(self, item_id: int, result: Mapping[str, object], now: datetime) -> bool:
        """Marks a call delivered; False when it already was (another worker sent it)."""
        with self.db.tx() as tx:
            changed = tx.execute(
                outbox.update()
                .where((outbox.c.id == item_id) & (outbox.c.status == "pending"))
                .values(
                    status="sent", result=dict(result), sent_at=now, attempts=outbox.c.attempts + 1
                )
            ).rowcount
        return changed == 1

    def outbox_retry(
        self, item_id: int, at: datetime, error: str, *, give_up: bool = False
    ) -> None:
        with self.db.tx() as tx:
            tx.execute(
                outbox.update()
                .where((outbox.c.id == item_id) & (outbox.c.status == "pending"))
                .values(
                    status="failed" if give_up else "pending",
                    next_attempt_at=at,
                    last_error=error[:2000],
                    attempts=outbox.c.attempts + 1,
                )
            )

    def outbox_pending(self) -> int:
        with self.db.tx() as tx:
            return int(
                tx.scalar(
                    sa.select(sa.func.count())
                    .select_from(outbox)
                    .where(outbox.c.status == "pending")
                )
                or 0
            )


def _outbox_item(row: sa.Row[Any]) -> OutboxItem:
    m = row._mapping
    return OutboxItem(
        id=m["id"],
        key=m["key"],
        group_key=m["group_key"],
        method=m["method"],
        payload=m["payload"],
        refers_to=m["refers_to"],
        status=m["status"],
        attempts=m["attempts"],
        next_attempt_at=m["next_attempt_at"],
        last_error=m["last_error"],
        result=m["result"],
    )
