"""Who may approve what, and when an approval is enough: the policy side of docs/architecture.md
invariants 1 and 2, independent of Slack and of the store.

`decide` judges one approval the moment it arrives, against the policy and the approvals
already recorded; it never acts. Recording it exactly once (invariant 3) is the store's
uniqueness constraint; acting is the executor's, after `facts_fingerprint` says the node is
still what the approval saw.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bot.config import ActionPolicy, ApprovalPolicy, DenyPolicy
from bot.model import Action, ActionRequest, Judgement, Lang, NodeFacts, Vote
from bot.texts import say


@dataclass(frozen=True)
class Decision:
    outcome: Judgement
    reason: str
    approvers: list[str] = field(default_factory=list)
    needed: int = 0
    """How many different people the policy asks to approve the request
    (`approvals_needed`); 0 when the vote was not counted (not allowed, or expired)."""

    @property
    def counted(self) -> bool:
        return self.outcome in ("need-another", "approved")


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


def _names(policy: ActionPolicy | DenyPolicy) -> list[str]:
    return [f"@{g}" for g in policy.groups] + policy.users


def _who(policy: ActionPolicy, lang: Lang) -> str:
    return say(lang, "list.enumeration").join(_names(policy)) or say(lang, "approval.nobody")


def _allowed(
    person: str, policy: ActionPolicy | DenyPolicy, groups_of: Callable[[str], set[str]]
) -> bool:
    return person in policy.users or bool(groups_of(person) & set(policy.groups))


def deny_refusal(
    request: ActionRequest,
    person: str,
    policy: ApprovalPolicy,
    groups_of: Callable[[str], set[str]],
    lang: Lang,
) -> str | None:
    """Why `person` may not deny `request` (saying who may), or None when they may: those
    who may approve it, whoever asked for it, and the policy's `deny` set. A deny ends the
    request for good, so a stranger's would take the decision from the rightful approvers."""
    rule = policy.for_request(request)
    if (
        person == request.requested_by
        or _allowed(person, rule, groups_of)
        or _allowed(person, policy.deny, groups_of)
    ):
        return None
    names = list(dict.fromkeys([*_names(rule), *_names(policy.deny)]))
    action = f"{request.action.value}{' --force' if request.force else ''}"
    who = say(lang, "list.enumeration").join(names) or say(lang, "approval.nobody")
    return say(lang, "approval.deny_refused", action=action, node=request.node, who=who)


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
    lang: Lang = Lang.EN,
) -> Decision:
    """Is this approval, on top of the earlier ones, enough to act? Its reason in `lang`."""
    rule = policy.for_request(request)
    action = f"{request.action.value}{' --force' if request.force else ''}"
    what = say(lang, "approval.what", action=action, node=request.node)
    if now >= request.expires_at:
        return Decision(
            "expired", say(lang, "approval.expired", at=f"{request.expires_at:%H:%M:%S}")
        )
    if not _allowed(approver, rule, groups_of):
        return Decision(
            "not-allowed", say(lang, "approval.not_allowed", what=what, who=_who(rule, lang))
        )
    if approver == request.requested_by and not rule.allow_self:
        return Decision("not-allowed", say(lang, "approval.self", what=what))
    previous = [v.approver for v in earlier if v.request_id == request.id]
    if approver in previous:
        return Decision("not-allowed", say(lang, "approval.again", what=what))
    approvers = [*previous, approver]
    needed = approvals_needed(policy, request)
    if len(approvers) < needed:
        return Decision("need-another", say(lang, "approval.second", what=what), approvers, needed)
    who = say(lang, "list.enumeration").join(approvers)
    return Decision(
        "approved", say(lang, "approval.approved", what=what, who=who), approvers, needed
    )


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


def what_matters(action: Action, seen: Mapping[str, object]) -> dict[str, object]:
    """Of `facts_seen`, what must not have changed for `action` to run as approved: all of
    it, but for a cordon the pods on the node, since a cordon moves none (a drain's own
    request compares them)."""
    if action is Action.CORDON:
        return {k: v for k, v in seen.items() if k != "pods"}
    return dict(seen)


def facts_fingerprint(node: NodeFacts) -> str:
    return hashlib.sha256(json.dumps(facts_seen(node), sort_keys=True).encode()).hexdigest()[:16]
