"""The running bot: signals in, incidents and chat messages out; approvals to the executor.

`gpubot serve` builds one `Service` per process. Every replica takes webhooks and clicks;
what acts — executions, resumes, sweeps — runs only while `is_leader()` says so.
Signals are handed over by the webhook after they are stored, and processed on a worker
thread so Alertmanager gets its answer in milliseconds.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from bot.config import Settings
from bot.diagnose import NodeMatches, diagnose
from bot.errors import GpubotError, StateChanged
from bot.evidence.live import read_scoped, read_snapshot
from bot.evidence.snapshot import collect_facts, resolve_signal_nodes
from bot.inbox import Inbox
from bot.incidents.digest import build_digest, digest_lines
from bot.incidents.lifecycle import IllegalTransition
from bot.incidents.summary import summarize, summary_lines
from bot.kube.objects import Obj, meta, name_of, spec_of
from bot.model import Diagnosis, Incident, IncidentState, NodeFacts, Signal, TimelineEntry
from bot.names import GPUBOT
from bot.ports import Chat, Cluster, Store
from bot.remediate.decisions import Outcome
from bot.remediate.executor import Executor
from bot.rules.loading import RuleSet
from bot.telemetry import Telemetry

log = logging.getLogger("gpubot.service")

_SELF_RESOLVING = (
    IncidentState.OPEN,
    IncidentState.DIAGNOSED,
    IncidentState.AWAITING_APPROVAL,
    IncidentState.APPROVED,
    IncidentState.DENIED,
    IncidentState.EXPIRED,
    IncidentState.SUCCEEDED,
)
"""Never EXECUTING (something is acting) nor FAILED (a person must look). APPROVED is: the
approval has not acted yet, and a problem that is gone withdraws it (the store refuses the
resolve while its execution runs)."""

_OPEN = tuple(state for state in IncidentState if state is not IncidentState.RESOLVED)
# What an action came to (the rest are steps on the way: a vote recorded, another needed).
_FINAL = frozenset({"acted", "dry-run", "refused", "failed", "denied", "changed"})

EvidenceLines = Callable[[str], list[str]]
"""node → evidence lines from Prometheus (or one "evidence unavailable: ..." line)."""


MAX_ACTIONS = 4
"""Actions the leader's duties run at once."""

SCOPED_MAX_NODES = 8
"""Up to this many nodes in a batch, read only what their facts need (every node, their pods
and events); more, or a sweep, reads the whole cluster. A webhook is about a few nodes, and
listing every pod of a large cluster for each one was most of the time to a diagnosis."""


def _version(node: Obj) -> str:
    return str(meta(node).get("resourceVersion") or "")


def _scope(batch: Sequence[Signal]) -> frozenset[str] | None:
    if not batch or any(s.node is None for s in batch):
        return None
    return _few(frozenset(s.node for s in batch if s.node))


def _few(nodes: frozenset[str]) -> frozenset[str] | None:
    return nodes if len(nodes) <= SCOPED_MAX_NODES else None


MID_PASS_DELIVERIES = 2
"""Deliveries a pass splits after reading the cluster (`_process`): those that came at the
same moment as its own, not a burst that is the next pass's business."""

QUIET_S = 0.05
MAX_LAG_S = 2.0
"""A burst of webhooks is diagnosed once Alertmanager has been quiet for `QUIET_S`, or when
the oldest of it has waited `MAX_LAG_S` (`Service._gather`)."""


