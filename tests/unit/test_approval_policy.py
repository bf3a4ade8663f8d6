"""Approval policy: invariants 1 and 2 as decisions, before any store or chat exists."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from bot.approval.policy import (
    Vote,
    approvals_needed,
    decide,
    deny_refusal,
    facts_fingerprint,
    new_request,
)
from bot.config import ActionPolicy, ApprovalPolicy, DenyPolicy
from bot.facts.snapshots import Snapshot
from bot.model import Action, ClusterFacts, Lang
from tests.helpers.paths import NOW

POLICY = ApprovalPolicy(
    cordon=ActionPolicy(groups=["gpu-oncall"]),
    drain=ActionPolicy(groups=["gpu-oncall"], two_person=True),
    uncordon=ActionPolicy(users=["carol"]),
    force=ActionPolicy(users=["dave", "erin"], two_person=True),
)
GROUPS = {"alice": {"gpu-oncall"}, "bob": {"gpu-oncall"}, "mallory": {"interns"}}


def groups_of(user: str) -> set[str]:
    return GROUPS.get(user, set())


@pytest.fixture
def node(edited: Callable[..., Snapshot], facts_of: Callable[..., ClusterFacts]) -> Any:
    return facts_of(edited()).nodes["gpu-a1"]


def test_someone_the_policy_does_not_name_is_refused_with_who_is_needed(node: Any) -> None:
    request = new_request("r1", Action.CORDON, node, "alice", NOW, POLICY)
    decision = decide(request, "mallory", NOW, POLICY, groups_of)
    assert decision.outcome == "not-allowed"
    assert decision.reason == "you are not allowed to approve cordon on gpu-a1 (needs: @gpu-oncall)"


def test_who_may_deny_the_approvers_the_requester_and_the_configured_deny_set(
    node: Any,
) -> None:
    policy = POLICY.model_copy(update={"deny": DenyPolicy(users=["sre-lead"], groups=["sre"])})
    force = new_request("r1", Action.DRAIN, node, "carol", NOW, policy, force=True)

    def groups(user: str) -> set[str]:
        return {"sre"} if user == "in-sre" else groups_of(user)

    for person in ("dave", "carol", "sre-lead", "in-sre"):  # approver, asker, deny set
        assert deny_refusal(force, person, policy, groups, Lang.EN) is None, person
    # On-call may approve a plain drain, not a forced one: they may not deny it either.
    assert deny_refusal(force, "alice", policy, groups_of, Lang.EN) == (
        "you are not allowed to deny drain --force on gpu-a1 (may deny it: dave, erin, @sre, "
        "sre-lead)"
    )
    nobody = ApprovalPolicy()
    cordon = new_request("r2", Action.CORDON, node, "gpubot", NOW, nobody)
    assert deny_refusal(cordon, "alice", nobody, groups_of, Lang.ZH) == (
        "你无权拒绝对 gpu-a1 的 cordon（可以拒绝的人：未配置任何人）"
    )


def test_a_group_member_approves_a_cordon(node: Any) -> None:
    request = new_request("r1", Action.CORDON, node, "carol", NOW, POLICY)
    assert decide(request, "bob", NOW, POLICY, groups_of).outcome == "approved"


def test_the_requester_cannot_approve_their_own_unless_allowed(node: Any) -> None:
    request = new_request("r1", Action.CORDON, node, "alice", NOW, POLICY)
    assert decide(request, "alice", NOW, POLICY, groups_of).outcome == "not-allowed"
    lenient = POLICY.model_copy(
        update={"cordon": ActionPolicy(groups=["gpu-oncall"], allow_self=True)}
    )
    assert decide(request, "alice", NOW, lenient, groups_of).outcome == "approved"


def test_an_expired_request_is_refused(node: Any) -> None:
    request = new_request("r1", Action.CORDON, node, "carol", NOW, POLICY)
    later = NOW + timedelta(seconds=POLICY.expiry_s)
    decision = decide(request, "bob", later, POLICY, groups_of)
    assert decision.outcome == "expired" and "expired" in decision.reason


def test_drain_needs_two_different_approvers(node: Any) -> None:
    request = new_request("r1", Action.DRAIN, node, "carol", NOW, POLICY)
    first = decide(request, "alice", NOW, POLICY, groups_of)
    assert first.outcome == "need-another"
    votes = [Vote(request_id="r1", approver="alice", at=NOW)]
    again = decide(request, "alice", NOW, POLICY, groups_of, votes)
    assert again.outcome == "not-allowed" and "different second approver" in again.reason
    second = decide(request, "bob", NOW, POLICY, groups_of, votes)
    assert second.outcome == "approved" and second.approvers == ["alice", "bob"]


def test_force_has_its_own_approvers(node: Any) -> None:
    request = new_request("r1", Action.DRAIN, node, "carol", NOW, POLICY, force=True)
    decision = decide(request, "alice", NOW, POLICY, groups_of)
    assert decision.outcome == "not-allowed"
    assert (
        decision.reason
        == "you are not allowed to approve drain --force on gpu-a1 (needs: dave, erin)"
    )
    assert decide(request, "dave", NOW, POLICY, groups_of).outcome == "need-another"


def test_uncordon_despite_the_gate_needs_two(node: Any) -> None:
    policy = POLICY.model_copy(
        update={"uncordon_anyway": ActionPolicy(users=["carol", "dave"], two_person=True)}
    )
    request = new_request("r1", Action.UNCORDON, node, "alice", NOW, policy, override_gate=True)
    assert decide(request, "carol", NOW, policy, groups_of).outcome == "need-another"


def test_how_many_approvals_a_request_needs_is_what_its_rule_says_and_decide_asks_that_many(
    node: Any,
) -> None:
    # Every rule the other way round from the defaults: a literal 2 anywhere would show.
    policy = ApprovalPolicy(
        cordon=ActionPolicy(groups=["gpu-oncall"], two_person=True),
        drain=ActionPolicy(groups=["gpu-oncall"]),
        uncordon=ActionPolicy(users=["carol"], two_person=True),
        force=ActionPolicy(users=["dave", "erin"], two_person=True),
        uncordon_anyway=ActionPolicy(users=["carol"]),
    )
    cases = [
        (new_request("c", Action.CORDON, node, "carol", NOW, policy), "alice", 2),
        (new_request("d", Action.DRAIN, node, "carol", NOW, policy), "alice", 1),
        (new_request("f", Action.DRAIN, node, "carol", NOW, policy, force=True), "dave", 2),
        (new_request("u", Action.UNCORDON, node, "alice", NOW, policy), "carol", 2),
        (
            new_request("g", Action.UNCORDON, node, "alice", NOW, policy, override_gate=True),
            "carol",
            1,
        ),
    ]
    for request, approver, needed in cases:
        assert approvals_needed(policy, request) == needed, request.id
        first = decide(request, approver, NOW, policy, groups_of)
        assert first.outcome == ("need-another" if needed == 2 else "approved"), request.id
        assert first.needed == needed, request.id


def test_nobody_may_approve_what_nobody_is_configured_for(node: Any) -> None:
    request = new_request("r1", Action.CORDON, node, "alice", NOW, ApprovalPolicy())
    decision = decide(request, "bob", NOW, ApprovalPolicy(), groups_of)
    assert decision.outcome == "not-allowed" and "nobody is configured" in decision.reason


def test_the_fingerprint_changes_with_what_matters_and_not_with_time(
    edited: Callable[..., Snapshot], facts_of: Callable[..., ClusterFacts]
) -> None:
    base = facts_fingerprint(facts_of(edited()).nodes["gpu-a1"])
    later = facts_of(edited(), None)  # same facts, computed again
    assert facts_fingerprint(later.nodes["gpu-a1"]) == base
    uncordoned_by_hand = facts_of(
        edited({"kind": "Node", "name": "gpu-a1", "merge": {"spec": {"unschedulable": True}}})
    )
    assert facts_fingerprint(uncordoned_by_hand.nodes["gpu-a1"]) != base
    pod_gone = facts_of(
        edited({"kind": "Pod", "namespace": "ml", "name": "train-llm-0-worker-0", "delete": True})
    )
    assert facts_fingerprint(pod_gone.nodes["gpu-a1"]) != base
    recovered = facts_of(
        edited(
            {
                "kind": "Node",
                "name": "gpu-a1",
                "merge": {"status": {"allocatable": {"nvidia.com/gpu": "7"}}},
            }
        )
    )
    assert facts_fingerprint(recovered.nodes["gpu-a1"]) != base


def test_the_decision_says_why_in_the_readers_language(node: Any) -> None:
    request = new_request("r1", Action.DRAIN, node, "carol", NOW, POLICY)
    refused = decide(request, "mallory", NOW, POLICY, groups_of, lang=Lang.ZH)
    assert refused.reason == "你无权批准对 gpu-a1 的 drain（需要：@gpu-oncall）"
    first = decide(request, "alice", NOW, POLICY, groups_of, lang=Lang.ZH)
    assert first.reason == "对 gpu-a1 的 drain 还需要第二位审批人"
    votes = [Vote(request_id="r1", approver="alice", at=NOW)]
    both = decide(request, "bob", NOW, POLICY, groups_of, votes, Lang.ZH)
    assert both.reason == "对 gpu-a1 的 drain 已由 alice、bob 批准"
    english = decide(request, "bob", NOW, POLICY, groups_of, votes)
    assert english.reason == "drain on gpu-a1 approved by alice, bob"
