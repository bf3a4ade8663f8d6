"""One diagnosis pass: the cluster read (a few nodes, or all of it), the alerts still firing,
facts, rules; incidents opened, updated or resolved; proposals made; the chat told.

Why it exists: this is where signals become the on-call's story. A pass is about the nodes its
batch names when they are few, so a webhook about one node costs what that node's facts cost,
while pool rules still see every node (the others as last found).

What it must never do: run beside another pass (an older read of the cluster must not undo
what a newer one found), act on a node (it proposes; the executor acts after approval), or
resolve an incident whose approved action is running.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from bot.approval.proposing import Proposals
from bot.clock import Clock
from bot.config import Settings
from bot.diagnose import NodeMatches, diagnose
from bot.errors import RuleError, StateChanged
from bot.facts.collecting import collect_facts, resolve_signal_nodes
from bot.facts.gpu_metrics import GpuEvidence
from bot.facts.live import read_scoped, read_snapshot
from bot.incidents.lifecycle import withdrawal_text
from bot.incidents.summary import summarize, summary_lines
from bot.kube_objects import Obj, meta, name_of
from bot.model import (
    Action,
    ActionRequest,
    ClusterFacts,
    Diagnosis,
    Incident,
    IncidentState,
    NodeFacts,
    Recorded,
    Signal,
    TimelineEntry,
)
from bot.names import GPUBOT
from bot.pipeline.told import Told
from bot.ports import Chat, Cluster, SignalStore, Store
from bot.process.telemetry import Telemetry
from bot.rules.loading import RuleSet
from bot.sources.alertmanager.understanding import with_prometheus_xids
from bot.texts import say

log = logging.getLogger("gpubot.passes")

EvidenceLines = Callable[[str], list[str]]
"""node → evidence lines from Prometheus (or one "evidence unavailable: ..." line)."""

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

OPEN = tuple(state for state in IncidentState if state is not IncidentState.RESOLVED)


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


def _malloc_trim() -> Callable[[int], object]:
    try:
        trim: Callable[[int], object] = ctypes.CDLL(
            ctypes.util.find_library("c") or "libc.so.6"
        ).malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to ask
        return lambda _pad: None
    return trim


_trim = _malloc_trim()


def _give_back_memory() -> None:
    """After a pass over the whole cluster. Its snapshot and facts (hundreds of MiB at 1,000
    nodes) are freed when it ends, but glibc keeps the freed pages for later and a replica
    that has been through one storm would hold them for good: handed back to the system."""
    _trim(0)


MID_PASS_DELIVERIES = 2
"""Deliveries a pass splits after reading the cluster (`_run`): those that came at the same
moment as its own, not a burst that is the next pass's business."""


class FiringAlerts:
    """The alerts firing now, as a pass reads them: the store's counts per kind (node, name,
    GPU, Xid; one row each, however many alerts), and the newest alert of each kind, kept
    between passes. A pass reads the counts and only the alerts it has not seen: with
    20,000 alerts firing, parsing each kind's newest alert again was most of a pass (issue
    18). Holds at most one alert per kind the store counts (`SignalStore.firing_kinds`)."""

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


