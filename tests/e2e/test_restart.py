"""Restart safety (issue 6, DESIGN.md invariants 3 and 8) with real processes: `gpubot serve`
runs as a subprocess against the simulated cluster (served from this test process, so every
eviction request is counted in `ClusterState.evictions`) and a SQLite store file, and is killed with
SIGKILL — mid-drain, and with an approval pending. After a restart on the same store every
pod has been evicted exactly once, the timeline tells the whole story, the pending request
kept its expiry, and a further restart repeats nothing.

How the kill lands mid-drain, every time: each pod that has to leave carries a finalizer
(`HOLD`: a controller that flushes a pod's logs before letting it go), so an evicted pod
stays Terminating until the test — playing that controller — releases it. The drain evicts
at most 32 pods at once (32 workers, each evicting one pod and then waiting for it to be
gone) and the node has more than that, so when the first eviction shows, the process is
killed with some pods evicted and Terminating and the others not yet asked. The test
releases the pods only once the restarted replica's drain is seen waiting for one of the
pods evicted before the kill (`HoldingClusterState.pod_reads`): so the resumed drain must take
those as "already going" and evict only the others. Evicting one again would show as a
duplicate in `ClusterState.evictions`.

The helpers (`Gpubot`, `running_gpubot`, `wait_for`, ...) are in `tests/helpers/processes.py`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from bot.commands import app
from bot.config import load_settings
from bot.diagnose import diagnose
from bot.facts.collecting import collect_facts
from bot.facts.live import read_snapshot
from bot.model import IncidentState
from bot.roots.offline import load_ruleset
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from bot.store.sql import SqlStore
from gpusim import faults
from gpusim.resources import BY_KIND
from tests.helpers.clocks import FakeClock
from tests.helpers.processes import (
    HELD_PODS,
    NODE,
    cluster,
    evictable_pods,
    execution_count,
    finished,
    kinds_in_order,
    post_alert,
    running_gpubot,
    simulator,
    the_request,
    wait_for,
    write_settings,
    xid_alert,
)
from tests.helpers.rigs import build_wing, nobody_looked

# ---- the tests ------------------------------------------------------------------------------


def test_sigkill_mid_drain_then_restart_evicts_every_pod_exactly_once(tmp_path: Path) -> None:
    sim_store = cluster(held_pods=HELD_PODS)
    must_leave = evictable_pods(sim_store, NODE)
    assert len(must_leave) == HELD_PODS + 2  # the batch pods, a training worker, an agent
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
        store = SqlStore.open(url)
        try:
            first = bot.start("gpubot-0")
            status, answer = post_alert(first, xid_alert(sim_store, NODE))
            assert (status, answer["accepted"]) == (200, 1), answer
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
            assert store.votes(drain.id) == []

            bot.approve(drain.id)
            wait_for("the first eviction", lambda: sim_store.evictions, 30, bot)
            first.kill()
            reads_at_kill = len(sim_store.pod_reads)
            gone_before = set(sim_store.evictions)
            assert 0 < len(gone_before) < len(must_leave), (
                f"the kill did not land mid-drain: {len(gone_before)} of {len(must_leave)} evicted"
            )
            claimed = store.execution(drain.id)
            assert claimed is not None and claimed.finished_at is None, claimed
            assert claimed.executor == "gpubot-0"

            # A new replica (another name: it waits out the dead one's lease) resumes the
            # drain. Once it waits for a pod evicted before the kill, the pods may go.
            second = bot.start("gpubot-1")
            wait_for(
                "the resumed drain to wait for a pod evicted before the kill",
                lambda: gone_before & set(sim_store.pod_reads[reads_at_kill:]),
                30,
                bot,
            )
            sim_store.release(NODE)
            done = wait_for(
                "the resumed drain to finish",
                lambda: finished(store, drain.id),
                30,
                bot,
            )
            assert done.outcome == "succeeded", done
            assert done.executor == "gpubot-1"  # taken over from the dead one's claim
            assert execution_count(store) == 1

            # Invariant 3: no pod was asked to leave twice, and every one that had to, left.
            evicted = list(sim_store.evictions)
            assert len(evicted) == len(set(evicted)), sorted(
                p for p in set(evicted) if evicted.count(p) > 1
            )
            assert set(evicted) == must_leave
            assert sim_store.direct_deletes == []
            assert evictable_pods(sim_store, NODE) == set()
            node = sim_store.get(BY_KIND["Node"], "", NODE)
            assert node["spec"]["unschedulable"] is True

            # The timeline, as the CLI prints it, tells the whole story in order.
            [told] = [t for t in bot.timeline(NODE) if t["incident"]["rule"] == "gpu-fell-off-bus"]
            entries = told["timeline"]
            kinds_in_order(
                entries,
                [
                    ("diagnosis", "GPU fell off the bus"),
                    ("proposal", f"kubectl drain {NODE}"),
                    ("approval", "alice approved"),
                    ("action-start", f"kubectl drain {NODE}"),
                    ("note", "after a restart"),
                    ("action-result", f"drained {NODE}"),
                ],
            )
            mine = [e for e in entries if (e.get("data") or {}).get("request") == drain.id]
            assert [e["kind"] for e in mine].count("action-start") == 1
            assert [e["kind"] for e in mine].count("action-result") == 1
            [resumed] = [e for e in mine if "after a restart" in e["text"]]
            assert "by gpubot-0" in resumed["text"], resumed
            [result] = [e for e in mine if e["kind"] == "action-result"]
            assert result["data"]["outcome"] == "succeeded"
            # The message accounts for every pod: evicted now, or already leaving at the kill.
            evicted_now = len(must_leave) - len(gone_before)
            assert (
                f"evicted {evicted_now} pods, {len(gone_before)} already leaving" in result["text"]
            ), result["text"]

            # A second restart repeats nothing. An approval recorded while no replica runs
            # (a drain of gpu-a3) shows the new leader's duties ran: they resume before they
            # pick up approvals, and the blast radius refuses gpu-a3 while NODE is out.
            status, _ = post_alert(second, xid_alert(sim_store, "gpu-a3"))
            assert status == 200
            other = wait_for("gpu-a3's drain request", lambda: the_request(store, "gpu-a3"), 30)
            second.kill()
            timeline_before = [(e.kind, e.text) for e in store.timeline(told["incident"]["id"])]
            evictions_before = list(sim_store.evictions)
            bot.approve(other.id)
            bot.start("gpubot-1")
            judged = wait_for(
                "the approved gpu-a3 drain to be judged",
                lambda: finished(store, other.id),
                30,
                bot,
            )
            assert judged.outcome == "refused" and "blast radius" in judged.detail, judged
            assert sim_store.evictions == evictions_before
            assert store.execution(drain.id) == done
            assert store.unfinished_executions() == []
            timeline_after = [(e.kind, e.text) for e in store.timeline(told["incident"]["id"])]
            assert timeline_after == timeline_before
        finally:
            store.close()


def test_a_pending_approval_survives_sigkill_with_its_expiry_and_approving_then_works(
    tmp_path: Path,
) -> None:
    sim_store = cluster()
    must_leave = evictable_pods(sim_store, NODE)
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    with simulator(sim_store) as server, running_gpubot(tmp_path, server.url, url) as bot:
        store = SqlStore.open(url)
        try:
            first = bot.start("gpubot-0")
            assert post_alert(first, xid_alert(sim_store, NODE))[0] == 200
            drain = wait_for("the drain request", lambda: the_request(store, NODE), 30, bot)
            assert drain.incident is not None
            waiting = wait_for(
                "the incident to await approval",
                lambda: (
                    store.incident(drain.incident or "").state is IncidentState.AWAITING_APPROVAL
                ),
                10,
                bot,
            )
            assert waiting
            first.kill()

            # The same replica comes back (a container restart keeps its name).
            bot.start("gpubot-0")
            kept = store.request(drain.id)
            assert kept == drain  # same id, node, facts seen ... and the same expiry
            assert kept.expires_at > datetime.now(UTC) + timedelta(minutes=20)
            [proposal] = [
                e for e in store.timeline(drain.incident) if e.data.get("request") == drain.id
            ]
            assert proposal.kind == "proposal"
            assert proposal.data["expires_at"] == drain.expires_at.isoformat()
            assert store.incident(drain.incident).state is IncidentState.AWAITING_APPROVAL
            assert store.execution(drain.id) is None and sim_store.evictions == []

            bot.approve(drain.id)
            done = wait_for(
                "the approved drain to finish",
                lambda: finished(store, drain.id),
                30,
                bot,
            )
            assert done.outcome == "succeeded", done
            assert sorted(sim_store.evictions) == sorted(must_leave)
            assert sim_store.direct_deletes == []
            kinds = [e.kind for e in store.timeline(drain.incident)]
            assert "note" not in kinds[kinds.index("approval") :]  # nothing was resumed
            assert kinds.count("action-start") == kinds.count("action-result") == 1
        finally:
            store.close()


def test_an_approval_from_the_cli_moves_the_incident_through_its_states(
    sim_cluster: Any, tmp_path: Path
) -> None:
    """What the tests above leave out: the incident's states. An approval from `gpubot
    approve` is picked up by the leader (as after a restart); the incident must then go
    awaiting approval → approved → executing → succeeded like a click's."""
    server, kube = sim_cluster
    config = write_settings(tmp_path / "settings.yaml")
    settings = load_settings(config)
    url = f"sqlite:///{tmp_path / 'gpubot.db'}"
    store = SqlStore.open(url)
    try:
        now = datetime.now(UTC)
        payload = faults.inject(server.store, "xid", NODE, now, code=79, gpu=3).payload()
        signals = signals_from_payload(validate_payload(payload), ["node"])
        facts = collect_facts(read_snapshot(kube), signals, settings, now)
        diagnoses = diagnose(facts, signals, load_ruleset(settings), settings).diagnoses
        [found] = [d for d in diagnoses if d.node == NODE]
        incident = store.record_diagnosis("default", found, now, 3600).incident
        wing = build_wing(
            kube,
            store,
            settings,
            clock=FakeClock(real_time=True),
            executor_id="leader",
            external=nobody_looked,
        )
        [request] = wing.proposals.propose(incident.id, found, facts)
        assert store.incident(incident.id).state is IncidentState.AWAITING_APPROVAL

        # --wait 0: no serve here; this test's executor acts after the command returns.
        vote = ["approve", request.id, "--as", "alice", "--wait", "0"]
        result = CliRunner().invoke(app, [*vote, "--store-url", url, "--config", str(config)])
        assert result.exit_code == 0, result.output
        [outcome] = wing.executor.execute_approved()
        assert outcome.status == "succeeded", outcome
        states = [e.data.get("to") for e in store.timeline(incident.id) if e.kind == "state"]
        assert states[-3:] == ["approved", "executing", "succeeded"], states
        assert store.incident(incident.id).state is IncidentState.SUCCEEDED
    finally:
        store.close()
