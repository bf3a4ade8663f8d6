"""The alerts firing now, as a diagnosis pass reads them from the store.

Why it exists: with 20,000 alerts firing, parsing each kind's newest alert again on every
pass was most of a pass (issue 18). The store counts alerts per kind (node, name, GPU, Xid:
one row each, however many alerts); a pass reads the counts and only the alerts it has not
seen before.

What it must never do: hold more than one alert per kind the store counts, or answer an alert
the store no longer counts as firing.
"""

from __future__ import annotations

from bot.model import Signal
from bot.ports import SignalStore


class FiringAlerts:
    """Owns the newest alert of each firing kind, kept between passes, with the count of its
    kind as last read. Holds at most one alert per kind the store counts
    (`SignalStore.firing_kinds`); a kind gone from the store is dropped at the next read."""

    def __init__(self, store: SignalStore) -> None:
        self.store = store
        self._held: dict[int, Signal] = {}

    def read(self) -> list[Signal]:
        kinds = self.store.firing_kinds()
        missing = [kind.newest for kind in kinds if kind.newest not in self._held]
        found = self.store.signals_by_id(missing) if missing else {}
        held: dict[int, Signal] = {}
        for kind in kinds:
            alert = self._held.get(kind.newest) or found.get(kind.newest)
            if alert is None:
                continue  # gone between the two reads: the next pass counts it again
            if alert.count != kind.firing:
                alert = alert.model_copy(update={"count": kind.firing})
            held[kind.newest] = alert
        self._held = held
        return list(held.values())
