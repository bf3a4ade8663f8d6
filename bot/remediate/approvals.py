"""Who may approve what, and when an approval is enough: the policy side of DESIGN.md
invariants 1 and 2, independent of Slack and of the store.

`decide` judges one approval the moment it arrives, against the policy and the approvals
already recorded; it never acts. Recording it exactly once (invariant 3) is the store's
uniqueness constraint; acting is the executor's, after `facts_fingerprint` says the node is
still what the approval saw.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

from bot.config import ActionPolicy, ApprovalPolicy
from bot.model import Action, ActionRequest, NodeFacts, Vote

Judgement = Literal["refused", "need-another", "approved"]


@dataclass(frozen=True)
class Decision:
    outcome: Judgement
    reason: str
    approvers: list[str] = field(default_factory=list)
    needed: int = 0
    """How many different people the policy asks to approve the request
    (`approvals_needed`); 0 when the approval was refused before it counted."""


def new_request(
    request_id: str,
    action: Action,
    node: NodeFacts,
    requested_by: str,
    now: datetime,
    policy: ApprovalPolicy,
    *,
    incident: str | None = None,
    risk: str = "",
    force: bool = False,
    delete_emptydir_data: bool = False,
    override_gate: bool = False,
) -> ActionRequest:
    return ActionRequest(
        id=request_id,
        action=action,
        node=node.name,
        requested_by=requested_by,
        created_at=now,
        expires_at=now + timedelta(seconds=policy.expiry_s),
        facts_fingerprint=facts_fingerprint(node),
        facts_seen=facts_seen(node),
        incident=incident,
        risk=risk,
        force=force,
        delete_emptydir_data=delete_emptydir_data,
        override_gate=override_gate,
    )


def _who(policy: ActionPolicy) -> str:
    names = [f"@{g}" for g in policy.groups] + policy.users
    return ", ".join(names) or "nobody is configured"


def approvals_needed(policy: ApprovalPolicy, request: ActionRequest) -> int:
    """How many different people must approve `request` before it may act: two under a
    two-person rule, else one. The one definition: `decide` asks this many, and whatever
    tells people how many are still missing (a chat's "1 of 2") is given this number."""
    return 2 if policy.for_request(request).two_person else 1


def decide(
    request: ActionRequest,
    approver: str,
    now: datetime,
    policy: ApprovalPolicy,
    groups_of: Callable[[str], set[str]],
    earlier: Sequence[Vote] = (),
) -> Decision:
    """Is this approval, on top of the earlier ones, enough to act?"""
    rule = policy.for_request(request)
    what = f"{request.action.value}{' --force' if request.force else ''} on {request.node}"
    if now >= request.expires_at:
        return Decision(
            "refused", f"this request expired at {request.expires_at:%H:%M:%S} UTC; ask again"
        )
    allowed = approver in rule.users or bool(groups_of(approver) & set(rule.groups))
    if not allowed:
        return Decision("refused", f"you are not allowed to approve {what} (needs: {_who(rule)})")
    if approver == request.requested_by and not rule.allow_self:
        return Decision("refused", f"you asked for {what}; someone else must approve it")
    previous = [v.approver for v in earlier if v.request_id == request.id]
    if approver in previous:
        return Decision(
            "refused", f"you already approved {what}; it needs a different second approver"
        )
    approvers = [*previous, approver]
    needed = approvals_needed(policy, request)
    if len(approvers) < needed:
        return Decision("need-another", f"{what} needs a second approver", approvers, needed)
    return Decision("approved", f"{what} approved by {', '.join(approvers)}", approvers, needed)


def facts_seen(node: NodeFacts) -> dict[str, object]:
    """What an approval saw of the node, and what must not have changed when it runs:
    readiness, cordon, GPUs offered, reboot, upgrade and MIG state, and the pods a drain
    would evict. Ages and restart counts are left out: they change without meaning."""
    return {
        "ready": node.ready,
        "unschedulable": node.unschedulable,
        "gpus": node.gpu.allocatable if node.gpu else None,
        "boot": node.boot_id,
        "upgrade": node.upgrade_state,
        "mig": node.mig_state,
        "pods": sorted(f"{p.namespace}/{p.name}" for p in node.pods if p.must_leave),
    }


def facts_fingerprint(node: NodeFacts) -> str:
    return hashlib.sha256(json.dumps(facts_seen(node), sort_keys=True).encode()).hexdigest()[:16]
