"""A drain that listens and stops (issue 31, findings 1 to 3), on the simulator through the real
client: the API server's `Retry-After` and its failures slow every eviction thread at once
(counted in the API server's audit), an eviction names the uid it was planned for (a
replacement pod of the same name is never evicted), nothing goes out once the owner's fence
says no, and a blocked drain is told as its blockers and quarters, not a line per refusal."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.acting.draining import STOPPED, DrainProgress, drain
from bot.model import Action
from gpusim import objects
from gpusim.resources import BY_KIND
from tests.helpers.rigs import make_rig

Sim = tuple[Any, Any]
NODE = "gpu-a3"
MERGE = "application/merge-patch+json"


def _workers(server: Any, count: int, *, held: bool) -> list[str]:
    """`count` pods of one ReplicaSet on NODE; with `held`, a budget lets none of them go."""
    now = datetime.now(UTC)
    names = [f"fleet-job-{i}" for i in range(count)]
    for name in names:
        server.store.create(
            BY_KIND["Pod"],
            "ml",
            objects.pod(
                name,
                "ml",
                NODE,
                now,
                labels={"app": "fleet-job"},
                owner_ref=objects.owner("ReplicaSet", "fleet-job-7d9f"),
            ),
        )
    if held:
        server.store.create(
            BY_KIND["PodDisruptionBudget"],
            "ml",
            objects.pdb("fleet-pdb", "ml", {"app": "fleet-job"}, count, count),
        )
    return names


def _release(server: Any) -> None:
    server.store.patch(
        BY_KIND["PodDisruptionBudget"], "ml", "fleet-pdb", MERGE, {"spec": {"minAvailable": 0}}
    )


def _eviction_answers(server: Any, since: int) -> list[int]:
    return [e.code for e in server.audit()[since:] if e.subresource == "eviction"]


def test_a_throttling_api_server_is_asked_again_when_it_says_not_by_every_thread_at_once(
    sim_cluster: Sim,
) -> None:
    """429 with Retry-After 2 for 6 s: before, every eviction thread retried on its own every
    0.2-2 s (a throttled server got 11-14 evictions a second); now one request probes after
    each wait the server asked for."""
    server, cluster = sim_cluster
    pods = _workers(server, 10, held=False)
    since = len(server.audit())
    server.pressure.apply(429, 6, retry_after_s=2, path_part="/eviction")
    started = time.monotonic()
    result = drain(cluster, NODE, timeout_s=60)
    took = time.monotonic() - started
    assert result.completed, result.stalled
    assert {("ml", p) for p in pods} <= set(result.evicted)
    answers = _eviction_answers(server, since)
    refused = answers.count(429)
    # The first wave (one per thread) meets the 429 before anyone has heard it; after it, one
    # probe per Retry-After.
    assert 1 <= refused <= len(result.plan.to_remove) + 4, answers
    assert took >= 5.5  # the server's wait was honoured, not raced


def test_a_failing_api_server_is_backed_off_from_together(sim_cluster: Sim) -> None:
    """500 for 4 s without Retry-After: exponential back-off with jitter, one probe at a time."""
    server, cluster = sim_cluster
    _workers(server, 10, held=False)
    since = len(server.audit())
    server.pressure.apply(500, 4, path_part="/eviction")
    result = drain(cluster, NODE, timeout_s=60)
    assert result.completed, result.stalled
    failed = _eviction_answers(server, since).count(500)
    assert 1 <= failed <= len(result.plan.to_remove) + 8, failed


def test_a_pod_replaced_under_the_same_name_is_never_evicted_by_the_plan_made_for_the_first(
    sim_cluster: Sim,
) -> None:
    """Every eviction carries the uid it was planned for: a StatefulSet (or a person) that
    recreates a pod under its name while the drain waits gets a 409 from the server, and the
    new pod stays."""
    server, cluster = sim_cluster
    [name] = _workers(server, 1, held=True)
    first_uid = server.store.get(BY_KIND["Pod"], "ml", name)["metadata"]["uid"]
    blocked = threading.Event()

    def progress(p: DrainProgress) -> None:
        if p.event == "blocked" and p.pod == f"ml/{name}":
            blocked.set()

    done: list[Any] = []
    runner = threading.Thread(
        target=lambda: done.append(drain(cluster, NODE, timeout_s=30, on_progress=progress))
    )
    runner.start()
    assert blocked.wait(15)
    since = len(server.audit())
    server.store.delete(BY_KIND["Pod"], "ml", name, 0)
    replacement = objects.pod(
        name,
        "ml",
        NODE,
        datetime.now(UTC),
        labels={"app": "fleet-job"},
        owner_ref=objects.owner("StatefulSet", "fleet-job"),
    )
    second_uid = server.store.create(BY_KIND["Pod"], "ml", replacement)["metadata"]["uid"]
    _release(server)
    runner.join(30)
    [result] = done
    assert result.completed, result.stalled
    still = server.store.get(BY_KIND["Pod"], "ml", name)
    assert still["metadata"]["uid"] == second_uid != first_uid
    assert ("ml", name) not in server.store.evictions
    assert 409 in _eviction_answers(server, since)


def test_no_eviction_goes_out_once_the_fence_says_no(sim_cluster: Sim) -> None:
    """The owner's fence is asked right before every eviction: once it says no (taken over,
    shutting down), the threads waiting on a budget send nothing more, even when the budget
    frees, and stop at once when told to."""
    server, cluster = sim_cluster
    pods = _workers(server, 5, held=True)
    blocked = threading.Event()
    fence_open = [True]
    stop = threading.Event()
    done: list[Any] = []

    def progress(p: DrainProgress) -> None:
        if p.event == "blocked":
            blocked.set()

    runner = threading.Thread(
        target=lambda: done.append(
            drain(
                cluster,
                NODE,
                timeout_s=60,
                on_progress=progress,
                keep_going=lambda: fence_open[0],
                stop=stop,
            )
        )
    )
    runner.start()
    assert blocked.wait(15)
    fence_open[0] = False
    time.sleep(0.5)  # a request that passed the fence just before it closed has its answer
    since = len(server.audit())
    _release(server)
    time.sleep(3)  # every thread's back-off passes: each asks its fence, none evicts
    stop.set()
    started = time.monotonic()
    runner.join(10)
    assert time.monotonic() - started < 2  # told to stop, the drain ends its waits at once
    [result] = done
    assert not [e for e in server.audit()[since:] if e.subresource == "eviction"]
    assert not {("ml", p) for p in pods} & set(server.store.evictions)
    assert {s.reason for s in result.stalled if s.name in pods} == {STOPPED}


def test_a_blocked_drain_tells_each_blocker_once_and_its_quarters(
    sim_cluster: Sim, tmp_path: Path
) -> None:
    """Eight pods held by one budget for a few seconds, then let go: the incident's timeline
    has one line for the blocker (not one per pod per refusal: a drain blocked 40 s wrote 56)
    and a line per quarter, the first of them saying what still blocks."""
    server, _cluster = sim_cluster
    rig = make_rig((server, _cluster), tmp_path)
    _workers(server, 8, held=True)
    drain_id = rig.request(Action.DRAIN, NODE)
    assert rig.wing.approve(drain_id, "alice").status == "need-another"

    releaser = threading.Timer(4, _release, (server,))
    releaser.start()
    outcome = rig.wing.approve(drain_id, "bob")
    releaser.join()
    assert outcome.status == "succeeded", outcome.message
    progress = [e for e in rig.store.timeline(rig.incident) if e.kind == "action-progress"]
    blocked = [e.text for e in progress if e.text.startswith("blocked ")]
    assert len(blocked) == 1, [e.text for e in progress]
    assert "fleet-pdb" in blocked[0]
    quarters = [e.text for e in progress if e.text.startswith("evicted ")]
    assert 1 <= len(quarters) <= 4, quarters
    assert quarters[-1].startswith("evicted ") and "/" in quarters[-1]
    assert len(progress) <= 5, [e.text for e in progress]


def test_a_drain_no_incident_holds_tells_its_start_and_blockers_where_it_was_asked(
    sim_cluster: Sim, tmp_path: Path
) -> None:
    """`/gpubot drain NODE` with no incident on the node: a drain blocked for a while used to
    post nothing and keep no record; its start and its blocker now go where it was asked."""
    server, cluster = sim_cluster
    rig = make_rig((server, cluster), tmp_path, drain_timeout_s=3)
    _workers(server, 3, held=True)
    told: list[tuple[str, str, str]] = []
    rig.wing.timeline.on_request = lambda request, kind, text: told.append((request.id, kind, text))
    facts = rig.wing.facts.of_node(NODE)
    request = rig.wing.proposals.request(Action.DRAIN, facts.nodes[NODE], None, "carol")
    assert rig.wing.approve(request.id, "alice").status == "need-another"
    outcome = rig.wing.approve(request.id, "bob")
    assert outcome.status == "failed"  # the budget never let go
    kinds = [kind for request_id, kind, _ in told if request_id == request.id]
    assert kinds[0] == "action-start"
    progress = [text for _, kind, text in told if kind == "action-progress"]
    blocked = [text for text in progress if text.startswith("blocked ")]
    assert len(blocked) == 1 and "fleet-pdb" in blocked[0], told
    assert [t for t in progress if "still blocked by PDB ml/fleet-pdb" in t], told