class Service:
    def __init__(
        self,
        *,
        settings: Settings,
        rules: RuleSet,
        store: Store,
        cluster: Cluster,
        chat: Chat,
        executor: Executor,
        clock: Callable[[], datetime],
        is_leader: Callable[[], bool] = lambda: True,
        evidence: EvidenceLines | None = None,
        on_diagnosis: Callable[[Incident, Diagnosis], None] | None = None,
        inbox: Inbox | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.settings = settings
        self.rules = rules
        self.store = store
        self.cluster = cluster
        self.chat = chat
        self.executor = executor
        self.clock = clock
        self.is_leader = is_leader
        self.evidence = evidence
        self.on_diagnosis = on_diagnosis or (lambda _incident, _diagnosis: None)
        self.inbox = inbox
        self.telemetry = telemetry
        self._queue: queue.Queue[list[Signal] | Literal["deliveries"] | None] = queue.Queue()
        self._in_flight: set[str] = set()
        self._in_flight_lock = threading.Lock()
        # One pass at a time (the worker, the sweep, the watchdog): a pass on an older read
        # of the cluster must not undo what a newer one found, and the two below are shared.
        self._pass_lock = threading.Lock()
        self._facts_seen: dict[str, tuple[str, NodeFacts]] = {}
        """Per node, the facts last found with its pods, and the node's resourceVersion then."""
        self._matches = NodeMatches()
        self._worker: threading.Thread | None = None

    # ---- intake ---------------------------------------------------------------------------

    def on_signals(self, signals: list[Signal]) -> None:
        """Signals already stored (the Kubernetes watch's): a crash here loses nothing (the
        next sweep or delivery picks the alert up from the store)."""
        self._queue.put(signals)

    def on_delivery(self) -> None:
        """The webhook's hand-over: a delivery is stored; the worker splits it."""
        self._queue.put("deliveries")

    def start(self) -> Service:
        def work() -> None:
            ended = float("-inf")
            while True:
                pending = self._gather(self._queue.get(), ended)
                stopping = None in pending
                batch = [s for item in pending if isinstance(item, list) for s in item]
                try:
                    if "deliveries" in pending:
                        batch += self.take_deliveries()
                    if batch:
                        self.process(batch)
                except Exception:  # the worker must outlive one bad batch
                    log.exception("processing %d signal(s) failed", len(batch))
                if stopping:
                    return
                ended = time.monotonic()

        self.on_delivery()  # deliveries a crash left unsplit go first
        self._worker = threading.Thread(target=work, name="signals", daemon=True)
        self._worker.start()
        return self

    def _gather(
        self, first: list[Signal] | Literal["deliveries"] | None, last_pass_ended: float
    ) -> list[list[Signal] | Literal["deliveries"] | None]:
        """What the next pass takes. A webhook that finds the worker idle is diagnosed at
        once. One that came on the heels of the last pass is part of a burst: then the
        worker waits until Alertmanager has been quiet for `QUIET_S` (at most `MAX_LAG_S`)
        and diagnoses the lot once, rather than racing the webhook for the interpreter
        pass after pass while deliveries still pour in."""
        pending = [first]
        woke = time.monotonic()
        burst = woke - last_pass_ended < QUIET_S or not self._queue.empty()
        while first is not None:
            try:
                if not burst:
                    item = self._queue.get_nowait()
                else:
                    left = woke + MAX_LAG_S - time.monotonic()
                    if left <= 0:
                        break
                    item = self._queue.get(timeout=min(QUIET_S, left))
            except queue.Empty:
                break
            pending.append(item)
            if item is None:
                break
        return pending

    def _follow_up(self, arrived: list[Signal], scope: frozenset[str] | None) -> None:
        """Signals split during a pass that the pass does not cover (a node outside its scope)
        or that need a word of their own (no node, truncated): queued for the next pass."""
        later = [
            s
            for s in arrived
            if s.node is None or s.truncated_alerts or (scope is not None and s.node not in scope)
        ]
        if later:
            self._queue.put(later)

    def take_deliveries(self, at_most: int | None = None) -> list[Signal]:
        """Stored webhook deliveries split into signals: the ones new to the store."""
        return [] if self.inbox is None else self.inbox.split(at_most)

    def stop(self) -> None:
        if self._worker is not None:
            self._queue.put(None)
            self._worker.join(timeout=30)

    def drain_queue(self, timeout_s: float = 10.0) -> None:
        """For tests and shutdown: wait until every handed-over batch is processed."""
        done = threading.Event()
        self._queue.put([])
        deadline = self.clock().timestamp() + timeout_s
        while not self._queue.empty() and self.clock().timestamp() < deadline:
            done.wait(0.02)

    # ---- processing -----------------------------------------------------------------------

    def process(
        self, batch: Sequence[Signal], nodes: frozenset[str] | None = None
    ) -> list[Incident]:
        """Diagnose the cluster with every alert still firing; open, update or resolve
        incidents; post what is new. Returns the incidents opened or reopened. A pass is
        about the batch's nodes when it names only a few (or about `nodes` when given, and
        few enough), else about the whole cluster."""
        for signal in batch:
            if signal.node is None and signal.source == "alertmanager":
                self.chat.post_notice(
                    f"alert {signal.name} ({signal.status}) names no node: node unknown. "
                    f"Its labels: {', '.join(f'{k}={v}' for k, v in sorted(signal.labels.items()))}"
                )
            if signal.truncated_alerts:
                self.chat.post_notice(
                    f"Alertmanager truncated {signal.truncated_alerts} alert(s) of group "
                    f"{signal.group_key or '?'}: raise max_alerts or look in Alertmanager"
                )
        with self._pass_lock:
            return self._process(batch, nodes)

    def _process(self, batch: Sequence[Signal], nodes: frozenset[str] | None) -> list[Incident]:
        now = self.clock()
        scope = _scope(batch) if nodes is None else _few(nodes)
        snapshot = (
            read_snapshot(self.cluster) if scope is None else read_scoped(self.cluster, scope)
        )
        if scope is not None and not scope <= {name_of(n) for n in snapshot.nodes}:
            # An alert named its node by something else (an `instance` IP): which node it
            # means is only known after reading every node, so this pass reads everything.
            scope = None
            snapshot = read_snapshot(self.cluster)
        # Deliveries stored while the cluster was read join this pass: a node's alerts that
        # Alertmanager sent in separate groups at the same moment (an ECC error and the Xid
        # 48 it brings) are diagnosed together, not as two incidents one after the other.
        self._follow_up(self.take_deliveries(at_most=MID_PASS_DELIVERIES), scope)
        signals = resolve_signal_nodes(snapshot, self.store.active_signals())
        facts = collect_facts(snapshot, signals, self.settings, now, self._reuse_for(scope))
        self._remember_facts(snapshot.nodes, facts.nodes, scope)
        # Other nodes' facts are as last found (or lack their pods): they count toward the
        # pool rules, and their own diagnoses wait for a pass about them.
        diagnoses = diagnose(
            facts, signals, self.rules, self.settings, only_nodes=scope, earlier=self._matches
        ).diagnoses
        opened = []
        recorded: list[tuple[Diagnosis, Incident]] = []
        for found in diagnoses:
            if self.evidence is not None and found.node:
                found = found.model_copy(
                    update={"evidence": [*found.evidence, *self.evidence(found.node)]}
                )
            incident, new = self.store.record_diagnosis(
                self.settings.cluster, found, now, self.settings.thresholds.flap_window_s
            )
            recorded.append((found, incident))
            if not new:
                continue
            opened.append(incident)
            self.store.append(
                TimelineEntry(
                    incident=incident.id,
                    at=now,
                    actor=GPUBOT,
                    kind="diagnosis",
                    text=f"{found.title}: {found.summary}",
                    data={
                        "rule": found.rule,
                        "stage": found.stage.value,
                        "evidence": found.evidence,
                    },
                )
            )
            requests = self.executor.propose(incident.id, found, facts)
            if not requests:
                self.store.transition(incident.id, IncidentState.DIAGNOSED, GPUBOT, now)
            ref = self.chat.post_diagnosis(self.store.incident(incident.id), found, requests)
            if self.telemetry is not None:
                self.telemetry.diagnoses_posted.inc()
            if ref:
                self.store.set_chat_ref(incident.id, ref)
            self.on_diagnosis(incident, found)
        self._group_under_pools(recorded, facts.nodes)
        still = {(d.rule, d.node or d.pool) for d in diagnoses}
        self._resolve_gone(batch, still, facts.nodes, now, scope)
        if self.telemetry is not None:
            self.telemetry.incidents_open.set(self.store.count_incidents(_OPEN))
        return opened

    def _reuse_for(self, scope: frozenset[str] | None) -> Callable[[Obj], NodeFacts | None]:
        """In a scoped pass, a node outside the scope keeps the facts last found with its
        pods, while its object is unchanged; a full pass finds everything again."""

        def reuse(node: Obj) -> NodeFacts | None:
            name = name_of(node)
            if scope is None or name in scope:
                return None
            seen = self._facts_seen.get(name)
            if seen is None or seen[0] != _version(node):
                return None
            return seen[1]

        return reuse

    def _remember_facts(
        self,
        objects: Sequence[Obj],
        found: Mapping[str, NodeFacts],
        scope: frozenset[str] | None,
    ) -> None:
        if scope is None:
            self._facts_seen = {
                name_of(node): (_version(node), found[name_of(node)])
                for node in objects
                if name_of(node) in found
            }
            return
        for node in objects:
            if name_of(node) in scope and name_of(node) in found:
                self._facts_seen[name_of(node)] = (_version(node), found[name_of(node)])

    def _group_under_pools(
        self, recorded: Sequence[tuple[Diagnosis, Incident]], nodes: Mapping[str, NodeFacts]
    ) -> None:
        """A pool-wide incident holds the node incidents of its pool: the on-call reads one
        story, and the timeline of each node says which pool incident it belongs to."""
        pools = {d.pool: i for d, i in recorded if d.node is None and d.pool}
        for found, incident in recorded:
            node = nodes.get(found.node or "")
            if node is None or not node.pool or node.pool not in pools:
                continue
            parent = pools[node.pool]
            if incident.parent == parent.id:
                continue
            self.store.set_parent(incident.id, parent.id)
            self.store.append(
                TimelineEntry(
                    incident=incident.id,
                    at=self.clock(),
                    actor=GPUBOT,
                    kind="note",
                    text=f"part of pool-wide incident {parent.id} "
                    f"({parent.rule}, pool {node.pool})",
                    data={"parent": parent.id},
                )
            )

    def _resolve_gone(
        self,
        batch: Sequence[Signal],
        still: set[tuple[str, str | None]],
        nodes: Mapping[str, NodeFacts],
        now: datetime,
        scope: frozenset[str] | None = None,
    ) -> None:
        """Incidents whose rule no longer matches their subject are over — unless gpubot
        acted on the node and it is still out of service: then the loop ends with the
        health gate and an uncordon, not with silence."""
        resolved_on = {s.node for s in batch if s.status == "resolved"}
        for incident in self.store.incidents(states=_SELF_RESOLVING):
            if incident.cluster != self.settings.cluster:
                continue
            if scope is not None and incident.node not in scope:
                continue  # not looked at in this pass
            if (incident.rule, incident.node or incident.pool) in still:
                if incident.node in resolved_on:
                    self.store.append(
                        TimelineEntry(
                            incident=incident.id,
                            at=now,
                            actor=GPUBOT,
                            kind="note",
                            text=f"its alert resolved, but {incident.rule} still matches: "
                            "the incident stays open",
                        )
                    )
                continue
            node = nodes.get(incident.node or "")
            if incident.state is IncidentState.SUCCEEDED and node and node.unschedulable:
                continue
            successor = next(
                (
                    other
                    for other in self.store.incidents(node=incident.node, states=_OPEN)
                    if incident.node
                    and other.id != incident.id
                    and (other.rule, other.node) in still
                ),
                None,
            )
            try:
                if successor is not None:
                    # The rules now tell a better story for this node (e.g. an Xid 79 alert
                    # arrived for the GPU count that dropped): one incident, not two.
                    self.resolve(
                        incident.id,
                        f"superseded by incident {successor.id} ({successor.rule})",
                        summary=False,
                    )
                    continue
                self.resolve(incident.id, f"{incident.rule} no longer matches: the symptom is gone")
            except StateChanged:
                continue  # its approval started acting meanwhile: the action's end decides

    def resolve(self, incident_id: str, why: str, *, summary: bool = True) -> Incident:
        """Over: its requests not yet decided are withdrawn with it (their buttons replaced
        by why), so no later vote can act on a problem that is gone."""
        done = self.store.transition(incident_id, IncidentState.RESOLVED, GPUBOT, self.clock(), why)
        for request in self.store.requests(incident_id):
            execution = self.store.execution(request.id)
            if (
                execution is not None
                and execution.outcome == "withdrawn"
                and execution.finished_at == done.resolved_at
            ):
                self.chat.withdraw(done, request, execution.detail)
        if not summary:
            self.chat.post_thread(done, f"resolved: {why}")
            return done
        told = summary_lines(summarize(done, self.store.timeline(incident_id)), self.settings.lang)
        self.chat.post_thread(done, "\n".join(f"{label}: {text}" for label, text in told))
        return done

    # ---- decisions ------------------------------------------------------------------------

    def approve(self, request_id: str, approver: str) -> Outcome:
        """A click or a command: recorded on any replica; executed here only on the leader
        (the leader's loop picks up what other replicas recorded)."""
        if self.is_leader():
            outcome = self.executor.approve(request_id, approver)
        else:
            outcome = self.executor.approve(request_id, approver, execute=False)
        self._tell(request_id, outcome)
        return outcome

    def deny(self, request_id: str, who: str, reason: str = "") -> Outcome:
        outcome = self.executor.deny(request_id, who, reason)
        self._tell(request_id, outcome)
        return outcome

    def on_timeline(self, entry: TimelineEntry) -> None:
        """The executor's notify: an action's start and progress ("evicted 37/110", "blocked
        ... by PDB train-job-pdb") go to the incident's thread as they happen; its result is
        told once it returns (`_tell`)."""
        if entry.kind not in ("action-start", "action-progress"):
            return
        try:
            incident = self.store.incident(entry.incident)
        except GpubotError:
            return
        self.chat.post_thread(incident, entry.text)

    def _tell(self, request_id: str, outcome: Outcome) -> None:
        """Into the incident's thread go decisions and results; a refused or repeated click
        is the clicker's business (the chat answers them privately), not the channel's."""
        if outcome.status in ("not-allowed", "duplicate", "withdrawn"):
            return
        try:
            request = self.store.request(request_id)
        except GpubotError:
            return
        if self.telemetry is not None and outcome.status in _FINAL:
            self.telemetry.actions.labels(action=request.action.value, outcome=outcome.status).inc()
        incident = self.store.incident(request.incident) if request.incident else None
        if outcome.status == "changed" and outcome.new_request is not None:
            # Also when the leader ran an approval recorded elsewhere: the new request needs
            # its buttons, not only a line that names it.
            self.chat.ask_again(incident, request, outcome.new_request, outcome.message)
        elif incident is not None:
            self.chat.post_thread(incident, outcome.message)

    def expire_requests(self) -> list[Incident]:
        """Incidents waiting on requests that have all expired: say so, and stop waiting."""
        now = self.clock()
        expired = []
        for incident_id in self.store.incidents_waiting_in_vain(now):
            try:
                done = self.store.transition(
                    incident_id,
                    IncidentState.EXPIRED,
                    GPUBOT,
                    now,
                    "every proposal expired without a decision",
                )
            except (StateChanged, IllegalTransition):
                continue  # decided a moment ago: not expired after all
            self.chat.post_thread(
                done, "the proposals expired without a decision; ask again with /gpubot"
            )
            expired.append(done)
        return expired

    def sweep(self) -> list[Incident]:
        """The periodic pass over the whole cluster; deliveries left unsplit (a failed split)
        are taken up by the worker on the way."""
        self.on_delivery()
        return self.process([])

    def watch_drains(self) -> list[Incident]:
        """The drain watchdog: every cordoned node looked at again — its pods, what blocks
        them, how long it has been — so `drain-stuck` is raised while a drain is in progress,
        ours or a person's, without waiting for an alert or the next full sweep."""
        cordoned = frozenset(
            str(meta(node).get("name") or "")
            for node in self.cluster.list("Node")
            if spec_of(node).get("unschedulable")
        )
        if not cordoned:
            return []
        return self.process([], nodes=cordoned)

    def post_digest(self, window: timedelta = timedelta(days=1)) -> list[str]:
        """The daily digest to the channel, in the zone the on-call reads clocks in."""
        zone = ZoneInfo(self.settings.schedule.digest_tz)
        told = digest_lines(
            build_digest(self.store, self.clock().astimezone(zone), window), self.settings.lang
        )
        self.chat.post_notice("\n".join(told), monospace=True)
        return told

    def run_leader_duties_in_background(self) -> None:
        """The scheduler's tick: each pending action on a worker of its own, so the tick
        returns at once and a drain of many minutes holds up neither the next tick nor an
        approved cordon elsewhere. The blast radius stays whole: the executor takes nodes
        out one at a time. An action already handed to a worker is not handed again."""
        if not self.is_leader():
            return
        for request_id in self.executor.pending():
            with self._in_flight_lock:
                if request_id in self._in_flight or len(self._in_flight) >= MAX_ACTIONS:
                    continue  # running already, or every worker busy: the next tick
                self._in_flight.add(request_id)
            # Daemon threads: stopping the process must not wait for a drain; its heartbeat
            # stops with it and the next leader takes the drain over.
            threading.Thread(
                target=self._duty, args=(request_id,), name=f"action-{request_id}", daemon=True
            ).start()

    def _duty(self, request_id: str) -> None:
        try:
            outcome = self.executor.run_pending(request_id)
            if outcome is not None:
                self._tell(request_id, outcome)
        except Exception:
            log.exception("the leader's duty for request %s failed", request_id)
        finally:
            with self._in_flight_lock:
                self._in_flight.discard(request_id)

    def run_leader_duties(self) -> list[Outcome]:
        """On the leader, every few seconds: resume what a dead process left half done, and
        run approvals recorded on other replicas."""
        if not self.is_leader():
            return []
        outcomes = self.executor.resume()
        outcomes += self.executor.execute_approved()
        for outcome in outcomes:
            self._tell(outcome.request_id, outcome)
        return outcomes
