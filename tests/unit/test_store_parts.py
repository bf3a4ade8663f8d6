"""`SqlStore` is its four parts mixed in over one database: each port method is written in
the part of its Protocol, and no two parts define the same name (with mixins the first in
the method resolution order would win without a word)."""

from __future__ import annotations

from bot.ports import ActionStore, IncidentStore, Outbox, SignalStore, Store
from bot.store.actions import SqlActions
from bot.store.incidents import SqlIncidents
from bot.store.outbox import SqlOutbox
from bot.store.signals import SqlSignals
from bot.store.sql import SqlStore

PARTS: dict[type, type] = {
    SqlSignals: SignalStore,
    SqlIncidents: IncidentStore,
    SqlOutbox: Outbox,
    SqlActions: ActionStore,
}


def _methods(cls: type) -> set[str]:
    """The names a class itself defines that behave: methods, properties, class methods."""
    return {
        name
        for name, value in vars(cls).items()
        if not name.startswith("__")
        and (callable(value) or isinstance(value, property | classmethod | staticmethod))
    }


def test_no_two_parts_of_the_store_define_the_same_name() -> None:
    owner: dict[str, str] = {}
    for part in PARTS:
        for name in _methods(part):
            assert name not in owner, f"{name} is defined by {owner[name]} and {part.__name__}"
            owner[name] = part.__name__


def test_each_port_method_is_written_in_the_part_of_its_protocol() -> None:
    for part, port in PARTS.items():
        missing = _methods(port) - _methods(part)
        assert not missing, f"{part.__name__} leaves {sorted(missing)} of {port.__name__}"


def test_the_store_port_is_the_four_parts_and_the_store_is_all_of_them() -> None:
    combined = set().union(*(_methods(port) for port in PARTS.values()))
    assert combined  # the probe sees the Protocols' methods
    assert _methods(Store) == set()  # Store adds nothing of its own
    assert [c for c in SqlStore.__mro__ if c in PARTS] == list(PARTS)
    assert _methods(SqlStore) == {"open", "close"}
