"""A stale leader never acts (issue 31, findings 1 and 8): two `gpubot serve` processes on one
PostgreSQL and one simulated cluster, a drain of 20 pods held by a PodDisruptionBudget.

Frozen: the executing replica is stopped (SIGSTOP) mid-drain; the other takes the Lease and
the execution over and finishes the drain once the budget lets go; the pods it evicted are
replaced by pods of the same names (as a StatefulSet does); then the frozen one wakes. Before,
every eviction thread's back-off had expired by then and it sent 16-22 evictions within 0.1 s,
before its heartbeat thread learned it had been taken over: nine pods evicted twice, one of
them a replacement. Now its fence asks the store before any write, so no eviction thread starts
a new request. What no fence can stop is a request already past it when the process froze (at
most one per eviction thread; a freeze that lands in the first burst of a drain caught 0-8 in
20 rounds): it leaves on wake carrying the uid of the pod as planned, and the API server refuses it
(409 against the replacement, 404 if none). Every pod is evicted exactly once either way.

Stopped: the executing replica gets SIGTERM mid-drain. Before, it released the Lease, then
lingered 90 s holding the execution (heartbeating as a non-leader) until it was killed. Now it
hands the execution over (the timeline says so) and exits within seconds, and the other
replica finishes the drain.

`GPUBOT_FENCING_ROUNDS` repeats the frozen case (CI runs it twice; the closing note of issue
31 reports 20 rounds).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bot.store.sql import SqlStore
from gpusim import objects
from gpusim.resources import BY_KIND
from gpusim.state import ClusterState
from tests.helpers.kubectl import kubectl_as, needs_kubectl
from tests.helpers.processes import (
    NODE,
    Gpubot,
    Serve,
    cluster,
    finished,
    post_alert,
    running_gpubot,
    simulator,
    the_request,
    wait_for,
    xid_alert,
)
from tests.helpers.stores import postgres_answers, postgres_schema

WORKERS = 20
ROUNDS = int(os.environ.get("GPUBOT_FENCING_ROUNDS", "2"))
MERGE = "application/merge-patch+json"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    why = postgres_answers()
    if why is not None:
        pytest.skip(why)
    with postgres_schema() as url:
        SqlStore.open(url).close()
        yield url


def _held_workers(store: ClusterState) -> list[str]:
    """WORKERS pods of one ReplicaSet on NODE, none of which its budget lets go."""
    now = datetime.now(UTC)
    names = [f"trainer-{i:02d}" for i in range(WORKERS)]
    for name in names:
        store.create(
            BY_KIND["Pod"],
            "ml",
            objects.pod(
                name,
                "ml",
                NODE,
                now,
                labels={"app": "trainer"},
                owner_ref=objects.owner("ReplicaSet", "trainer-6c4d"),
                host_ip=objects.node_ip(NODE),
            ),
        )
    store.create(
        BY_KIND["PodDisruptionBudget"],
        "ml",
        objects.pdb("trainer-pdb", "ml", {"app": "trainer"}, WORKERS, WORKERS),
    )
    return names


def _let_go(store: ClusterState) -> None:
    store.patch(
        BY_KIND["PodDisruptionBudget"], "ml", "trainer-pdb", MERGE, {"spec": {"minAvailable": 0}}
    )


def _lease_holder(store: ClusterState) -> str | None:
    try:
        lease = store.get(BY_KIND["Lease"], "gpubot", "gpubot-leader")
    except Exception:
        return None
    return str((lease.get("spec") or {}).get("holderIdentity") or "") or None


def _draining(
    store: SqlStore, sim_store: ClusterState, server: Any, bot: Gpubot
) -> tuple[Any, Serve, Serve]:
    """Two replicas, the alert, the drain approved and its evictions refused by the budget:
    (the request, the replica executing it, the other one)."""
    replicas = [bot.serve("replica-a"), bot.serve("replica-b")]
    for replica in replicas:
        replica.wait_listening()
    holder = wait_for("a leader", lambda: _lease_holder(sim_store), 15, bot)
    [leader] = [r for r in replicas if r.identity == holder]
    [other] = [r for r in replicas if r is not leader]
    status, _ = post_alert(leader, xid_alert(sim_store, NODE))
    assert status == 200
    drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
    bot.approve(drain.id)
    wait_for(
        "the budget to refuse the leader's evictions",
        lambda: (
            store.execution(drain.id) is not None
            and store.execution(drain.id).outcome == "acting"
            and any(e.subresource == "eviction" and e.code == 429 for e in server.audit())
        ),
        30,
        bot,
    )
    return drain, leader, other


@needs_kubectl
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_a_replica_frozen_mid_drain_sends_nothing_when_it_wakes(
    round_: int, postgres_url: str, tmp_path: Path
) -> None:
    sim_store = cluster()
    workers = _held_workers(sim_store)
    with (
        simulator(sim_store) as server,
        running_gpubot(tmp_path, server.url, postgres_url) as bot,
    ):
        store = SqlStore.open(postgres_url)
        try:
            drain, frozen, other = _draining(store, sim_store, server, bot)
            os.kill(frozen.pid, signal.SIGSTOP)
            try:
                wait_for(
                    "the other replica to take the drain over",
                    lambda: (store.execution(drain.id) or drain).executor == other.identity,
                    30,
                    bot,
                )
                _let_go(sim_store)
                done = wait_for("the drain to finish", lambda: finished(store, drain.id), 60, bot)
                assert done.outcome == "succeeded" and done.executor == other.identity, done
                evicted = [name for _ns, name in sim_store.evictions if name.startswith("trainer-")]
                assert sorted(evicted) == sorted(workers)  # each once, by the new owner
                assert len(sim_store.evictions) == len(set(sim_store.evictions))
                # As a StatefulSet would: the same names, new pods (new uids).
                replaced = {}
                for name in workers:
                    pod = objects.pod(
                        name,
                        "ml",
                        NODE,
                        datetime.now(UTC),
                        labels={"app": "trainer"},
                        owner_ref=objects.owner("StatefulSet", "trainer"),
                    )
                    replaced[name] = sim_store.create(BY_KIND["Pod"], "ml", pod)["metadata"]["uid"]
                woke_at = len(server.audit())
            finally:
                os.kill(frozen.pid, signal.SIGCONT)
            wait_for(
                "the woken replica to give the drain up",
                lambda: any(
                    e.kind == "note" and "another gpubot took" in e.text
                    for e in store.timeline(drain.incident or "")
                ),
                30,
                bot,
            )
            time.sleep(2)  # every eviction thread's back-off has long passed
            after = [e for e in server.audit()[woke_at:] if e.subresource == "eviction"]
            print(f"round {round_}: {len(after)} eviction(s) past the fence when frozen")
            assert all(e.code in (404, 409) for e in after), [str(e) for e in after]
            assert len({e.name for e in after}) == len(after) <= WORKERS, [str(e) for e in after]
            evicted = [name for _ns, name in sim_store.evictions if name.startswith("trainer-")]
            assert sorted(evicted) == sorted(workers)  # still each exactly once
            taken = [
                (i, e.user, e.name, e.code)
                for i, e in enumerate(server.audit())
                if e.subresource == "eviction" and e.code < 300 and e.name.startswith("trainer-")
            ]
            assert sorted(n for _i, _u, n, _c in taken) == sorted(workers), (woke_at, taken)
            assert len(sim_store.evictions) == len(set(sim_store.evictions))
            # What an operator sees: the replacements stand, each the pod created after.
            kubectl = kubectl_as(server, tmp_path)
            shown = kubectl(
                "get",
                "pods",
                "-n",
                "ml",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name} {.metadata.uid}{'\\n'}{end}",
            )
            assert shown.returncode == 0, shown.stderr
            standing = dict(line.split() for line in shown.stdout.splitlines() if line)
            assert {n: standing.get(n) for n in replaced} == replaced
        finally:
            store.close()


def test_a_replica_told_to_stop_mid_drain_hands_it_over_and_exits(
    postgres_url: str, tmp_path: Path
) -> None:
    sim_store = cluster()
    workers = _held_workers(sim_store)
    with (
        simulator(sim_store) as server,
        running_gpubot(tmp_path, server.url, postgres_url) as bot,
    ):
        store = SqlStore.open(postgres_url)
        try:
            drain, stopping, other = _draining(store, sim_store, server, bot)
            told_at = time.monotonic()
            stopping.process.send_signal(signal.SIGTERM)
            stopping.process.wait(timeout=20)
            took = time.monotonic() - told_at
            assert took < 10, f"exited {took:.1f} s after SIGTERM"
            notes = [e.text for e in store.timeline(drain.incident or "") if e.kind == "note"]
            assert any("replica-" in n and "handed over" in n for n in notes), notes
            wait_for(
                "the other replica to take the drain over",
                lambda: (store.execution(drain.id) or drain).executor == other.identity,
                15,
                bot,
            )
            _let_go(sim_store)
            done = wait_for("the drain to finish", lambda: finished(store, drain.id), 60, bot)
            assert done.outcome == "succeeded" and done.executor == other.identity, done
            evicted = [name for _ns, name in sim_store.evictions if name.startswith("trainer-")]
            assert sorted(evicted) == sorted(workers)
        finally:
            store.close()