class DiagnosisPass:
    """Owns what passes share: the lock that makes them take turns, each node's facts as last
    found with its pods (for scoped passes), and each node's rule matches (unchanged nodes are
    not evaluated again)."""

    def __init__(
        self,
        *,
        settings: Settings,
        rules: RuleSet,
        store: Store,
        cluster: Cluster,
        chat: Chat,
        proposals: Proposals,
        clock: Clock,
        take_deliveries: Callable[[int], list[Signal]] = lambda _at_most: [],
        later: Callable[[list[Signal]], None] = lambda _signals: None,
        evidence: EvidenceLines | None = None,
        gpu_evidence: Callable[[str], GpuEvidence] | None = None,
        on_diagnosis: Callable[[Incident, Diagnosis], None] | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """`take_deliveries(n)`: up to n stored webhook deliveries split into new signals;
        `later`: signals for the next pass (split meanwhile, about other nodes)."""
        self.settings = settings
        self.rules = rules
        self.store = store
        self.cluster = cluster
        self.chat = chat
        self.proposals = proposals
        self.clock = clock
        self.take_deliveries = take_deliveries
        self.later = later
        self.evidence = evidence
        self.gpu_evidence = gpu_evidence
        self.on_diagnosis = on_diagnosis or (lambda _incident, _diagnosis: None)
        self.telemetry = telemetry
        self._lock = threading.Lock()
        self._facts_seen: dict[str, tuple[str, NodeFacts]] = {}
        """Per node, the facts last found with its pods, and the node's resourceVersion then."""
        self._matches = NodeMatches()
        self.told = Told(settings.thresholds.revise_every_s)
        """What each open incident's message states, so a change is revised in place."""
        self._rule_errors: set[tuple[str, str]] = set()
        """(rule, what failed where) already logged and counted, while it still fails."""
        self._firing = FiringAlerts(store)
        self.due_at: datetime | None = None
        """When a pass about the whole cluster will see something no signal announces: a
        GPU pod Pending since the last pass crosses `pending_after_s` (the scheduler records
        its failure again only every 5 minutes). The leader's follow-up runs it then."""

    def run(self, batch: Sequence[Signal], nodes: frozenset[str] | None = None) -> list[Incident]:
        """Diagnose the cluster with every alert still firing; open, update or resolve
        incidents; post what is new. Returns the incidents opened or reopened. A pass is
        about the batch's nodes when it names only a few (or about `nodes` when given, and
        few enough), else about the whole cluster."""
        with self._lock:
            opened = self._run(batch, nodes)
            if (_scope(batch) if nodes is None else _few(nodes)) is None:
                _give_back_memory()
            return opened

    def _run(self, batch: Sequence[Signal], nodes: frozenset[str] | None) -> list[Incident]:
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
        if scope is None:
            # A full pass finds every node's facts again, and no match of a node is reused
            # once its facts are new objects: what the last pass kept (tens of MiB at 1,000
            # nodes) would only be held beside this pass's snapshot and facts, at the peak.
            self._facts_seen = {}
            self._matches.clear()
        # Deliveries stored while the cluster was read join this pass: a node's alerts that
        # Alertmanager sent in separate groups at the same moment (an ECC error and the Xid
        # 48 it brings) are diagnosed together, not as two incidents one after the other.
        self._follow_up(self.take_deliveries(MID_PASS_DELIVERIES), scope)
        signals = resolve_signal_nodes(snapshot, self._firing.read())
        if self.gpu_evidence is not None:
            # An alert that names a GPU but not its Xid (a rule set that alerts on the gauge
            # without the code): Prometheus' reading of that GPU gives the code.
            signals = with_prometheus_xids(signals, self.gpu_evidence)
        facts = collect_facts(snapshot, signals, self.settings, now, self._reuse_for(scope))
        versions = {name_of(node): _version(node) for node in snapshot.nodes}
        # The raw objects (the largest thing a full pass holds) are not read after the facts:
        # freed now, not after the rules and the incidents, which take far longer.
        del snapshot
        facts = self._own_copies(facts)
        self._remember_facts(versions, facts.nodes, scope)
        if scope is None:
            self.due_at = self._next_due(facts, now)
        # Other nodes' facts are as last found (or lack their pods): they count toward the
        # pool rules, and their own diagnoses wait for a pass about them.
        diagnosed = diagnose(
            facts, signals, self.rules, self.settings, only_nodes=scope, earlier=self._matches
        )
        self._tell_rule_errors(diagnosed.errors)
        diagnoses = diagnosed.diagnoses
        open_here = self._open_by_subject()
        self.told.forget({i.id for here in open_here.values() for i in here})
        opened: list[Incident] = []
        recorded: list[tuple[Diagnosis, Incident]] = []
        seen: set[str] = set()
        halted = {
            i.pool: i
            for here in open_here.values()
            for i in here
            if i.node is None and i.pool and i.chat_ref and self._halts(i.rule)
        }
        # Pool diagnoses first: a pool-wide failure's message is the one the messages of its
        # nodes go under (one message in the channel for the pool, not one per node).
        for found in sorted(diagnoses, key=lambda d: d.node is not None):
            if self.evidence is not None and found.node:
                found = found.model_copy(
                    update={"evidence": [*found.evidence, *self.evidence(found.node)]}
                )
            keeper = self._telling_it_better(open_here.get(found.subject, []), found.rule)
            if keeper is not None:
                seen.add(keeper.id)  # the problem is still there; its incident tells it better
                continue
            self._know_what_it_says(open_here.get(found.subject, []), found.rule)
            result = self.store.record_diagnosis(
                self.settings.cluster,
                found,
                now,
                self.settings.thresholds.flap_window_s,
                replaces=sorted(self.rules.replaces(found.rule)),
            )
            seen.add(result.incident.id)
            recorded.append((found, result.incident))
            if result.change == "updated":
                self._release_if_due(result.incident, found, facts, now)
                self._revise_if_stale(result.incident, found, now)
                continue
            opened.append(result.incident)
            under = halted.get(found.pool or "") if found.node else None
            told = self._tell(result, found, facts, now, under)
            if found.node is None and found.pool and told.chat_ref and self._halts(found.rule):
                halted[found.pool] = told
        self._group_under_pools(recorded, facts.nodes)
        self._resolve_gone(batch, seen, facts.nodes, now, scope)
        if self.telemetry is not None:
            self.telemetry.incidents_open.set(self.store.count_incidents(OPEN))
        return opened

    def _tell_rule_errors(self, errors: Sequence[RuleError]) -> None:
        """A rule that starts failing on subjects is one log line (however many subjects)
        and counts each subject once while it keeps failing: every pass evaluates it again.
        A failure that comes back after a pass without it is told again."""
        failing = {(e.rule_id or "?", e.message) for e in errors}
        new: dict[str, list[str]] = {}
        for rule, message in sorted(failing - self._rule_errors):
            new.setdefault(rule, []).append(message)
        for rule, messages in new.items():
            more = f" (and {len(messages) - 1} more subject(s))" if len(messages) > 1 else ""
            log.warning("rule %s could not be evaluated %s%s", rule, messages[0], more)
            if self.telemetry is not None:
                self.telemetry.rule_errors.labels(rule=rule).inc(len(messages))
        self._rule_errors = failing

    def _open_by_subject(self) -> dict[str, list[Incident]]:
        found: dict[str, list[Incident]] = {}
        for incident in self.store.incidents(states=OPEN):
            if incident.cluster == self.settings.cluster:
                found.setdefault(incident.subject, []).append(incident)
        return found

    def _telling_it_better(self, open_here: Sequence[Incident], rule: str) -> Incident | None:
        """An open incident on the subject that already tells `rule`'s problem (better, or
        from another angle): the diagnosis is that incident's, not a new one."""
        if any(i.rule == rule for i in open_here):
            return None
        better = self.rules.explained_by(rule) | self.rules.same_problem(rule)
        return next((i for i in open_here if i.rule in better), None)

    def _halts(self, rule: str) -> bool:
        spec = self.rules.spec(rule)
        return spec is not None and spec.halts_node_remediation

    def _tell(
        self,
        result: Recorded,
        found: Diagnosis,
        facts: ClusterFacts,
        now: datetime,
        under: Incident | None = None,
    ) -> Incident:
        """A new, reopened or superseded incident: its diagnosis in the timeline, its proposals
        (or held, when a better diagnosis is likely to follow), its message posted or
        revised in place (the same thread for its whole life). `under`: the pool-wide
        incident whose thread a new node incident's message goes in."""
        incident = result.incident
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
                    "change": result.change,
                },
            )
        )
        spec = self.rules.spec(found.rule)
        settle_s = self.settings.thresholds.settle_s
        held = spec is not None and spec.settles and settle_s > 0 and result.change != "superseded"
        requests = []
        if held:
            self.store.hold(incident.id, now + timedelta(seconds=settle_s))
        else:
            requests = self.proposals.propose(incident.id, found, facts)
        if not requests:
            self._settle_state(incident.id, now)
        incident = self.store.incident(incident.id)
        if result.change == "new":
            ref = self.chat.post_diagnosis(incident, found, requests, under)
            if ref:
                self.store.set_chat_ref(incident.id, ref)
                incident = incident.model_copy(update={"chat_ref": ref})
        else:
            for request in self._withdrawn_now(incident.id, now):
                self.chat.withdraw(
                    incident,
                    request,
                    say(self.settings.lang, "pass.superseded_by", rule=found.rule),
                )
            if result.change == "superseded":
                note = say(
                    self.settings.lang,
                    "pass.superseded",
                    old=result.replaced,
                    rule=found.rule,
                    title=found.title,
                )
            else:
                note = say(
                    self.settings.lang, "pass.came_back", n=incident.reopened, title=found.title
                )
            self.chat.revise_diagnosis(incident, found, requests, note)
        self.told.said(incident.id, found, now)
        if held and incident.held_until is not None:
            self.chat.post_thread(
                incident,
                say(
                    self.settings.lang,
                    "pass.held",
                    until=f"{incident.held_until:%H:%M:%S}",
                    settle_s=settle_s,
                ),
            )
        if self.telemetry is not None:
            self.telemetry.diagnoses_posted.inc()
        self.on_diagnosis(incident, found)
        return incident

    def _settle_state(self, incident_id: str, now: datetime) -> None:
        """No proposal (now): the incident is diagnosed, not waiting for anyone."""
        incident = self.store.incident(incident_id)
        if incident.state is IncidentState.OPEN:
            self.store.transition(incident_id, IncidentState.DIAGNOSED, GPUBOT, now)

    def _withdrawn_now(self, incident_id: str, now: datetime) -> list[ActionRequest]:
        withdrawn = []
        for request in self.store.requests(incident_id):
            execution = self.store.execution(request.id)
            if (
                execution is not None
                and execution.outcome == "withdrawn"
                and execution.finished_at == now
            ):
                withdrawn.append(request)
        return withdrawn

    def _release_if_due(
        self, incident: Incident, found: Diagnosis, facts: ClusterFacts, now: datetime
    ) -> None:
        """Held proposals whose settle window passed with no better diagnosis: proposed now."""
        if incident.held_until is None or now < incident.held_until:
            return
        self.store.hold(incident.id, None)
        if any(self.store.execution(r.id) is None for r in self.store.requests(incident.id)):
            return  # proposed meanwhile (another replica)
        requests = self.proposals.propose(incident.id, found, facts)
        if requests:
            self.chat.revise_diagnosis(
                self.store.incident(incident.id),
                found,
                requests,
                say(
                    self.settings.lang, "pass.released", settle_s=self.settings.thresholds.settle_s
                ),
            )
            self.told.said(incident.id, found, now)

    def _know_what_it_says(self, open_here: Sequence[Incident], rule: str) -> None:
        """An incident this process has not told yet (a restart, another replica posted it):
        its message states the stored diagnosis, read before this pass overwrites it."""
        same = next((i for i in open_here if i.rule == rule), None)
        if same is None or not same.chat_ref or self.told.knows(same.id):
            return
        stored = self.store.diagnosis(same.id)
        if stored is not None:
            self.told.said(same.id, stored, None)

    def _revise_if_stale(self, incident: Incident, found: Diagnosis, now: datetime) -> None:
        """The message no longer states what blocks the drain (a pod gone, a budget freed, a
        new blocker): revised in place, the change said in its thread and timeline, with
        the buttons of the requests still undecided."""
        if not incident.chat_ref:
            return
        revision = self.told.revision(incident.id, found, now, self.settings.lang)
        if revision is None:
            return
        self.store.append(
            TimelineEntry(
                incident=incident.id,
                at=now,
                actor=GPUBOT,
                kind="note",
                text=revision.note,
                data={"updated": {"gone": list(revision.gone), "new": list(revision.new)}},
            )
        )
        undecided = [
            r
            for r in self.store.requests(incident.id)
            if self.store.execution(r.id) is None and now < r.expires_at
        ]
        self.chat.revise_diagnosis(incident, found, undecided, revision.note)
        self.told.said(incident.id, found, now)

    def _follow_up(self, arrived: list[Signal], scope: frozenset[str] | None) -> None:
        """Signals split during a pass that the pass does not cover (a node outside its scope)
        or that need a word of their own (no node, truncated): left for the next pass."""
        later = [
            s
            for s in arrived
            if s.node is None or s.truncated_alerts or (scope is not None and s.node not in scope)
        ]
        if later:
            self.later(later)

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

    def _own_copies(self, facts: ClusterFacts) -> ClusterFacts:
        """The facts found in this pass, rebuilt from their JSON once the snapshot is freed.
        Facts share their strings with the raw objects they were read from (names, labels,
        messages: about a hundred a node), and each such string kept between passes held
        the 16 KiB pool of the snapshot it sat in, so the snapshot's memory (about 100 MiB
        at 1,000 nodes) stayed the process's after a full pass. Facts reused from an earlier
        pass are copies already, and stay the same objects (their rule matches are kept)."""
        kept = {name: seen for name, (_version_then, seen) in self._facts_seen.items()}
        nodes = {
            name: found
            if found is kept.get(name)
            else NodeFacts.model_validate_json(found.model_dump_json(exclude_unset=True))
            for name, found in facts.nodes.items()
        }
        return facts.model_copy(update={"nodes": nodes})

    def _remember_facts(
        self,
        versions: Mapping[str, str],
        found: Mapping[str, NodeFacts],
        scope: frozenset[str] | None,
    ) -> None:
        """`versions`: each node's resourceVersion as this pass read it."""
        if scope is None:
            self._facts_seen = {
                name: (version, found[name]) for name, version in versions.items() if name in found
            }
            return
        for name, version in versions.items():
            if name in scope and name in found:
                self._facts_seen[name] = (version, found[name])

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
                    text=say(
                        self.settings.lang,
                        "pass.part_of",
                        id=parent.id,
                        rule=parent.rule,
                        pool=node.pool,
                    ),
                    data={"parent": parent.id},
                )
            )

    def _resolve_gone(
        self,
        batch: Sequence[Signal],
        seen: set[str],
        nodes: Mapping[str, NodeFacts],
        now: datetime,
        scope: frozenset[str] | None = None,
    ) -> None:
        """Incidents whose problem was not seen in this pass are absent from now; once their
        symptom has stayed away for `thresholds.resolve_after_s` they are over (a problem
        that comes and goes is one incident, not a resolve and a reopen each pass) — unless
        gpubot acted on the node and it is still out of service: then the loop ends with the
        health gate and an uncordon, not with silence."""
        resolved_on = {s.node for s in batch if s.status == "resolved"}
        after = timedelta(seconds=self.settings.thresholds.resolve_after_s)
        for incident in self.store.incidents(states=_SELF_RESOLVING):
            if incident.cluster != self.settings.cluster:
                continue
            if scope is not None and incident.node not in scope:
                continue  # not looked at in this pass
            if incident.id in seen:
                if incident.absent_since is not None:
                    self.store.mark_present(incident.id)
                if incident.node in resolved_on:
                    self.store.append(
                        TimelineEntry(
                            incident=incident.id,
                            at=now,
                            actor=GPUBOT,
                            kind="note",
                            text=say(self.settings.lang, "pass.still_matches", rule=incident.rule),
                        )
                    )
                continue
            node = nodes.get(incident.node or "")
            absent = self.store.mark_absent(incident.id, now)
            if node is not None and node.unschedulable and self._took_out(incident.id):
                continue  # repaired, still out: the leader's follow-up offers it back
            since = absent.absent_since or now
            if now - since < after:
                continue
            try:
                self.resolve(
                    incident.id,
                    say(
                        self.settings.lang,
                        "pass.gone",
                        rule=incident.rule,
                        since=f"{since:%H:%M:%S}",
                    ),
                )
            except StateChanged:
                continue  # its approval started acting meanwhile: the action's end decides

    def _next_due(self, facts: ClusterFacts, now: datetime) -> datetime | None:
        after = self.settings.thresholds.pending_after_s
        waits = [after - p.pending_s for p in facts.pending_pods if p.pending_s <= after]
        return now + timedelta(seconds=min(waits) + 1) if waits else None

    def _took_out(self, incident_id: str) -> bool:
        """Did gpubot take the incident's node out of service (a cordon or drain that acted)
        and not yet put it back? Such an incident ends with the gate and an uncordon."""
        out = False
        for request in sorted(self.store.requests(incident_id), key=lambda r: r.created_at):
            execution = self.store.execution(request.id)
            if execution is None or execution.outcome != "succeeded":
                continue
            out = request.action is not Action.UNCORDON
        return out

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
                why = withdrawal_text(execution.detail, self.settings.lang)
                self.chat.withdraw(done, request, why)
        if not summary:
            self.chat.post_thread(done, say(self.settings.lang, "pass.resolved", why=why))
            return done
        told = summary_lines(summarize(done, self.store.timeline(incident_id)), self.settings.lang)
        self.chat.post_thread(done, "\n".join(f"{label}: {text}" for label, text in told))
        return done
