"""Requests a person can approve: a diagnosis' proposals made into requests with their risk,
a request made again once what refused it has cleared, and the uncordon offered once a node
gpubot took out is repaired and passes the health gate.

Why it exists: what is put before a person decides what can ever act. An uncordon is offered
only when the health gate passes (docs/architecture.md, invariant 5), or as "uncordon
anyway" with its own approvers and the failing checks as its risk; a refusal that can clear
(the pool's budget, the gate) is offered again with new buttons, never left silent
(invariant 9).

What it must never do: act on a node, or make a request for a node it could not read.
"""

from __future__ import annotations

import uuid

from bot.approval.blast_radius import check_budget
from bot.approval.checkpoints import checkpoint_risk
from bot.approval.policy import new_request
from bot.clock import Clock
from bot.config import Settings
from bot.facts.fresh import FreshFacts
from bot.gate.gating import HealthGate
from bot.gate.items import GateResult, failing_text
from bot.incidents.timeline import Timeline
from bot.model import (
    Action,
    ActionRequest,
    ClusterFacts,
    Diagnosis,
    IncidentState,
    NodeFacts,
    Proposal,
)
from bot.names import GPUBOT
from bot.ports import Cluster, Store
from bot.texts import say


class Proposals:
    """Owns nothing but the making of requests: each is stored and told in the timeline as it
    is made. Never: offers an uncordon the gate refuses unless as "uncordon anyway", or
    offers a waiting request again before its reason has cleared."""

    def __init__(
        self,
        cluster: Cluster,
        store: Store,
        settings: Settings,
        *,
        facts: FreshFacts,
        gate: HealthGate,
        timeline: Timeline,
        clock: Clock,
    ) -> None:
        self.cluster = cluster
        self.store = store
        self.settings = settings
        self.facts = facts
        self.gate = gate
        self.timeline = timeline
        self.clock = clock

    def _say(self, key: str, **values: object) -> str:
        return say(self.settings.lang, key, **values)

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
                result = self.gate.judge(node, facts)
                self.timeline.gate(incident, result)
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
            made.append(
                self.request(proposal.action, node, incident, requested_by, force=proposal.force)
            )
        if made:
            diagnosed, awaiting = self._say("exec.diagnosed"), self._say("exec.awaiting")
            self.timeline.move(incident, IncidentState.DIAGNOSED, GPUBOT, diagnosed)
            self.timeline.move(incident, IncidentState.AWAITING_APPROVAL, GPUBOT, awaiting)
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
        self.timeline.proposed(request)
        return request

    def again(self, request: ActionRequest, node: NodeFacts) -> ActionRequest:
        """The same request made anew, for the node as it is now."""
        return self.request(
            request.action,
            node,
            request.incident,
            GPUBOT,
            force=request.force,
            delete_emptydir_data=request.delete_emptydir_data,
            override_gate=request.override_gate,
        )

    def reoffer(self, incident_id: str) -> tuple[ActionRequest, ActionRequest, str] | None:
        """The incident's request refused for a reason that has cleared since: (the refused
        request, the new one, why now). None while it has not cleared, or when nothing waits
        (already offered again, or decided otherwise since)."""
        entries = self.store.timeline(incident_id)
        waiting = next((e for e in reversed(entries) if e.data.get("waiting")), None)
        if waiting is None or any(e.kind == "proposal" for e in entries[entries.index(waiting) :]):
            return None
        old = self.store.request(str(waiting.data.get("request")))
        facts = self.facts.of_node(old.node)
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
            result = self.gate.judge(node, facts)
            if not result.passed:
                return None
            self.timeline.gate(incident_id, result)
            why = self._say("exec.reoffer.gate")
        return old, self.again(old, node), why

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
        facts = self.facts.of_node(node_name)
        node = facts.nodes.get(node_name)
        if node is None or not node.known or not node.unschedulable:
            return None
        result = self.gate.judge(node, facts)
        if not result.passed:
            # Names, not reasons: a reason's counts and times move every few seconds.
            if self.timeline.gate_failing(incident_id) == [i.name for i in result.failing]:
                return None
            self.timeline.gate(incident_id, result)
            return [], result
        self.timeline.gate(incident_id, result)
        back = diagnosis.model_copy(
            update={
                "proposals": [
                    Proposal(action=Action.UNCORDON, node=node_name, requires_approval=True)
                ]
            }
        )
        repaired = self._say("exec.state.repaired")
        self.timeline.move(incident_id, IncidentState.AWAITING_APPROVAL, GPUBOT, repaired)
        return self.propose(incident_id, back, facts), result
