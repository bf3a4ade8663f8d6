"""The webhook's inbox: deliveries the webhook stored as received, split into signals.

The webhook answers once a body is stored whole (one row); splitting it into signals, each
kept once, happens here, behind the 200, on the pipeline's thread. Under a burst one split
takes many deliveries in one transaction, which is what lets the webhook accept alerts as
fast as Alertmanager sends them. A delivery left by a crash is split at the next start.

A delivery that cannot be split is quarantined by the store (kept as received, passed over
by every later split, across restarts and replicas) and said here: one error line naming it,
the `gpubot_deliveries_quarantined_total` counter, and `on_quarantine(delivery_id, why)`,
which `gpubot serve` wires to a chat notice. What this module must never do: let one
delivery hold up the ones behind it, or raise out of `on_quarantine`'s failure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from bot.errors import InputError
from bot.model import Signal
from bot.ports import SignalStore
from bot.process.telemetry import Telemetry
from bot.rules.loading import AlertMapping
from bot.sources.alertmanager.payloads import signals_from_body

log = logging.getLogger("gpubot.inbox")

# Deliveries per write: at 100 alerts each, about 2,000 signals, a short hold of SQLite's one
# write lock (the webhook's inserts wait for it). The store also stops at a few megabytes of
# bodies (`SqlSignals.split_deliveries`' `max_bytes`), whatever their number.
SPLIT_BATCH = 20

SPLIT_SIGNALS = 5000
"""New signals one `Inbox.split` hands on at most: what a pass takes as its batch. A backlog
(321,200 signals after an outage, issue 15) is split and diagnosed a part at a time, not
held in memory at once; the rest waits in the store for the next call."""


class Inbox:
    """Owns nothing but its wiring: the store keeps the deliveries and the quarantine."""

    def __init__(
        self,
        store: SignalStore,
        node_labels: Sequence[str],
        telemetry: Telemetry | None = None,
        *,
        on_quarantine: Callable[[int, str], None] | None = None,
        mapping: AlertMapping | None = None,
    ) -> None:
        """`mapping`: how alerts of rule sets gpubot did not write are read (the settings'
        `alerts_file`, loaded once at start); the shipped one when None."""
        self.store = store
        self.node_labels = list(node_labels)
        self.telemetry = telemetry
        self.on_quarantine = on_quarantine
        self.mapping = mapping

    def split(self, at_most: int | None = None) -> list[Signal]:
        """Waiting deliveries (or the `at_most` oldest) split, oldest first, until
        `SPLIT_SIGNALS` new signals are in hand (`more_waiting`) or none wait: the signals
        new to the store, in the order they were delivered."""
        new: list[Signal] = []
        batch = SPLIT_BATCH if at_most is None else min(at_most, SPLIT_BATCH)
        while len(new) < SPLIT_SIGNALS:
            taken = self.store.split_deliveries(self._signals, batch)
            new += taken.signals
            if self.telemetry is not None:
                received = len(taken.signals) + taken.duplicates
                if received:
                    self.telemetry.signals_received.labels(source="alertmanager").inc(received)
                if taken.duplicates:
                    self.telemetry.signals_duplicate.labels(source="alertmanager").inc(
                        taken.duplicates
                    )
                if taken.dropped:
                    self.telemetry.deliveries_dropped.inc(taken.dropped)
                    self.telemetry.deliveries_quarantined.inc(taken.dropped)
            for delivery_id, why in taken.quarantined:
                self._said(delivery_id, why)
            if taken.deliveries == 0 or at_most is not None:
                break
        return new

    @staticmethod
    def more_waiting(new: Sequence[Signal]) -> bool:
        """Did the `split` that gave `new` stop at its bound, with deliveries perhaps still
        waiting? Then its caller asks again once `new` is diagnosed."""
        return len(new) >= SPLIT_SIGNALS

    def _said(self, delivery_id: int, why: str) -> None:
        log.error(
            "delivery %d cannot be split into signals: quarantined (kept in the store, "
            "passed over by every split): %s",
            delivery_id,
            why,
        )
        if self.on_quarantine is None:
            return
        try:
            self.on_quarantine(delivery_id, why)
        except Exception:
            log.exception("telling of quarantined delivery %d failed", delivery_id)

    def _signals(self, source: str, body: bytes) -> list[Signal]:
        if source != "alertmanager":
            raise InputError("delivery", f"unknown source {source!r}")
        return signals_from_body(body, self.node_labels, self.mapping)
