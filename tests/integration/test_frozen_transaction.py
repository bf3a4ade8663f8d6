"""A replica frozen inside a transaction does not hold the others up (found by
tests/e2e/test_fencing.py: one run in ten, the frozen replica had stopped between a timeline
INSERT and its COMMIT, holding its incident's row lock, and the replica that took its drain
over waited behind that lock for as long as the other slept: the drain never finished).

The frozen one here is a real process with gpubot's own store, stopped by SIGSTOP with a
transaction open; the other is this test's store on the same PostgreSQL schema."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from bot.model import IncidentState
from bot.store.database import IDLE_IN_TRANSACTION_S
from bot.store.sql import SqlStore
from tests.helpers.builders import T0, diagnosis
from tests.helpers.stores import postgres_answers, postgres_schema

FROZEN_MID_TRANSACTION = """
import os, signal, sys
import sqlalchemy as sa
from bot.store.sql import SqlStore
from bot.store.tables import incidents

store = SqlStore.open(sys.argv[1], migrate=False)
with store.db.tx() as tx:
    row = incidents.c.id == int(sys.argv[2])
    tx.execute(sa.select(incidents.c.id).where(row).with_for_update())
    print("holding", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
print("committed", flush=True)
"""


@pytest.fixture
def postgres_url() -> Iterator[str]:
    why = postgres_answers()
    if why is not None:
        pytest.skip(why)
    with postgres_schema() as url:
        yield url


def test_a_replica_frozen_mid_transaction_lets_go_of_its_locks(postgres_url: str) -> None:
    store = SqlStore.open(postgres_url)
    frozen = None
    try:
        incident = store.record_diagnosis("prod", diagnosis(), T0, 3600).incident
        frozen = subprocess.Popen(
            [sys.executable, "-c", FROZEN_MID_TRANSACTION, postgres_url, incident.id],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert frozen.stdout is not None
        assert frozen.stdout.readline().strip() == "holding"
        moved: list[object] = []
        started = time.monotonic()
        writer = threading.Thread(
            target=lambda: moved.append(
                store.transition(incident.id, IncidentState.DIAGNOSED, "gpubot", T0)
            ),
            daemon=True,
        )
        writer.start()
        writer.join(IDLE_IN_TRANSACTION_S + 10)
        waited = time.monotonic() - started
        assert moved, f"the other replica's write still waits after {waited:.0f} s"
        assert store.incident(incident.id).state is IncidentState.DIAGNOSED
        # The frozen one wakes to find its session ended: its transaction is not committed,
        # and what it is told is the store's outage, not a bug.
        os.kill(frozen.pid, signal.SIGCONT)
        out, err = frozen.communicate(timeout=30)
        assert "committed" not in out
        assert "bot.errors.StoreUnavailable" in err and "idle-in-transaction" in err, err
    finally:
        if frozen is not None and frozen.poll() is None:
            os.kill(frozen.pid, signal.SIGCONT)
            frozen.kill()
        store.close()
