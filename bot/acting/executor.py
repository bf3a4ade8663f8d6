"""The executor: an approval becomes an action here and nowhere else (docs/architecture.md,
invariants 1, 2, 3, 5, 6).

Order matters. The vote is recorded, the policy decides, the execution is claimed in the
store (a uniqueness constraint: one execution per request, ever), and only then is the node
read again: if what the approval saw changed, nothing is done and a new request goes out.
Then the blast radius (cordon, drain) or the health gate (uncordon) may still refuse. In
dry-run everything but the writes happens and the timeline says what would have run.

Why one module of this size: the ordering above, the resume after a crash and the hand-over
to another process are one protocol around one execution row; split across modules, the
reader of one step could no longer see what the others guarantee. Proposing (turning a
diagnosis into approvable requests) is here too because asking again after a change is part
of acting. The pieces that stand alone live beside it: the policy (`approvals`), recorded
decisions (`decisions`), the node writes (`nodes`), the drain (`draining`), the blast radius
and the checkpoints.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta

from bot.acting.cordoning import (
    add_taint,
    cordon,
    remove_taint,
    set_annotations,
    take_out,
    uncordon,
)
from bot.acting.draining import DrainProgress, drain
from bot.approval.blast_radius import check_budget
from bot.approval.checkpoints import checkpoint_risk
from bot.approval.policy import facts_fingerprint, facts_seen, new_request, what_matters
from bot.approval.voting import (
    Decisions,
    GroupsOf,
    Notify,
    Outcome,
    Status,
    command_for,
)
from bot.clock import Clock
from bot.config import Settings
from bot.errors import GpubotError
from bot.facts.collecting import collect_facts
from bot.facts.live import read_snapshot, read_to_take_out
from bot.facts.snapshots import Snapshot
from bot.facts.taking_out import take_out_facts
from bot.gate.items import ExternalEvidence, GateResult, failing_text, health_gate
from bot.gate.smoke_test import SmokeTests
from bot.kube_objects import Obj, name_of
from bot.model import (
    Action,
    ActionRequest,
    ClusterFacts,
    Diagnosis,
    IncidentState,
    Lang,
    NodeFacts,
    Proposal,
    TimelineKind,
)
from bot.names import GPUBOT, MAINTENANCE_TAINT, PREFIX
from bot.ports import Cluster, Execution, ExecutionOutcome, Store
from bot.texts import say

OUR_ANNOTATIONS = ("incident", "approved-by", "reason", "since")


def what_changed(before: dict[str, object], after: dict[str, object], lang: Lang) -> str:
    changed = [
        f"{key}: {before.get(key)!r} → {after.get(key)!r}"
        for key in sorted(after)
        if before.get(key) != after.get(key)
    ]
    return "; ".join(changed) or say(lang, "exec.changed_facts")


@dataclass(frozen=True)
class _Acted:
    """What `_act` did, as codes the executor branches on and the sentence it tells."""

    text: str
    done: bool = True
    """False: a drain refused or incomplete (a failure, not a success)."""
    drained: str = ""
    """For a completed drain, the detail of its line ("evicted 2 pods in 0.3 s")."""


@dataclass(frozen=True)
class _Cleared:
    """An approved action past every check, with what the check read."""

    current: Obj
    """The node object as read, the patch computed from it ({} when not a cordon or drain)."""
    facts: NodeFacts


def _failing(result: GateResult) -> list[str]:
    # Names, not reasons: a reason's counts and times move every few seconds, and the thread
    # hears a failing gate again only when what fails changes.
    return [i.name for i in result.failing]


class Executor:
    def __init__(
        self,
        cluster: Cluster,
        store: Store,
        settings: Settings,
        *,
        executor_id: str,
        groups_of: GroupsOf = lambda _user: set(),
        clock: Clock,
        notify: Notify | None = None,
        external: Callable[[str], ExternalEvidence] = lambda _node: ExternalEvidence(),
    ) -> None:
        self.cluster = cluster
        self.store = store
        self.settings = settings
        self.executor_id = executor_id
        self.groups_of = groups_of
        self.clock = clock
        self.notify = notify or (lambda _entry: None)
        self.external = external
        smoke = settings.remediation.smoke_test
        self.smoke_tests = SmokeTests(cluster, smoke, clock) if smoke.enabled else None
        # Through a lambda, so a notify set later (the service's chat) is the one used.
        self.decisions = Decisions(
            store, settings, groups_of=groups_of, clock=clock, notify=lambda e: self.notify(e)
        )
        self._running: set[str] = set()
        self._running_lock = threading.Lock()
        self._taking_out = threading.Lock()
        self._displaced: dict[str, threading.Event] = {}
        """Per action running here: set once its heartbeat finds another process owns it."""

    def _reserve(self, request_id: str) -> bool:
        """Marks an action as this process' own before it is claimed or taken over, so a
        leader tick in between cannot take it for an orphan; False when already here."""
        with self._running_lock:
            if request_id in self._running:
                return False
            self._running.add(request_id)
            return True

    def _release(self, request_id: str) -> None:
        with self._running_lock:
            self._running.discard(request_id)

    @contextmanager
    def _owning(self, request_id: str) -> Iterator[None]:
        """While an action runs here (reserved by the caller): a heartbeat tells other
        processes it is alive; the reservation ends with it."""
        stop = threading.Event()
        every = self.settings.remediation.execution_stale_s / 3
        displaced = self._displaced[request_id] = threading.Event()

        def beat() -> None:
            while not stop.wait(every):
                try:
                    if not self.store.beat(request_id, self.executor_id, self.clock()):
                        # Taken over (this process looked dead: a long pause, a partition)
                        # or finished elsewhere: stop acting, the owner carries on.
                        displaced.set()
                        return
                except GpubotError:
                    continue  # the store hiccuped: the next beat may get through

        beating = threading.Thread(target=beat, name=f"heartbeat-{request_id}", daemon=True)
        beating.start()
        try:
            yield
        finally:
            stop.set()
            self._displaced.pop(request_id, None)
            self._release(request_id)

    # ---- the timeline ---------------------------------------------------------------------

    def _note(
        self,
        incident: str | None,
        kind: TimelineKind,
        text: str,
        actor: str = GPUBOT,
        **data: object,
    ) -> None:
        self.decisions.note(incident, kind, text, actor, **data)

    def _move(self, incident: str | None, target: IncidentState, actor: str, text: str) -> None:
        self.decisions.move(incident, target, actor, text)

    def _say(self, key: str, **values: object) -> str:
        """A sentence for the timeline and the thread, in the settings' language."""
        return say(self.settings.lang, key, **values)

    # ---- facts ----------------------------------------------------------------------------

    def read_facts(self, node: str) -> ClusterFacts:
        """The node as it is now, with the alerts firing on it (an Xid still firing keeps the
        health gate shut here as it does in the rules)."""
        return self._facts(read_snapshot(self.cluster, node), node)

    def read_to_take_out(self, node: str, action: Action) -> tuple[Snapshot, ClusterFacts]:
        """For the check before a cordon or drain: the node's own facts and its pool's
        cordons and readiness (`bot.facts.taking_out`), from the node list, and for a
        drain the node's pods (`bot.facts.live.read_to_take_out`)."""
        snapshot = read_to_take_out(self.cluster, node, pods=action is Action.DRAIN)
        return snapshot, take_out_facts(snapshot, node, self.settings, self.clock())

    def _facts(self, snapshot: Snapshot, node: str) -> ClusterFacts:
        firing = self.store.firing_alerts(node)
        return collect_facts(snapshot, firing, self.settings, self.clock())

    def gate(self, node: NodeFacts, facts: ClusterFacts) -> GateResult:
        evidence = self.external(node.name)
        if self.smoke_tests is not None:
            return self.smoke_tests.gate(node, facts, evidence, self.settings.gpu_resource)
        return health_gate(node, facts, evidence, self.settings.gpu_resource)

    # ---- proposals ------------------------------------------------------------------------

    def propose(
        self,
        incident: str,
        diagnosis: Diagnosis,
        facts: ClusterFacts,
        requested_by: str = GPUBOT,
    ) -> list[ActionRequest]:
        """The diagnosis' proposals as approvable requests, with their risk. Uncordon only
        when the health gate passes (invariant 5); a gate that fails is in the timeline."""
        made: list[ActionRequest] = []
        for proposal in diagnosis.proposals:
            if proposal.action is Action.NONE or not proposal.node:
                continue
            node = facts.nodes.get(proposal.node)
            if node is None:
                continue
            if proposal.action is Action.UNCORDON:
                result = self.gate(node, facts)
                self._record_gate(incident, result)
                if not result.passed:
                    # Not an uncordon, but the way out a person may still choose: "uncordon
                    # anyway", with its own approvers (two by default) and the failing checks
                    # as its risk. Without it a node whose gate cannot be evaluated (no
                    # Prometheus) could only come back by hand, outside the record.
                    failing = failing_text(result.failing, self.settings.lang)
                    made.append(
                        self.request(
                            Action.UNCORDON,
                            node,
                            incident,
                            requested_by,
                            override_gate=True,
                            gate_failures=failing,
                        )
                    )
                    continue
            request = self.request(
                proposal.action, node, incident, requested_by, force=proposal.force
            )
            made.append(request)
        if made:
            self._move(incident, IncidentState.DIAGNOSED, GPUBOT, self._say("exec.diagnosed"))
            self._move(
                incident, IncidentState.AWAITING_APPROVAL, GPUBOT, self._say("exec.awaiting")
            )
        return made

    def request(
        self,
        action: Action,
        node: NodeFacts,
        incident: str | None,
        requested_by: str,
        *,
        force: bool = False,
        delete_emptydir_data: bool = False,
        override_gate: bool = False,
        gate_failures: str = "",
    ) -> ActionRequest:
        """A new request, stored and in the timeline; also what a slash command makes."""
        now = self.clock()
        policy = self.settings.remediation
        risk = ""
        if override_gate:
            failing = gate_failures or self._say("risk.see_timeline")
            risk = self._say("risk.override", failing=failing)
        if action in (Action.DRAIN, Action.CORDON):
            pods = self.cluster.list("Pod", field_selector=f"spec.nodeName={node.name}")
            risk = checkpoint_risk(
                pods,
                now,
                gpu_resource=self.settings.gpu_resource,
                annotation=policy.checkpoint_annotation,
                max_age_s=policy.checkpoint_max_age_s,
                lang=self.settings.lang,
            )
            if action is Action.CORDON:
                # A cordon evicts nothing; the risk is only the drain that usually follows.
                risk = self._say("risk.cordon", risk=risk) if risk else ""
        request = new_request(
            f"{incident or 'adhoc'}-{action.value}-{uuid.uuid4().hex[:8]}",
            action,
            node,
            requested_by,
            now,
            policy.approvals,
            incident=incident,
            risk=risk,
            force=force,
            delete_emptydir_data=delete_emptydir_data,
            override_gate=override_gate,
        )
        self.store.add_request(request)
        self._note(
            incident,
            "proposal",
            self._say("exec.proposed", command=command_for(request))
            + (self._drain_flags(request) if action is Action.DRAIN else "")
            + (self._say("exec.risk", risk=risk) if risk else ""),
            requested_by,
            request=request.id,
            action=action.value,
            node=node.name,
            expires_at=request.expires_at.isoformat(),
        )
        return request

    def _drain_flags(self, request: ActionRequest) -> str:
        """Which of the runbook's drain flags this drain uses, and why: what `command_for`
        shows and `drain()` is given are the same request fields."""
        if request.delete_emptydir_data:
            return self._say("exec.drain_flags_emptydir")
        return self._say("exec.drain_flags")

    def _record_gate(self, incident: str | None, result: GateResult) -> None:
        items = [i.as_data() for i in result.items]
        verdict = "exec.gate.passed" if result.passed else "exec.gate.failed"
        failing = failing_text(result.failing, self.settings.lang)
        self._note(
            incident,
            "gate",
            self._say(verdict, node=result.node)
            + (self._say("exec.gate.failing", failing=failing) if failing else ""),
            passed=result.passed,
            items=items,
        )

    # ---- approvals ------------------------------------------------------------------------

    def deny(self, request_id: str, who: str, reason: str = "") -> Outcome:
        return self.decisions.deny(request_id, who, reason)

    def approve(self, request_id: str, approver: str, *, execute: bool = True) -> Outcome:
        """One person's approval, judged against the policy now; acts when it is enough
        (unless `execute` is False: a replica that does not lead leaves it to the leader)."""
        outcome = self.decisions.approve(request_id, approver)
        if outcome.status != "recorded":
            return outcome
        if not execute:
            runs = self._say("exec.leader_runs_it", message=outcome.message)
            return Outcome(request_id, "recorded", runs)
        if outcome.request is None:
            return self.execute(request_id)
        return self._execute(outcome.request, voted_here=True)

    def execute_approved(self) -> list[Outcome]:
        """Requests approved (on any replica) and not yet executed: the leader's pickup."""
        outcomes = []
        for request in self.store.requests_to_execute(self.clock()):
            if self._recorded_approval(request) is not None:
                outcomes.append(self.execute(request.id))
        return outcomes

    # ---- acting ---------------------------------------------------------------------------

    def execute(self, request_id: str) -> Outcome:
        """An approved request run, whoever asks: whether it is still valid, unexpired and
        approved as the policy wants is judged here again from the store."""
        request = self.store.request(request_id)
        stale = self.decisions.no_longer_valid(request)
        if stale is not None:
            return stale
        return self._execute(request, voted_here=False)

    def _execute(self, request: ActionRequest, *, voted_here: bool) -> Outcome:
        """`voted_here`: the deciding vote was recorded a moment ago by `Decisions.approve`,
        which found the request valid and moved its incident to approved; the claim still
        refuses it if its incident was resolved since."""
        request_id = request.id
        now = self.clock()
        if now >= request.expires_at:
            return Outcome(
                request_id, "expired", self._say("exec.expired_at", at=request.expires_at)
            )
        enough = self._recorded_approval(request)
        if enough is None:
            # Invariant 1: whoever calls this, the store must hold approvals that satisfy
            # the policy for exactly this request.
            return Outcome(request_id, "not-allowed", self._say("exec.no_approval"))
        if not self._reserve(request_id):
            return Outcome(request_id, "duplicate", self._say("exec.running_here"))
        with self._owning(request_id):
            if not self.store.claim_execution(request_id, self.executor_id, now):
                # Resolved a moment ago (the claim looks at the incident in its transaction)?
                stale = self.decisions.no_longer_valid(request)
                if stale is not None:
                    return stale
                done = self.store.execution(request_id)
                state = f" ({done.outcome})" if done else ""
                return Outcome(
                    request_id, "duplicate", self._say("exec.already_executed", state=state)
                )
            if not voted_here:
                # Approvals recorded elsewhere (an older CLI, a replica that died mid-click)
                # may have left the incident awaiting approval: the record must say it was
                # approved.
                self._move(
                    request.incident,
                    IncidentState.APPROVED,
                    GPUBOT,
                    self._say("exec.state.approved", who=", ".join(enough)),
                )
            return self._run(request, enough)

    def _recorded_approval(self, request: ActionRequest) -> list[str] | None:
        return self.decisions.approvers_enough(request)

    def _approvers(self, request_id: str) -> list[str]:
        return [v.approver for v in self.store.votes(request_id)]

    def _finish(
        self, request: ActionRequest, outcome: ExecutionOutcome, status: Status, message: str
    ) -> Outcome:
        if not self.store.finish_execution(
            request.id, outcome, message, self.clock(), executor=self.executor_id
        ):
            return self._gave_way(request)
        kind: TimelineKind = "action-result"
        self._note(request.incident, kind, message, request=request.id, outcome=outcome)
        return Outcome(request.id, status, message)

    def _check(self, request: ActionRequest) -> Outcome | _Cleared:
        """Everything that may still refuse an approved action; `_Cleared` when it may go
        ahead, with what was read for it."""
        current: Obj = {}
        try:
            if request.action in (Action.CORDON, Action.DRAIN):
                snapshot, facts = self.read_to_take_out(request.node, request.action)
                current = next((n for n in snapshot.nodes if name_of(n) == request.node), {})
            else:
                facts = self.read_facts(request.node)
        except GpubotError as exc:
            return self._fail(request, self._say("exec.unreadable", node=request.node, error=exc))
        node = facts.nodes.get(request.node)
        if node is None or not node.known:
            gone = self._say("exec.gone", node=request.node)
            return self._finish(request, "refused", "refused", gone)

        seen = what_matters(request.action, facts_seen(node))
        expected = what_matters(request.action, request.facts_seen)
        if request.action is Action.DRAIN and node.unschedulable:
            # A drain cordons first: a cordon since the approval (ours or a person's) is
            # what the drain would do anyway, not a material change.
            expected["unschedulable"] = True
        if facts_fingerprint(node) != request.facts_fingerprint and seen != expected:
            changed = what_changed(request.facts_seen, seen, self.settings.lang)
            return self._ask_again(request, node, changed)

        if request.action in (Action.CORDON, Action.DRAIN):
            limits = self.settings.remediation.blast_radius
            verdict = check_budget(facts, request.node, limits, self.settings.lang)
            if not verdict.allowed:
                return self._wait_for(request, "blast-radius", verdict.reason)
        if request.action is Action.UNCORDON and not request.override_gate:
            result = self.gate(node, facts)
            self._record_gate(request.incident, result)
            if not result.passed:
                failing = failing_text(result.failing, self.settings.lang)
                why = self._say("exec.gate.not_passed", failing=failing)
                return self._wait_for(request, "health-gate", why)

        if self.settings.remediation.dry_run:
            would = self._say("exec.dry_run", command=command_for(request))
            return self._finish(request, "dry-run", "dry-run", would)
        return _Cleared(current, node)

    def _started(self, request: ActionRequest, approvers: list[str], node: NodeFacts) -> None:
        """The action's start in the record. For a cordon or drain it is written once the
        node is taken out, not before: the patch waits for no bookkeeping, and a crash in
        between resumes the execution (`acting`), which moves the incident on itself."""
        self._move(request.incident, IncidentState.EXECUTING, GPUBOT, self._say("exec.executing"))
        self._note(
            request.incident,
            "action-start",
            self._say("exec.running", command=command_for(request), who=", ".join(approvers)),
            request=request.id,
            # The pods a drain has to move, for a drain taken over to tell the whole of it;
            # a cordon reads none.
            pods=None if request.action is Action.CORDON else node.remaining_pods,
        )

    def _wait_for(self, request: ActionRequest, reason: str, why: str) -> Outcome:
        """Refused for a reason that can clear (the pool's budget, the health gate): this
        request is over, its incident waits again, and `reoffer` asks anew, with new buttons,
        once the reason has cleared. Never a silent failure."""
        message = self._say("exec.waiting", why=why)
        if not self.store.finish_execution(
            request.id, "refused", message, self.clock(), executor=self.executor_id
        ):
            return self._gave_way(request)
        self._move(
            request.incident,
            IncidentState.AWAITING_APPROVAL,
            GPUBOT,
            self._say("exec.state.waiting", why=why),
        )
        self._note(
            request.incident,
            "note",
            message,
            request=request.id,
            waiting=reason,
            action=request.action.value,
            node=request.node,
        )
        return Outcome(request.id, "refused", message)

    def reoffer(self, incident_id: str) -> tuple[ActionRequest, ActionRequest, str] | None:
        """The incident's request refused for a reason that has cleared since: (the refused
        request, the new one, why now). None while it has not cleared, or when nothing waits
        (already offered again, or decided otherwise since)."""
        entries = self.store.timeline(incident_id)
        waiting = next((e for e in reversed(entries) if e.data.get("waiting")), None)
        if waiting is None or any(e.kind == "proposal" for e in entries[entries.index(waiting) :]):
            return None
        old = self.store.request(str(waiting.data.get("request")))
        facts = self.read_facts(old.node)
        node = facts.nodes.get(old.node)
        if node is None or not node.known:
            return None
        if waiting.data.get("waiting") == "blast-radius":
            limits = self.settings.remediation.blast_radius
            verdict = check_budget(facts, old.node, limits, self.settings.lang)
            if not verdict.allowed:
                return None
            why = self._say("exec.reoffer.room", why=verdict.reason)
        else:
            result = self.gate(node, facts)
            if not result.passed:
                return None
            self._record_gate(incident_id, result)
            why = self._say("exec.reoffer.gate")
        new = self.request(
            old.action,
            node,
            incident_id,
            GPUBOT,
            force=old.force,
            delete_emptydir_data=old.delete_emptydir_data,
            override_gate=old.override_gate,
        )
        return old, new, why

    def back_to_service(
        self, incident_id: str, diagnosis: Diagnosis
    ) -> tuple[list[ActionRequest], GateResult] | None:
        """After a repair (the problem gone, the node still out because gpubot took it out):
        the health gate. When it passes, an uncordon is proposed (returned with the gate);
        when it fails, the failing items are returned with no request, once per change of
        what fails (the follow-up asks every few seconds, the thread hears it once), and it
        is asked again until it passes: a time window ends, a pod comes back. None while a
        request of the incident is still undecided, the node is back already, or nothing
        changed since the last answer."""
        for request in self.store.requests(incident_id):
            if self.store.execution(request.id) is None and self.clock() < request.expires_at:
                return None
        node_name = diagnosis.node
        if not node_name:
            return None
        facts = self.read_facts(node_name)
        node = facts.nodes.get(node_name)
        if node is None or not node.known or not node.unschedulable:
            return None
        result = self.gate(node, facts)
        if not result.passed:
            if self._gate_said(incident_id) == _failing(result):
                return None
            self._record_gate(incident_id, result)
            return [], result
        self._record_gate(incident_id, result)
        back = diagnosis.model_copy(
            update={
                "proposals": [
                    Proposal(action=Action.UNCORDON, node=node_name, requires_approval=True)
                ]
            }
        )
        self._move(
            incident_id, IncidentState.AWAITING_APPROVAL, GPUBOT, self._say("exec.state.repaired")
        )
        return self.propose(incident_id, back, facts), result

    def _gate_said(self, incident_id: str) -> list[str] | None:
        """The failing items of the incident's last gate entry (None: no gate yet)."""
        entries = self.store.timeline(incident_id)
        last = next((e for e in reversed(entries) if e.kind == "gate"), None)
        if last is None:
            return None
        items = last.data.get("items")
        if not isinstance(items, list):
            return None
        return [
            str(i.get("name"))
            for i in items
            if isinstance(i, dict) and i.get("outcome") != "pass" and i.get("required", True)
        ]

    def _run(self, request: ActionRequest, approvers: list[str]) -> Outcome:
        taking_out = request.action in (Action.CORDON, Action.DRAIN)
        # Invariant 6 (the blast radius) across threads: two approvals at once must not both
        # read a pool with room for one node and both cordon. From the read to the cordon is
        # one step.
        with self._taking_out if taking_out else nullcontext():
            cleared = self._check(request)
            if isinstance(cleared, Outcome):
                return cleared
            # Past every check: only from here may a crash be resumed without checking again.
            self.store.mark_acting(request.id, self.executor_id)
            cordoned = None
            if taking_out:
                # Cordon, taint and annotations in one patch on the node just read: with the
                # node list, two requests, as `kubectl cordon` sends.
                try:
                    cordoned = take_out(
                        self.cluster,
                        request.node,
                        cleared.current,
                        *self._marks(request, approvers),
                    ).changed
                except GpubotError as exc:
                    self._started(request, approvers, cleared.facts)
                    return self._fail(request, self._failed(request, exc))
        self._started(request, approvers, cleared.facts)
        try:
            acted = self._act(request, approvers, cordoned)
        except GpubotError as exc:
            return self._fail(request, self._failed(request, exc))
        if self._lost(request):
            return self._gave_way(request)
        message = acted.text
        if not acted.done:
            return self._fail(request, message)
        self._move(request.incident, IncidentState.SUCCEEDED, GPUBOT, message)
        return self._finish(request, "succeeded", "acted", message)

    def _lost(self, request: ActionRequest) -> bool:
        displaced = self._displaced.get(request.id)
        return displaced is not None and displaced.is_set()

    def _gave_way(self, request: ActionRequest) -> Outcome:
        """Another process owns this execution now: it tells the result, not this one."""
        message = self._say("exec.gave_way", command=command_for(request))
        self._note(request.incident, "note", message, request=request.id)
        return Outcome(request.id, "duplicate", message)

    def _failed(self, request: ActionRequest, error: GpubotError) -> str:
        return self._say("exec.failed", command=command_for(request), error=error)

    def _fail(self, request: ActionRequest, message: str) -> Outcome:
        self._move(request.incident, IncidentState.EXECUTING, GPUBOT, self._say("exec.executing"))
        self._move(request.incident, IncidentState.FAILED, GPUBOT, message)
        return self._finish(request, "failed", "failed", message)

    def _ask_again(self, request: ActionRequest, node: NodeFacts, changed: str) -> Outcome:
        self.store.finish_execution(
            request.id,
            "refused",
            self._say("exec.changed", changed=changed),
            self.clock(),
            executor=self.executor_id,
        )
        self._move(
            request.incident,
            IncidentState.AWAITING_APPROVAL,
            GPUBOT,
            self._say("exec.state.asking_again"),
        )
        again = self.request(
            request.action,
            node,
            request.incident,
            GPUBOT,
            force=request.force,
            delete_emptydir_data=request.delete_emptydir_data,
            override_gate=request.override_gate,
        )
        message = self._say(
            "exec.changed_ask_again", node=request.node, changed=changed, id=again.id
        )
        self._note(request.incident, "note", message, request=request.id, again=again.id)
        return Outcome(request.id, "changed", message, new_request=again)

    def _marks(
        self, request: ActionRequest, approvers: list[str]
    ) -> tuple[dict[str, str] | None, dict[str, str]]:
        """The maintenance taint (None when the settings want none) and the annotations a
        node gpubot takes out carries."""
        incident = request.incident or "none"
        taint = None
        if self.settings.remediation.maintenance_taint:
            taint = {"key": MAINTENANCE_TAINT, "value": incident, "effect": "NoSchedule"}
        return taint, {
            f"{PREFIX}incident": incident,
            f"{PREFIX}approved-by": ",".join(approvers),
            f"{PREFIX}reason": f"{request.action.value} approved in gpubot",
            f"{PREFIX}since": self.clock().isoformat(),
        }

    def _mark(self, request: ActionRequest, approvers: list[str]) -> None:
        taint, annotations = self._marks(request, approvers)
        if taint is not None:
            add_taint(self.cluster, request.node, taint["key"], taint["value"], taint["effect"])
        set_annotations(self.cluster, request.node, annotations)

    def _act(
        self, request: ActionRequest, approvers: list[str], cordoned: bool | None = None
    ) -> _Acted:
        """`cordoned`: whether `_run` just cordoned the node (None: not done yet, a resume)."""
        node = request.node
        if request.action is Action.CORDON:
            changed = cordoned
            if changed is None:  # a resume: `_run` did not take it out
                changed = cordon(self.cluster, node).changed
                self._mark(request, approvers)
            return _Acted(self._say("exec.cordoned" if changed else "exec.was_cordoned", node=node))
        if request.action is Action.UNCORDON:
            changed = uncordon(self.cluster, node).changed
            remove_taint(self.cluster, node, MAINTENANCE_TAINT)
            set_annotations(self.cluster, node, {f"{PREFIX}{k}": None for k in OUR_ANNOTATIONS})
            key = "exec.uncordoned" if changed else "exec.was_not_cordoned"
            return _Acted(self._say(key, node=node))
        # Marked before the drain, so the node says why it is cordoned while pods leave.
        if cordoned is None:
            cordon(self.cluster, node)
            self._mark(request, approvers)
        result = drain(
            self.cluster,
            node,
            timeout_s=self.settings.remediation.drain_timeout_s,
            delete_emptydir_data=request.delete_emptydir_data,
            allow_unmanaged=request.force,
            disable_eviction=request.force,
            on_progress=self._progress(request),
            keep_going=lambda: not self._lost(request),
        )
        if result.refused:
            reasons = self._say("gate.separator").join(
                self._say(
                    "exec.drain_refusal", pod=f"{r.namespace}/{r.name}", why=r.message, flag=r.flag
                )
                for r in result.plan.refusals
            )
            return _Acted(self._say("exec.drain_refused", reasons=reasons), done=False)
        removed = len(result.evicted) + len(result.deleted)
        if result.stalled:
            stalls = "; ".join(f"{s.namespace}/{s.name}: {s.reason}" for s in result.stalled)
            # Of the pods the drain had to move (DaemonSet pods stay and are not counted).
            wanted = len(result.plan.to_remove)
            incomplete = self._say(
                "exec.drain_incomplete",
                removed=removed,
                wanted=wanted,
                stuck=len(result.stalled),
                stalls=stalls,
            )
            return _Acted(incomplete, done=False)
        how = self._say("exec.deleted_how" if request.force else "exec.evicted_how")
        # After a restart some pods were already leaving (evicted before the kill): they were
        # waited for, not evicted again, and the count says so instead of looking short.
        leaving = len(result.plan.to_remove) - removed
        already = self._say("exec.already_leaving", n=leaving) if leaving > 0 else ""
        detail = self._say(
            "exec.drain_detail",
            how=how,
            removed=removed,
            already=already,
            seconds=result.duration_s,
        )
        return _Acted(self._say("exec.drained", node=node, detail=detail), drained=detail)

    def _whole_drain(self, request: ActionRequest, resumed: str) -> str:
        """A drain taken over after its owner died tells the whole drain, not its last part:
        the pods it had to move when it began (every owner's evictions) and the time since it
        began. `resumed`: what this owner's part did (the detail of its drained line); "" when the
        timeline does not say where the drain began."""
        entries = self.store.timeline(request.incident) if request.incident else []
        start = next(
            (
                e
                for e in entries
                if e.kind == "action-start" and e.data.get("request") == request.id
            ),
            None,
        )
        execution = self.store.execution(request.id)
        began = start.at if start is not None else (execution.started_at if execution else None)
        total = start.data.get("pods") if start is not None else None
        if began is None or not isinstance(total, int):
            return ""  # nothing tells where the drain began: this owner's part is all there is
        took = (self.clock() - began).total_seconds()
        whole = self._say("exec.whole_drain", total=total, seconds=took, last=resumed)
        return self._say("exec.drained", node=request.node, detail=whole)

    def _progress(self, request: ActionRequest) -> Callable[[DrainProgress], None]:
        """Every blocker, and every quarter of the way: a thread, not a firehose. Evictions
        finish on several threads at once; a count lower than one already told is dropped,
        so the thread never reads "evicted 2/2" before "evicted 1/2"."""
        reported: set[int] = set()
        lock = threading.Lock()

        def report(progress: DrainProgress) -> None:
            with lock:
                tell(progress)

        def tell(progress: DrainProgress) -> None:
            if progress.event in ("blocked", "stalled"):
                self._note(
                    request.incident,
                    "action-progress",
                    f"{progress.event} {progress.pod}: {progress.detail}",
                    request=request.id,
                    done=progress.done,
                    total=progress.total,
                )
                return
            quarter = (4 * progress.done) // max(progress.total, 1)
            if progress.event == "gone" and quarter > max(reported, default=0):
                reported.add(quarter)
                self._note(
                    request.incident,
                    "action-progress",
                    self._say("exec.evicted", done=progress.done, total=progress.total),
                    request=request.id,
                    done=progress.done,
                    total=progress.total,
                )

        return report

    # ---- after a restart ------------------------------------------------------------------

    def resume(self) -> list[Outcome]:
        """Executions claimed but never finished (the process died mid-action): run them
        again. Every action is idempotent — a cordon twice is one cordon, and a drain evicts
        only pods still on the node — so resuming repeats no eviction of a gone pod."""
        outcomes = []
        for unfinished in self.store.unfinished_executions():
            outcome = self._resume(unfinished)
            if outcome is not None:
                outcomes.append(outcome)
        return outcomes

    def pending(self) -> list[str]:
        """What the leader's duties would run now, by request id: executions whose owner
        stopped beating (or that this process' earlier life left), then approvals recorded
        elsewhere and not yet executed. Each is run by `run_pending`."""
        now = self.clock()
        stale_before = now - timedelta(seconds=self.settings.remediation.execution_stale_s)
        with self._running_lock:
            running = set(self._running)
        ids = [
            u.request_id
            for u in self.store.unfinished_executions()
            if u.request_id not in running
            and (u.executor == self.executor_id or (u.heartbeat_at or u.started_at) < stale_before)
        ]
        ids += [
            r.id
            for r in self.store.requests_to_execute(now)
            if self._recorded_approval(r) is not None
        ]
        return ids

    def run_pending(self, request_id: str) -> Outcome | None:
        """Resume or execute one of `pending()`; None when someone else got to it first."""
        execution = self.store.execution(request_id)
        if execution is None:
            return self.execute(request_id)
        if execution.finished_at is not None:
            return None
        return self._resume(execution)

    def _resume(self, unfinished: Execution) -> Outcome | None:
        if not self._reserve(unfinished.request_id):
            return None  # running here right now, e.g. a drain started by a click
        with self._owning(unfinished.request_id):
            now = self.clock()
            stale_before = now - timedelta(seconds=self.settings.remediation.execution_stale_s)
            if not self.store.take_over_execution(
                unfinished.request_id, self.executor_id, now, stale_before
            ):
                return None  # its owner is alive (heartbeat fresh) or another took it over
            request = self.store.request(unfinished.request_id)
            approvers = self._recorded_approval(request)
            if approvers is None:
                return self._fail(request, self._say("exec.resume.no_approval"))
            if unfinished.outcome != "acting":
                # Died before its checks were through (facts, budget, gate, dry-run): nothing
                # was written, so run it as a first execution would, checks and all.
                if now >= request.expires_at:
                    expired = self._say("exec.resume.expired", at=request.expires_at)
                    return self._fail(request, expired)
                self._note(
                    request.incident,
                    "note",
                    self._say(
                        "exec.resume.from_checks",
                        command=command_for(request),
                        who=unfinished.executor,
                    ),
                    request=request.id,
                )
                return self._run(request, approvers)
            self._note(
                request.incident,
                "note",
                self._say(
                    "exec.resume.resuming",
                    command=command_for(request),
                    at=f"{unfinished.started_at:%H:%M:%S}",
                    who=unfinished.executor,
                ),
                request=request.id,
            )
            return self._resume_one(request)

    def _resume_one(self, request: ActionRequest) -> Outcome:
        approvers = self._approvers(request.id)
        # Its owner may have died between taking the node out and writing the start (a
        # no-op when it is executing already).
        self._move(request.incident, IncidentState.EXECUTING, GPUBOT, self._say("exec.executing"))
        try:
            acted = self._act(request, approvers)
            message = acted.text
            if acted.drained:
                whole = self._whole_drain(request, acted.drained)
                message = whole or message
        except GpubotError as exc:
            failed = self._say("exec.resume.failed", command=command_for(request), error=exc)
            return self._fail(request, failed)
        if self._lost(request):
            return self._gave_way(request)
        if not acted.done:
            return self._fail(request, message)
        self._move(request.incident, IncidentState.SUCCEEDED, GPUBOT, message)
        return self._finish(request, "succeeded", "acted", message)
