"""The running bot end to end inside one process: alerts stored, the simulated cluster read
through the real client, incidents opened once, proposals made, the terminal chat adapter
showing it, resolves with a summary, and approvals split between replicas and the leader."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.config import (
    ActionPolicy,
    ApprovalPolicy,
    BlastRadius,
    Remediation,
    ScheduleSettings,
    Settings,
)
from bot.incidents.digest import next_run
from bot.model import Action, Incident, IncidentState, Lang, Signal
from bot.pipeline.firing import FiringAlerts
from bot.pipeline.service import Service
from bot.process.telemetry import Telemetry
from bot.replica.schedule import Scheduler
from bot.sources.alertmanager.payloads import signals_from_payload, validate_payload
from bot.store.sql import SqlStore
from gpusim import faults, objects
from gpusim.resources import BY_KIND
from tests.helpers.builders import diagnosis as store_diagnosis
from tests.helpers.clocks import FakeClock
from tests.helpers.rigs import build_service, console_chat

ONE_PERSON = ActionPolicy(users=["alice", "bob"])


@dataclass
class Bot:
    server: Any
    store: SqlStore
    service: Service
    out: io.StringIO
    leader: list[bool]
    clock: FakeClock

    def alert(self, fault: str, node: str, **params: Any) -> list[Signal]:
        result = faults.inject(self.server.store, fault, node, datetime.now(UTC), **params)
        signals = signals_from_payload(validate_payload(result.payload()), ["node"])
        fresh = self.store.add_signals(signals, datetime.now(UTC))
        return [s for s, new in zip(signals, fresh, strict=True) if new]

    def alert_named(self, name: str, node: str) -> list[Signal]:
        """An alert as Alertmanager delivers it, naming `node`, stored as the inbox would."""
        started = datetime.now(UTC)
        alert = Signal(
            source="alertmanager",
            name=name,
            node=node,
            labels={"alertname": name, "node": node},
            starts_at=started,
            fingerprint=f"{name}-{node}",
        )
        assert self.store.add_signals([alert], started) == [True]
        return [alert]

    @property
    def said(self) -> str:
        return self.out.getvalue()

    def metric(self, name: str, **labels: str) -> float:
        assert self.service.telemetry is not None
        return self.service.telemetry.registry.get_sample_value(name, labels) or 0.0


@pytest.fixture
def bot(sim_cluster: Any, tmp_path: Path) -> Iterator[Bot]:
    server, cluster = sim_cluster
    settings = Settings(
        remediation=Remediation(
            approvals=ApprovalPolicy(cordon=ONE_PERSON, drain=ONE_PERSON, uncordon=ONE_PERSON)
        )
    )
    store = SqlStore.open(f"sqlite:///{tmp_path / 'gpubot.db'}")
    chat, out = console_chat(settings.lang)
    leader = [True]
    clock = FakeClock(real_time=True)
    service = build_service(
        cluster,
        store,
        settings,
        clock=clock,
        chat=chat,
        is_leader=lambda: leader[0],
        telemetry=Telemetry(),
    )
    yield Bot(server, store, service, out, leader, clock)
    store.close()


def test_an_alert_opens_one_incident_with_a_proposal_and_one_message(bot: Bot) -> None:
    signals = bot.alert("xid", "gpu-a2", code=79, gpu=3)
    [incident] = [i for i in bot.service.process(signals) if i.node == "gpu-a2"]
    assert incident.rule == "gpu-fell-off-bus"
    assert bot.store.incident(incident.id).state is IncidentState.AWAITING_APPROVAL
    [drain] = [r for r in bot.store.requests(incident.id) if r.action is Action.DRAIN]
    assert drain.node == "gpu-a2"
    assert bot.said.count("GPU fell off the bus") == 1
    assert f"drain gpu-a2  request {drain.id}" in bot.said
    kinds = [e.kind for e in bot.store.timeline(incident.id)]
    assert kinds[:2] == ["state", "diagnosis"] and "proposal" in kinds
    assert bot.store.incident(incident.id).chat_ref == f"console:{incident.id}"

    # Alertmanager repeats the alert: nothing new is opened or posted.
    assert bot.service.process(signals) == []
    assert bot.said.count("GPU fell off the bus") == 1


def test_thousands_of_alerts_firing_on_one_node_do_not_stop_another_nodes_diagnosis(
    bot: Bot,
) -> None:
    """Issue 15, 2 and 4: a storm of 5,000 Xid 13 alerts on gpu-a1 is read as a few kinds
    with their counts, so an Xid 79 on gpu-a2 still opens its incident."""
    started = datetime.now(UTC)
    storm = [
        Signal(
            source="alertmanager",
            name="GPUXidError",
            node="gpu-a1",
            gpu=str(i % 8),
            labels={"alertname": "GPUXidError", "node": "gpu-a1", "xid": "13", "n": str(i)},
            starts_at=started,
            fingerprint=f"storm-{i}",
        )
        for i in range(5000)
    ]
    assert all(bot.store.add_signals(storm, started))
    signals = bot.alert("xid", "gpu-a2", code=79, gpu=3)
    opened = bot.service.process(signals)
    assert [i.rule for i in opened if i.node == "gpu-a2"] == ["gpu-fell-off-bus"]
    assert bot.said.count("GPU fell off the bus") == 1


def test_the_alerts_a_pass_reads_follow_the_store_as_they_fire_and_resolve(bot: Bot) -> None:
    """What a pass hands the rules is counted by the store and follows it, though the newest
    alert of each kind is kept between passes."""
    reading = FiringAlerts(bot.store)
    started = datetime.now(UTC)

    def temperature(i: int, status: str = "firing") -> Signal:
        return Signal(
            source="alertmanager",
            name="GPUTemperatureHigh",
            status=status,  # type: ignore[arg-type]
            node="gpu-a1",
            gpu=str(i % 2),
            labels={"alertname": "GPUTemperatureHigh", "node": "gpu-a1"},
            starts_at=started,
            fingerprint=f"t{i}",
        )

    def seen() -> list[tuple[str, str | None, int]]:
        return sorted((s.fingerprint, s.gpu, s.count) for s in reading.read())

    bot.store.add_signals([temperature(i) for i in range(6)], started)
    assert seen() == [("t4", "0", 3), ("t5", "1", 3)]
    bot.store.add_signals([temperature(i) for i in range(6, 10)], started)
    assert seen() == [("t8", "0", 5), ("t9", "1", 5)]
    bot.store.add_signals([temperature(i, "resolved") for i in (1, 3, 5, 8, 9)], started)
    assert seen() == [("t6", "0", 4), ("t7", "1", 1)]
    bot.store.add_signals([temperature(i, "resolved") for i in range(10)], started)
    assert seen() == []


def test_an_alert_without_a_node_is_reported_as_node_unknown(bot: Bot) -> None:
    alert = Signal(
        source="alertmanager",
        name="GPUXidError",
        labels={"alertname": "GPUXidError", "xid": "79"},
        fingerprint="no-node",
    )
    bot.store.add_signals([alert], datetime.now(UTC))
    bot.service.process([alert])
    assert "alert GPUXidError (firing) names no node: node unknown" in bot.said
    assert [s.fingerprint for s in bot.store.firing_alerts()] == ["no-node"]


def test_a_resolved_alert_resolves_the_incident_once_the_symptom_is_gone(bot: Bot) -> None:
    bot.alert("zero-capacity", "gpu-a4")
    # What our shipped GPUCapacityZero rule sends through Alertmanager for it.
    started = datetime.now(UTC)
    firing = [
        Signal(
            source="alertmanager",
            name="GPUCapacityZero",
            node="gpu-a4",
            labels={"alertname": "GPUCapacityZero", "node": "gpu-a4"},
            starts_at=started,
            fingerprint="cap0",
        )
    ]
    bot.store.add_signals(firing, started)
    [incident] = [i for i in bot.service.process(firing) if i.node == "gpu-a4"]
    resolved = [s.model_copy(update={"status": "resolved"}) for s in firing]
    bot.store.add_signals(resolved, datetime.now(UTC))
    bot.service.process(resolved)  # the node still offers no GPU: stays open
    assert bot.store.incident(incident.id).state is not IncidentState.RESOLVED
    assert "still matches" in bot.store.timeline(incident.id)[-1].text

    bot.server.store.patch(
        BY_KIND["Node"],
        "",
        "gpu-a4",
        "application/merge-patch+json",
        {"status": {"allocatable": {"nvidia.com/gpu": "8"}}},
    )
    bot.service.process(resolved)
    # Gone once is not gone for good: it resolves after staying away resolve_after_s.
    assert bot.store.incident(incident.id).state is not IncidentState.RESOLVED
    bot.clock.ahead = timedelta(seconds=bot.service.settings.thresholds.resolve_after_s + 1)
    bot.service.process(resolved)
    assert bot.store.incident(incident.id).state is IncidentState.RESOLVED
    assert f"[incident {incident.id}] Duration:" in bot.said


def test_a_replica_that_does_not_lead_records_and_the_leader_acts(bot: Bot) -> None:
    signals = bot.alert("xid", "gpu-a2", code=79, gpu=3)
    [incident] = [i for i in bot.service.process(signals) if i.node == "gpu-a2"]
    [drain] = [r for r in bot.store.requests(incident.id) if r.action is Action.DRAIN]
    bot.leader[0] = False
    outcome = bot.service.approve(drain.id, "alice")
    assert outcome.status == "approved"
    assert bot.server.store.evictions == []
    assert bot.service.run_leader_duties() == []  # still not the leader

    bot.leader[0] = True
    [acted] = bot.service.run_leader_duties()
    assert acted.status == "succeeded", acted.message
    assert ("ml", "train-llm-0-worker-1") in bot.server.store.evictions
    assert bot.service.run_leader_duties() == []  # once
    assert f"[incident {incident.id}] drained gpu-a2" in bot.said
    assert bot.metric("gpubot_actions_total", action="drain", outcome="succeeded") == 1
    assert bot.metric("gpubot_actions_total", action="drain", outcome="approved") == 0
    assert bot.metric("gpubot_diagnoses_posted_total") >= 1


def test_an_ad_hoc_request_run_by_the_leader_says_how_it_ended(bot: Bot) -> None:
    """Finding 11: a request no incident holds (`/gpubot cordon gpu-a3`, approved with
    `gpubot approve` on another process) ended in the executions table and nowhere a person
    reads. The leader that runs it now says how it ended, for that request."""
    facts = bot.service.wing.facts.of_node("gpu-a3")
    request = bot.service.wing.proposals.request(
        Action.CORDON, facts.nodes["gpu-a3"], None, "carol"
    )
    bot.leader[0] = False
    assert bot.service.approve(request.id, "alice").status == "approved"
    bot.leader[0] = True
    [acted] = bot.service.run_leader_duties()
    assert acted.status == "succeeded", acted.message
    assert bot.server.store.get(BY_KIND["Node"], "", "gpu-a3")["spec"]["unschedulable"] is True
    assert f"[request {request.id}] {acted.message}" in bot.said
    assert "cordoned gpu-a3" in acted.message


def test_unanswered_proposals_expire_and_say_so(bot: Bot) -> None:
    signals = bot.alert("xid", "gpu-a2", code=79, gpu=3)
    [incident] = [i for i in bot.service.process(signals) if i.node == "gpu-a2"]
    assert bot.service.expire_requests() == []
    bot.clock.ahead = timedelta(minutes=31)
    [expired] = bot.service.expire_requests()
    assert expired.id == incident.id and expired.state is IncidentState.EXPIRED
    assert "expired without a decision" in bot.said
    [drain] = [r for r in bot.store.requests(incident.id) if r.action is Action.DRAIN]
    assert bot.service.approve(drain.id, "alice").status == "expired"
    assert bot.server.store.evictions == []


def test_the_leaders_scheduler_runs_approvals_recorded_elsewhere(bot: Bot) -> None:
    signals = bot.alert("xid", "gpu-a2", code=79, gpu=3)
    [incident] = [i for i in bot.service.process(signals) if i.node == "gpu-a2"]
    [drain] = [r for r in bot.store.requests(incident.id) if r.action is Action.DRAIN]
    bot.leader[0] = False
    assert bot.service.approve(drain.id, "alice").status == "approved"
    bot.leader[0] = True
    settings = ScheduleSettings(leader_duties_s=0.2, expiry_s=60, sweep_s=60)
    scheduler = Scheduler(bot.service, bot.store.engine, settings)
    scheduler.leading(True)
    try:
        assert scheduler.jobs() == [
            "digest",
            "drain_watchdog",
            "expire_requests",
            "follow_up",
            "leader_duties",
            "sweep",
        ]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done = bot.store.execution(drain.id)
            if done is not None and done.finished_at is not None:
                break
            time.sleep(0.1)
    finally:
        scheduler.leading(False)
    done = bot.store.execution(drain.id)
    assert done is not None and done.outcome == "succeeded", done
    assert ("ml", "train-llm-0-worker-1") in bot.server.store.evictions
    # The jobs live in the database: a new leader's scheduler finds them, not copies.
    with bot.store.engine.connect() as connection:
        stored = connection.exec_driver_sql("SELECT id FROM apscheduler_jobs ORDER BY id").all()
    assert [row[0] for row in stored] == [
        "digest",
        "drain_watchdog",
        "expire_requests",
        "follow_up",
        "leader_duties",
        "sweep",
    ]
    again = Scheduler(bot.service, bot.store.engine, settings)
    again.leading(True)
    assert again.jobs() == [
        "digest",
        "drain_watchdog",
        "expire_requests",
        "follow_up",
        "leader_duties",
        "sweep",
    ]
    again.leading(False)


def test_a_better_story_for_the_same_node_supersedes_the_first(bot: Bot) -> None:
    """One problem, one incident: the alert that explains the lost GPU supersedes the early
    diagnosis inside the same incident and thread, and nothing was proposed meanwhile (the
    early diagnosis holds its proposals for the alert)."""
    result = faults.inject(bot.server.store, "xid", "gpu-a2", datetime.now(UTC), code=79, gpu=3)
    faults_seen = signals_from_payload(validate_payload(result.payload()), ["node"])
    # First only the Kubernetes side is seen (a sweep): one GPU fewer allocatable.
    [fewer] = [i for i in bot.service.process([]) if i.node == "gpu-a2"]
    assert fewer.rule != "gpu-fell-off-bus"
    assert bot.store.requests(fewer.id) == []  # held: the alert saying why usually follows
    assert "proposals held until" in bot.said
    # Then the Xid 79 alert, stored by the webhook, explains it.
    bot.store.add_signals(faults_seen, datetime.now(UTC))
    [fell] = [i for i in bot.service.process(faults_seen) if i.node == "gpu-a2"]
    assert fell.rule == "gpu-fell-off-bus"
    assert fell.id == fewer.id  # the same incident, superseded in place
    assert bot.store.incidents(node="gpu-a2") == [bot.store.incident(fell.id)]
    [drain] = bot.store.requests(fell.id)
    assert drain.action is Action.DRAIN
    texts = [e.text for e in bot.store.timeline(fell.id)]
    assert f"superseded: {fewer.rule} -> gpu-fell-off-bus" in " ".join(texts)
    assert "Duration:" not in bot.said  # not resolved: no summary
    assert f"[incident {fell.id}] a better diagnosis of the same problem" in bot.said


def test_an_alert_about_one_node_neither_resolves_nor_opens_others(bot: Bot) -> None:
    """A webhook about gpu-a2 reads only what gpu-a2's facts need. gpu-a4's incident is
    left alone even after its symptom is gone (the next full pass resolves it), and a fault
    on gpu-a3 that no alert named waits for that pass too."""
    opened = bot.service.process(bot.alert("zero-capacity", "gpu-a4"))
    [four] = [i for i in opened if i.node == "gpu-a4"]
    bot.server.store.patch(
        BY_KIND["Node"],
        "",
        "gpu-a4",
        "application/merge-patch+json",
        {"status": {"allocatable": {"nvidia.com/gpu": "8"}}},
    )
    faults.inject(bot.server.store, "zero-capacity", "gpu-a3", datetime.now(UTC))

    opened = bot.service.process(bot.alert("xid", "gpu-a2", code=79, gpu=3))
    assert [i.node for i in opened] == ["gpu-a2"]
    assert bot.store.incident(four.id).state is not IncidentState.RESOLVED
    assert bot.store.incidents(node="gpu-a3") == []

    # A sweep (no signals) reads the whole cluster: gpu-a3 opens, gpu-a4 is seen gone and
    # resolves once it has stayed gone resolve_after_s.
    opened = bot.service.process([])
    assert [i.node for i in opened] == ["gpu-a3"]
    bot.clock.ahead = timedelta(seconds=bot.service.settings.thresholds.resolve_after_s + 1)
    bot.service.process([])
    assert bot.store.incident(four.id).state is IncidentState.RESOLVED


def test_the_daily_digest_runs_at_local_time_and_tells_the_channel(bot: Bot) -> None:
    bot.service.process(bot.alert("xid", "gpu-a2", code=79, gpu=3))
    told = bot.service.post_digest()
    assert told[0].startswith("Last 24 hours: 1 opened, 0 resolved"), told
    assert any("gpu-fell-off-bus" in line and "█" in line for line in told), told
    assert told[0] in bot.said

    settings = ScheduleSettings(digest_at="09:00", digest_tz="Asia/Shanghai")
    scheduler = Scheduler(bot.service, bot.store.engine, settings)
    scheduler.leading(True)
    try:
        expected = next_run(datetime.now(UTC), "09:00", "Asia/Shanghai")
        assert scheduler.next_run_time("digest") == expected
    finally:
        scheduler.leading(False)
    # Turned off: the job kept in the database from before goes too.
    off = Scheduler(bot.service, bot.store.engine, ScheduleSettings(digest_at=None))
    off.leading(True)
    try:
        assert "digest" not in off.jobs()
    finally:
        off.leading(False)


def test_the_drain_watchdog_raises_drain_stuck_without_any_alert(bot: Bot) -> None:
    """Someone cordoned gpu-a3 and started a drain that a PodDisruptionBudget blocks; no
    alert fires. The watchdog looks at cordoned nodes: not stuck yet at first, stuck once
    the threshold has passed."""
    sim = bot.server.store
    faults.inject(sim, "pdb-block", "gpu-a3", datetime.now(UTC))
    faults.cordon(sim, "gpu-a3", datetime.now(UTC))  # kubectl drain: cordon, then evict
    sim.evict("monitoring", "metrics-agent-gpu-a3-0", {})
    assert bot.service.watch_drains() == []
    bot.clock.ahead = timedelta(seconds=bot.service.settings.thresholds.drain_stuck_after_s + 60)
    opened = bot.service.watch_drains()
    assert [(i.node, i.rule) for i in opened] == [("gpu-a3", "drain-stuck")]
    assert bot.said.count("gpu-a3") >= 1


def test_a_pool_wide_failure_holds_its_node_incidents(bot: Bot) -> None:
    batch = [s for node in ("gpu-a1", "gpu-a2", "gpu-a3") for s in bot.alert("zero-capacity", node)]
    bot.service.process(batch)
    [pool] = [i for i in bot.store.incidents() if i.node is None]
    assert pool.rule == "pool-wide-failure"
    held = sorted(i.node or "" for i in bot.store.incidents() if i.parent == pool.id)
    assert held == ["gpu-a1", "gpu-a2", "gpu-a3"]
    [one] = [i for i in bot.store.incidents(node="gpu-a1") if i.parent == pool.id]
    assert f"part of pool-wide incident {pool.id}" in bot.store.timeline(one.id)[-1].text
    # Node by node drains are never proposed inside a pool-wide failure.
    for incident in bot.store.incidents():
        assert not [r for r in bot.store.requests(incident.id) if r.action is Action.DRAIN]
    # Said once: the next pass groups nothing again.
    bot.service.process([])
    notes = [e for e in bot.store.timeline(one.id) if "part of pool-wide" in e.text]
    assert len(notes) == 1


def test_a_webhook_about_one_node_still_sees_the_whole_pool(bot: Bot) -> None:
    """Two nodes lost their GPUs without an alert; the third one's alert arrives. The pass
    is about gpu-a3 alone, yet the pool-wide rule counts all three: the on-call hears of a
    pool failure, not of one node, and gpu-a3 is not offered a drain of its own."""
    for node in ("gpu-a1", "gpu-a2", "gpu-a3"):
        faults.inject(bot.server.store, "zero-capacity", node, datetime.now(UTC))
    # What our shipped GPUCapacityZero rule sends through Alertmanager, for gpu-a3 only.
    opened = bot.service.process(bot.alert_named("GPUCapacityZero", "gpu-a3"))
    assert sorted((i.node or f"pool {i.pool}", i.rule) for i in opened) == [
        ("gpu-a3", "gpu-capacity-zero"),
        ("pool a100-east", "pool-wide-failure"),
    ]
    assert bot.store.incidents(node="gpu-a1") == []
    [three] = bot.store.incidents(node="gpu-a3")
    assert not [r for r in bot.store.requests(three.id) if r.action is Action.DRAIN]


def test_a_long_drain_does_not_hold_up_the_next_approved_action(bot: Bot) -> None:
    """Approvals recorded on a follower run on the leader's ticks. A drain blocked by a PDB
    runs for a while; a cordon approved meanwhile (the budget allows both nodes) is done
    without waiting for the drain to give up."""
    remediation = bot.service.settings.remediation
    remediation.drain_timeout_s = 4
    remediation.blast_radius = BlastRadius(max_nodes=2, max_share=0.5)
    [incident] = [
        i for i in bot.service.process(bot.alert("xid", "gpu-a2", code=79, gpu=3)) if i.node
    ]
    [drain] = [r for r in bot.store.requests(incident.id) if r.action is Action.DRAIN]
    faults.inject(bot.server.store, "pdb-block", "gpu-a2", datetime.now(UTC))
    four = bot.service.wing.facts.of_node("gpu-a4").nodes["gpu-a4"]
    cordon = bot.service.wing.proposals.request(Action.CORDON, four, None, "carol")
    bot.leader[0] = False
    assert bot.service.approve(drain.id, "alice").status == "approved"
    assert bot.service.approve(cordon.id, "bob").status == "approved"
    bot.leader[0] = True

    def finished(request_id: str) -> bool:
        done = bot.store.execution(request_id)
        return done is not None and done.finished_at is not None

    bot.service.run_leader_duties_in_background()
    deadline = time.monotonic() + 10
    while not finished(cordon.id) and time.monotonic() < deadline:
        bot.service.run_leader_duties_in_background()  # ticks hand nothing out twice
        time.sleep(0.05)
    assert finished(cordon.id)
    assert not finished(drain.id)  # still waiting on the PDB
    cordoned = bot.store.execution(cordon.id)
    assert cordoned is not None and cordoned.outcome == "succeeded", cordoned
    assert bot.server.store.get(BY_KIND["Node"], "", "gpu-a4")["spec"]["unschedulable"] is True
    while not finished(drain.id) and time.monotonic() < deadline + 10:
        time.sleep(0.1)
    done = bot.store.execution(drain.id)
    assert done is not None and done.outcome == "failed" and "drain incomplete" in done.detail
    assert bot.server.store.evictions.count(("ml", "train-llm-0-worker-1")) == 0


def test_an_alert_naming_its_node_by_ip_is_diagnosed_at_once(bot: Bot) -> None:
    """dcgm-exporter scraped without relabelling names the node only as `instance`
    (IP:port): the pass cannot be about "10.0.0.x" alone, it reads every node and finds
    which one the address belongs to."""
    faults.inject(bot.server.store, "xid", "gpu-a2", datetime.now(UTC), code=79, gpu=3)
    address = f"{objects.node_ip('gpu-a2')}:9400"
    started = datetime.now(UTC)
    [alert] = signals_from_payload(
        validate_payload(
            {
                "version": "4",
                "status": "firing",
                "receiver": "gpubot",
                "groupKey": "{}:{}",
                "alerts": [
                    {
                        "status": "firing",
                        "labels": {
                            "alertname": "GPUXidError",
                            "xid": "79",
                            "gpu": "3",
                            "instance": address,
                        },
                        "startsAt": started.isoformat(),
                        "fingerprint": "by-ip",
                    }
                ],
            }
        ),
        bot.service.settings.node_labels,
    )
    assert alert.node == address.split(":")[0]
    assert bot.store.add_signals([alert], started) == [True]
    opened = bot.service.process([alert])
    assert [(i.node, i.rule) for i in opened] == [("gpu-a2", "gpu-fell-off-bus")]


def test_a_webhook_about_one_node_counts_the_pods_last_seen_on_the_others(bot: Bot) -> None:
    """The device plugin crash-loops on gpu-a1 and gpu-a2 (pods only: no alert); a sweep
    sees them. Then it crash-loops on gpu-a3 too and an alert names gpu-a3 alone. That pass
    reads gpu-a3's pods only, yet counts what the sweep found on the other two: three
    nodes of the pool, a pool-wide failure, and no node-by-node proposal for gpu-a3."""
    for node in ("gpu-a1", "gpu-a2"):
        faults.inject(bot.server.store, "plugin-crashloop", node, datetime.now(UTC))
    bot.service.process([])  # the sweep
    assert sorted(i.node or "" for i in bot.store.incidents()) == ["gpu-a1", "gpu-a2"]
    faults.inject(bot.server.store, "plugin-crashloop", "gpu-a3", datetime.now(UTC))
    opened = bot.service.process(bot.alert_named("KubePodCrashLooping", "gpu-a3"))
    assert sorted((i.node or f"pool {i.pool}", i.rule) for i in opened) == [
        ("gpu-a3", "device-plugin-crashloop"),
        ("pool a100-east", "pool-wide-failure"),
    ]
    [three] = bot.store.incidents(node="gpu-a3")
    assert [r.action for r in bot.store.requests(three.id)] == []


def test_a_console_message_shows_ten_evidence_lines_and_says_how_many_more() -> None:
    """As in Slack: a burst of 40 alerts on one node is one readable message; the rest of
    the evidence is in the timeline."""
    chat, out = console_chat(Lang.EN)
    found = store_diagnosis().model_copy(
        update={"evidence": [f"GPUTemperatureHigh GPU {i}: 91 °C" for i in range(40)]}
    )
    incident = Incident(
        id="7", cluster="c", node="gpu-a1", rule=found.rule, state=IncidentState.OPEN,
        severity=found.severity, title=found.title, opened_at=datetime.now(UTC),
        updated_at=datetime.now(UTC),
    )  # fmt: skip
    chat.post_diagnosis(incident, found, [])
    said = out.getvalue()
    assert "GPU 9: 91 °C" in said and "GPU 10: 91 °C" not in said
    assert "… 30 more in the timeline" in said
