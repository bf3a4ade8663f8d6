"""Two replicas (issue 6, DESIGN.md invariant 3): two `gpubot serve` processes on one
PostgreSQL schema and one simulated cluster, both taking webhooks and watching the cluster,
one leading through the `gpubot/gpubot-leader` Lease. The leader is killed with SIGKILL
right after an approval is recorded — once while it is draining, once at once — and the
other replica takes the Lease over within the lease duration and finishes the action:
one execution, one cordon, every pod evicted once.

The pods that must leave are held by a finalizer (see tests/e2e/test_restart.py), so a leader
killed "while it drains" really is mid-drain, and the survivor is seen waiting for a pod
before the test lets the pods go.
"""

from __future__ import annotations

import threading
import time
import urllib.error
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from bot.store.sql import SqlStore
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState
from tests.helpers.processes import (
    NODE,
    Serve,
    cluster,
    evictable_pods,
    execution_count,
    finished,
    post_alert,
    running_gpubot,
    simulator,
    the_request,
    wait_for,
    xid_alert,
)
from tests.helpers.stores import postgres_answers, postgres_schema

LEASE_S, RETRY_S = 3.0, 0.5
"""As tests/e2e/test_restart.py's `write_settings` sets them."""
TAKEOVER_SLACK_S = 0.5
"""HTTP round trips and two busy cores, on top of the lease duration and one retry period."""


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh, already migrated PostgreSQL schema. Migrated here, before the replicas start:
    two replicas starting at once on an empty database race to create the schema and one
    crashes (a defect reported with these tests); production migrates first anyway."""
    why = postgres_answers()
    if why is not None:
        pytest.skip(why)
    with postgres_schema() as url:
        SqlStore.open(url).close()
        yield url


def lease_holder(store: ClusterState) -> str | None:
    try:
        lease = store.get(BY_KIND["Lease"], "gpubot", "gpubot-leader")
    except ApiError:
        return None
    return str((lease.get("spec") or {}).get("holderIdentity") or "") or None


def cordons(store: ClusterState, node: str) -> int:
    """How often the node went from schedulable to cordoned, from the watch history."""
    flips, cordoned = 0, False
    for event in store.watch(
        BY_KIND["Node"], "", since=1000, field_selector=f"metadata.name={node}", timeout_s=0.3
    ):
        assert event.type != "ERROR", event.object
        now = bool((event.object.get("spec") or {}).get("unschedulable"))
        flips += now and not cordoned
        cordoned = now
    return flips


def deliver(replicas: list[Serve], payload: dict[str, Any]) -> list[dict[str, Any]]:
    """The same alert to every replica at the same moment, each retried on a 5xx as
    Alertmanager does; the final answers."""
    answers: list[dict[str, Any]] = []
    start = threading.Barrier(len(replicas))

    def send(served: Serve) -> None:
        start.wait()
        for _attempt in range(3):
            try:
                status, body = post_alert(served, payload)
            except urllib.error.URLError as exc:
                status, body = 599, {"error": str(exc)}
            if status < 500:
                break
        answers.append({"status": status, **body})

    threads = [threading.Thread(target=send, args=(r,)) for r in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


@pytest.mark.parametrize("kill", ["while-it-drains", "right-after-the-approval"])
def test_the_leader_killed_after_an_approval_the_other_finishes_it_exactly_once(
    kill: str, postgres_url: str, tmp_path: Path
) -> None:
    sim_store = cluster(held_pods=4)
    must_leave = evictable_pods(sim_store, NODE)
    with (
        simulator(sim_store) as server,
        running_gpubot(tmp_path, server.url, postgres_url) as bot,
    ):
        store = SqlStore.open(postgres_url)
        try:
            replicas = [bot.serve("replica-a", watch=True), bot.serve("replica-b", watch=True)]
            for replica in replicas:
                replica.wait_listening()
            holder = wait_for("a leader", lambda: lease_holder(sim_store), 15, bot)
            [leader] = [r for r in replicas if r.identity == holder]
            [follower] = [r for r in replicas if r is not leader]

            # Both take the webhook; the store keeps one signal, one incident, one proposal.
            answers = deliver(replicas, xid_alert(sim_store, NODE))
            assert [a["status"] for a in answers] == [200, 200], answers
            assert [a["accepted"] for a in answers] == [1, 1], answers
            wait_for("both deliveries split", lambda: store.deliveries_waiting() == 0, 15, bot)
            alerts = [s for s in store.signals(node=NODE) if s.source == "alertmanager"]
            assert len(alerts) == 1, alerts
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
            incidents = [i for i in store.incidents(node=NODE) if i.rule == "gpu-fell-off-bus"]
            assert [i.id for i in incidents] == [drain.incident]
            assert len(store.requests(drain.incident or "")) == 1
            assert cordons(sim_store, NODE) == 0

            # `gpubot approve` records the vote; the leader's duties pick it up within 0.5 s.
            approving = ThreadPoolExecutor(1).submit(bot.approve, drain.id)
            wait_for("the vote", lambda: store.votes(drain.id), 30, bot)
            if kill == "while-it-drains":
                wait_for("the leader to evict", lambda: sim_store.evictions, 15, bot)
                claimed = store.execution(drain.id)
                assert claimed is not None and claimed.executor == leader.identity, claimed
            assert lease_holder(sim_store) == leader.identity
            reads_at_kill = len(sim_store.pod_reads)
            leader.kill()
            killed_at = time.monotonic()
            at_kill = store.execution(drain.id)
            assert "approved by alice" in approving.result(timeout=60)

            wait_for(
                "the follower to take the lease over",
                lambda: lease_holder(sim_store) == follower.identity,
                LEASE_S + 10,
                bot,
            )
            took = time.monotonic() - killed_at
            assert took <= LEASE_S + RETRY_S + TAKEOVER_SLACK_S, f"took over after {took:.2f} s"

            wait_for(
                "the new leader's drain to wait for a pod",
                lambda: must_leave & set(sim_store.pod_reads[reads_at_kill:]),
                15,
                bot,
            )
            sim_store.release(NODE)
            done = wait_for(
                "the drain to finish",
                lambda: finished(store, drain.id),
                30,
                bot,
            )
            assert done.outcome == "succeeded", done
            assert execution_count(store) == 1
            assert cordons(sim_store, NODE) == 1
            assert [n for n in ("gpu-a1", "gpu-a3", "gpu-a4") if cordons(sim_store, n)] == []
            evicted = list(sim_store.evictions)
            assert len(evicted) == len(set(evicted)), evicted
            assert set(evicted) == must_leave
            assert sim_store.direct_deletes == []

            entries = store.timeline(drain.incident or "")
            mine = [e for e in entries if e.data.get("request") == drain.id]
            kinds = [e.kind for e in mine]
            assert kinds.count("action-start") == kinds.count("action-result") == 1, kinds
            resumed = [e for e in mine if "after a restart" in e.text]
            # Either way the new leader finished it: it took a claim over once its owner's
            # heartbeat went stale, or claimed the approval itself.
            assert done.executor == follower.identity, done
            if at_kill is not None:
                # Claimed by the leader before it died: the new leader resumed it (or, when
                # the claim had not got past its checks, ran it again from them), once.
                taken = [e for e in mine if e.kind == "note" and leader.identity in e.text]
                assert len(taken) == 1, taken
            else:
                # Killed before it claimed: the new leader picked the approval up itself.
                assert kill == "right-after-the-approval"
                assert resumed == [], resumed
            how = "claimed before the kill, resumed" if at_kill else "claimed after the kill"
            print(
                f"{kill}: leader {leader.identity} killed, lease taken over after {took:.2f} s; "
                f"{how} by {follower.identity} (execution of {done.executor})"
            )
        finally:
            store.close()
