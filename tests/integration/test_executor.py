"""DESIGN.md's safety invariants at the executor, each its own test: the simulated cluster
through the real kubernetes client, and the real store (SQLite)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bot.acting.cordoning import cordon, take_out
from bot.approval.policy import approvals_needed
from bot.config import SmokeTestSettings
from bot.model import Action, IncidentState, Lang, TimelineEntry
from bot.names import MAINTENANCE_TAINT, NAMESPACE
from gpusim.faults import inject
from gpusim.resources import BY_KIND
from tests.helpers.builders import diagnosis
from tests.helpers.rigs import (
    MERGE,
    Rig,
    make_rig,
)


@pytest.fixture
def rig(sim_cluster: Any, tmp_path: Path) -> Iterator[Rig]:
    made = make_rig(sim_cluster, tmp_path)
    yield made
    made.store.close()


def test_no_action_without_an_approval(rig: Rig) -> None:
    request = rig.request(Action.CORDON)
    outcome = rig.wing.executor.execute(request)
    assert outcome.status == "not-allowed"
    assert not rig.cordoned("gpu-a3")
    assert rig.store.execution(request) is None


def test_no_approval_from_someone_the_policy_does_not_name(rig: Rig) -> None:
    request = rig.request(Action.CORDON)
    outcome = rig.wing.approve(request, "mallory")
    assert outcome.status == "not-allowed"
    assert "needs: @gpu-oncall" in outcome.message
    assert not rig.cordoned("gpu-a3")
    assert rig.store.votes(request) == []
    # A stranger's vote recorded by some other path would still not count.
    assert rig.wing.executor.execute(request).status == "not-allowed"


def test_an_expired_approval_is_refused(rig: Rig) -> None:
    request = rig.request(Action.CORDON)
    rig.clock.now += timedelta(minutes=31)
    outcome = rig.wing.approve(request, "alice")
    assert outcome.status == "expired"
    assert not rig.cordoned("gpu-a3")
    assert rig.store.incident(rig.incident).state is IncidentState.EXPIRED


def test_a_denied_request_cannot_be_approved_afterwards(rig: Rig) -> None:
    request = rig.request(Action.CORDON)
    assert (
        rig.wing.voting.record_denial(request, "bob", "the job finishes in 10 min").status
        == "denied"
    )
    assert rig.store.incident(rig.incident).state is IncidentState.DENIED
    late = rig.wing.approve(request, "alice")
    assert late.status == "not-allowed"
    assert late.message == "bob denied this: the job finishes in 10 min"
    assert not rig.cordoned("gpu-a3")
    assert rig.store.votes(request) == []
    assert rig.wing.executor.execute(request).status == "not-allowed"
    assert rig.wing.executor.execute_approved() == []
    assert rig.wing.voting.record_denial(request, "carol").status == "duplicate"
    assert not rig.cordoned("gpu-a3")


def test_the_answer_to_a_first_vote_of_two_says_how_many_the_policy_asks(rig: Rig) -> None:
    request = rig.request(Action.DRAIN)
    policy = rig.wing.settings.remediation.approvals
    first = rig.wing.approve(request, "alice")
    assert first.status == "need-another"
    assert first.approvals_needed == approvals_needed(policy, rig.store.request(request)) == 2


def test_drain_needs_two_different_approvers(rig: Rig) -> None:
    request = rig.request(Action.DRAIN)
    assert rig.wing.approve(request, "alice").status == "need-another"
    again = rig.wing.approve(request, "alice")
    assert again.status == "not-allowed" and "different second approver" in again.message
    assert rig.server.store.evictions == [] and not rig.cordoned("gpu-a3")
    done = rig.wing.approve(request, "bob")
    assert done.status == "succeeded", done.message
    assert sorted(rig.server.store.evictions) == [
        ("ml", "train-llm-1-worker-0"),
        ("monitoring", "metrics-agent-gpu-a3-0"),
    ]
    assert rig.node("gpu-a3")["metadata"]["annotations"]["gpubot.io/approved-by"] == "alice,bob"


def test_a_double_approval_executes_once(rig: Rig) -> None:
    request = rig.request(Action.DRAIN)
    rig.wing.approve(request, "alice")
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def click(who: str) -> None:
        barrier.wait()
        outcomes.append(rig.wing.approve(request, who).status)

    threads = [threading.Thread(target=click, args=(w,)) for w in ("bob", "carol")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["duplicate", "succeeded"]
    # Each pod evicted once, and a click after the fact changes nothing.
    assert len(rig.server.store.evictions) == 2
    assert rig.wing.approve(request, "bob").status in ("duplicate", "not-allowed")
    assert len(rig.server.store.evictions) == 2


def _a_training_pod_lands_on_gpu_a3(rig: Rig) -> None:
    """ml/late-arrival, a copy of a training worker scheduled onto gpu-a3."""
    pod = rig.server.store.get(BY_KIND["Pod"], "ml", "train-llm-1-worker-0")
    late = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "late-arrival",
            "namespace": "ml",
            "ownerReferences": pod["metadata"]["ownerReferences"],
        },
        "spec": {**pod["spec"], "nodeName": "gpu-a3"},
        "status": pod["status"],
    }
    rig.server.store.create(BY_KIND["Pod"], "ml", late)


def test_facts_changed_between_approval_and_execution_means_no_action(rig: Rig) -> None:
    request = rig.request(Action.DRAIN)
    rig.wing.approve(request, "alice")
    # A new training pod lands on the node between the first and the second approval.
    _a_training_pod_lands_on_gpu_a3(rig)
    outcome = rig.wing.approve(request, "bob")
    assert outcome.status == "changed"
    assert "ml/late-arrival" in outcome.message
    assert rig.server.store.evictions == [] and not rig.cordoned("gpu-a3")
    assert outcome.new_request is not None
    assert rig.store.request(outcome.new_request.id).action is Action.DRAIN
    assert rig.store.incident(rig.incident).state is IncidentState.AWAITING_APPROVAL


def test_a_cordon_sends_no_more_api_requests_than_kubectl_cordon(rig: Rig) -> None:
    """`kubectl cordon` reads the node and patches it: two requests. gpubot's cordon, from
    the deciding approval to the node cordoned, must not cost the API server more, re-check
    and blast radius included."""
    request = rig.request(Action.CORDON)
    before = len(rig.server.audit())
    assert rig.wing.approve(request, "alice").status == "succeeded"
    sent = [str(e) for e in rig.server.audit()[before:]]
    assert rig.cordoned("gpu-a3")
    assert len(sent) <= 2, sent
    assert sum(" patch nodes gpu-a3 " in f"{s} " for s in sent) == 1, sent


def test_a_pod_landing_on_the_node_does_not_make_a_cordon_ask_again(rig: Rig) -> None:
    """A cordon moves no pod: a pod scheduled between the approval and the cordon changes
    nothing the cordon does (a drain's own request compares its pods)."""
    request = rig.request(Action.CORDON)
    _a_training_pod_lands_on_gpu_a3(rig)
    outcome = rig.wing.approve(request, "alice")
    assert outcome.status == "succeeded", outcome.message
    assert rig.cordoned("gpu-a3")
    assert rig.store.incident(rig.incident).state is IncidentState.SUCCEEDED


def test_a_cordon_is_refused_while_another_node_of_the_pool_is_not_ready(rig: Rig) -> None:
    """Not Ready is out of service as much as cordoned is: the pool's budget (one node of
    four) is spent, and the cordon is refused with the node that spent it named."""
    request = rig.request(Action.CORDON)
    rig.server.store.patch(
        BY_KIND["Node"],
        "",
        "gpu-a2",
        MERGE,
        {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}},
    )
    outcome = rig.wing.approve(request, "alice")
    assert outcome.status == "refused"
    assert "blast radius" in outcome.message and "gpu-a2" in outcome.message
    assert not rig.cordoned("gpu-a3")


def test_an_over_budget_drain_is_refused_even_when_approved(rig: Rig) -> None:
    request = rig.request(Action.DRAIN)
    cordon(rig.cluster, "gpu-a1")  # someone else took a node of the pool out by hand
    rig.wing.approve(request, "alice")
    outcome = rig.wing.approve(request, "bob")
    assert outcome.status == "refused"
    assert "blast radius" in outcome.message and "gpu-a1" in outcome.message
    assert rig.server.store.evictions == [] and not rig.cordoned("gpu-a3")


def test_two_cordons_approved_at_the_same_moment_do_not_both_fit_the_budget(rig: Rig) -> None:
    """The pool's budget is one node. Two people approve cordons of two nodes at once (two
    Slack worker threads): each reads the pool before the other cordons, so only a lock
    around "read, check the budget, cordon" keeps the second out."""
    first, second = rig.request(Action.CORDON, "gpu-a1"), rig.request(Action.CORDON, "gpu-a3")
    barrier = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def approve(request: str, who: str) -> None:
        barrier.wait()
        outcomes[request] = rig.wing.approve(request, who).status

    threads = [
        threading.Thread(target=approve, args=(first, "alice")),
        threading.Thread(target=approve, args=(second, "bob")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(outcomes.values()) == ["refused", "succeeded"], outcomes
    assert [rig.cordoned(n) for n in ("gpu-a1", "gpu-a3")].count(True) == 1


def test_no_force_delete_without_a_force_approval(rig: Rig) -> None:
    rig.server.store.patch(
        BY_KIND["PodDisruptionBudget"],
        "ml",
        "train-llm-1-pdb",
        MERGE,
        {"spec": {"minAvailable": 2}},  # two workers: neither may go
    )
    rig.wing.settings.remediation.drain_timeout_s = 2
    plain = rig.request(Action.DRAIN)
    rig.wing.approve(plain, "alice")
    outcome = rig.wing.approve(plain, "bob")
    assert outcome.status == "failed" and "train-llm-1-worker-0" in outcome.message
    assert rig.server.store.direct_deletes == []
    assert ("ml", "train-llm-1-worker-0") not in rig.server.store.evictions

    forced = rig.request(Action.DRAIN, force=True)
    assert rig.wing.approve(forced, "alice").status == "not-allowed"  # on-call ≠ force
    rig.wing.approve(forced, "dave")
    done = rig.wing.approve(forced, "erin")
    assert done.status == "succeeded", done.message
    assert ("ml", "train-llm-1-worker-0") in rig.server.store.direct_deletes


def test_uncordon_is_refused_until_the_gate_passes(rig: Rig) -> None:
    cordon(rig.cluster, "gpu-a3")
    inject(rig.server.store, "zero-capacity", "gpu-a3", datetime.now(UTC))
    request = rig.request(Action.UNCORDON)
    outcome = rig.wing.approve(request, "alice")
    assert outcome.status == "refused" and "health gate" in outcome.message
    assert rig.cordoned("gpu-a3")
    gate = [e for e in rig.store.timeline(rig.incident) if e.kind == "gate"]
    assert gate and gate[-1].data["passed"] is False

    # propose() does not offer a plain uncordon while the gate fails: only "uncordon
    # anyway", which names what failed and needs its own two approvers.
    facts = rig.wing.facts.of_node("gpu-a3")
    [offered] = rig.wing.proposals.propose(rig.incident, _with_proposal(Action.UNCORDON), facts)
    assert offered.action is Action.UNCORDON and offered.override_gate
    assert offered.risk.startswith("The health gate did not pass (")
    assert "gpu" in offered.risk.lower()
    assert rig.wing.approve(offered.id, "dave").status == "need-another"
    assert rig.cordoned("gpu-a3")


def test_uncordon_is_refused_when_the_smoke_test_pod_does_not_pass(
    sim_cluster: Any, tmp_path: Path
) -> None:
    """With remediation.smoke_test on, the gate runs the pod before an approved uncordon;
    here no kubelet runs it (the simulator's controllers are off), so it cannot pass: the node
    stays out, the refusal says why, and the pod is gone."""
    rig = make_rig(sim_cluster, tmp_path, smoke_test=SmokeTestSettings(enabled=True, timeout_s=1))
    cordon(rig.cluster, "gpu-a3")
    request = rig.request(Action.UNCORDON)
    outcome = rig.wing.approve(request, "alice")
    assert outcome.status == "refused", outcome.message
    assert (
        "health gate not passed: gpu-smoke-test: the smoke-test pod did not finish within 1s"
        in outcome.message
    )
    assert rig.cordoned("gpu-a3")
    created = [d for d in rig.server.store.direct_deletes if d[0] == NAMESPACE]
    assert len(created) == 1 and created[0][1].startswith("gpubot-smoke-gpu-a3-")
    pods, _ = rig.server.store.list(BY_KIND["Pod"], NAMESPACE)
    assert pods == []
    rig.store.close()


def test_uncordon_anyway_needs_its_own_two_approvers(rig: Rig) -> None:
    cordon(rig.cluster, "gpu-a3")
    inject(rig.server.store, "zero-capacity", "gpu-a3", datetime.now(UTC))
    request = rig.request(Action.UNCORDON, override_gate=True)
    assert rig.wing.approve(request, "alice").status == "not-allowed"
    assert rig.wing.approve(request, "dave").status == "need-another"
    assert rig.wing.approve(request, "erin").status == "succeeded"
    assert not rig.cordoned("gpu-a3")


def test_dry_run_writes_nothing(sim_cluster: Any, tmp_path: Path) -> None:
    rig = make_rig(sim_cluster, tmp_path, dry_run=True)
    request = rig.request(Action.DRAIN)
    version = rig.server.store.resource_version
    rig.wing.approve(request, "alice")
    outcome = rig.wing.approve(request, "bob")
    assert outcome.status == "dry-run"
    assert "would have run `kubectl drain gpu-a3 --ignore-daemonsets`" in outcome.message
    assert rig.server.store.resource_version == version  # no write reached the API server
    assert rig.server.store.evictions == [] and rig.server.store.direct_deletes == []
    assert rig.store.timeline(rig.incident)[-1].text == outcome.message
    rig.store.close()


def test_a_dry_run_says_what_it_would_have_run_in_chinese_under_zh(
    sim_cluster: Any, tmp_path: Path
) -> None:
    """Under zh the dry-run's result (the outcome, the timeline, the thread) was English."""
    rig = make_rig(sim_cluster, tmp_path, lang=Lang.ZH, dry_run=True)
    request = rig.request(Action.CORDON)
    outcome = rig.wing.approve(request, "alice")
    assert outcome.status == "dry-run"
    assert outcome.message == "演练模式：未执行，实际会运行 `kubectl cordon gpu-a3`"
    assert rig.store.timeline(rig.incident)[-1].text == outcome.message
    assert not rig.cordoned("gpu-a3")
    rig.store.close()


def test_cordon_marks_the_node_and_uncordon_removes_only_our_marks(rig: Rig) -> None:
    rig.server.store.patch(
        BY_KIND["Node"], "", "gpu-a3", MERGE, {"metadata": {"annotations": {"team": "ml"}}}
    )
    assert rig.wing.approve(rig.request(Action.CORDON), "alice").status == "succeeded"
    node = rig.node("gpu-a3")
    assert node["spec"]["unschedulable"] is True
    assert {"key": MAINTENANCE_TAINT, "value": rig.incident, "effect": "NoSchedule"} in node[
        "spec"
    ]["taints"]
    notes = node["metadata"]["annotations"]
    assert notes["gpubot.io/incident"] == rig.incident and notes["gpubot.io/approved-by"] == "alice"

    outcome = rig.wing.approve(rig.request(Action.UNCORDON), "alice")
    assert outcome.status == "succeeded", outcome.message
    node = rig.node("gpu-a3")
    assert not node["spec"].get("unschedulable")
    assert all(t["key"] != MAINTENANCE_TAINT for t in node["spec"].get("taints") or [])
    assert node["metadata"]["annotations"].get("team") == "ml"
    assert not [k for k in node["metadata"]["annotations"] if k.startswith("gpubot.io/")]


def test_a_taint_added_after_the_check_read_the_node_survives_the_cordon(rig: Rig) -> None:
    # The cordon, taint and annotations go in one patch computed from the node the check
    # read: a taint the node controller adds in between must not be overwritten.
    seen = rig.cluster.get("Node", "", "gpu-a3")
    added = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}
    rig.server.store.patch(BY_KIND["Node"], "", "gpu-a3", MERGE, {"spec": {"taints": [added]}})
    ours = {"key": MAINTENANCE_TAINT, "value": "inc-1", "effect": "NoSchedule"}
    change = take_out(rig.cluster, "gpu-a3", seen, ours, {"gpubot.io/incident": "inc-1"})
    assert change.changed
    node = rig.node("gpu-a3")
    assert node["spec"]["unschedulable"] is True
    assert added in node["spec"]["taints"] and ours in node["spec"]["taints"]
    assert node["metadata"]["annotations"]["gpubot.io/incident"] == "inc-1"


def test_a_drain_request_names_the_training_it_would_cost(rig: Rig) -> None:
    request = rig.store.request(rig.request(Action.DRAIN))
    assert request.risk.startswith("1 GPU pod without a checkpoint in the last 30 min")
    assert "ml/train-llm-1-worker-0 (no checkpoint recorded)" in request.risk
    # gpu-a1 runs an even-numbered job, which checkpoints.
    assert rig.store.request(rig.request(Action.DRAIN, node="gpu-a1")).risk == ""


def test_an_execution_cut_short_is_resumed_without_repeating_evictions(rig: Rig) -> None:
    request = rig.request(Action.DRAIN)
    rig.wing.approve(request, "alice")
    rig.store.add_vote(rig.store.votes(request)[0].model_copy(update={"approver": "bob"}))
    # The process passed its checks, began the drain and died: while its heartbeat is
    # fresh it counts as alive and nothing is resumed; once stale, the leader takes over.
    assert rig.store.claim_execution(request, "dead-replica", rig.clock())
    rig.store.mark_acting(request, "dead-replica")
    assert rig.wing.executor.resume() == []
    assert rig.server.store.evictions == []
    rig.clock.now += timedelta(seconds=rig.wing.settings.remediation.execution_stale_s + 1)
    [outcome] = rig.wing.executor.resume()
    assert outcome.status == "succeeded", outcome.message
    assert sorted(rig.server.store.evictions) == [
        ("ml", "train-llm-1-worker-0"),
        ("monitoring", "metrics-agent-gpu-a3-0"),
    ]
    assert rig.wing.executor.resume() == []
    kinds = [e.text for e in rig.store.timeline(rig.incident)]
    assert any(t.startswith("resuming `kubectl drain gpu-a3") for t in kinds)
    taken = rig.store.execution(request)
    assert taken is not None and taken.executor == rig.wing.executor.executor_id


def test_a_cordon_cut_short_right_after_its_patch_ends_with_its_incident_succeeded(
    rig: Rig,
) -> None:
    """The record of the start is written after the node is taken out: a process that died
    in between left the node cordoned, the execution `acting` and the incident approved.
    The leader's resume finishes it, and the incident says it succeeded."""
    request = rig.request(Action.CORDON)
    rig.wing.approve(request, "alice", execute=False)
    assert rig.store.incident(rig.incident).state is IncidentState.APPROVED
    assert rig.store.claim_execution(request, "dead-replica", rig.clock())
    rig.store.mark_acting(request, "dead-replica")
    take_out(rig.cluster, "gpu-a3", rig.node("gpu-a3"), None, {})
    rig.clock.now += timedelta(seconds=rig.wing.settings.remediation.execution_stale_s + 1)
    [outcome] = rig.wing.executor.resume()
    assert outcome.status == "succeeded", outcome.message
    assert rig.cordoned("gpu-a3")
    assert rig.store.incident(rig.incident).state is IncidentState.SUCCEEDED


def test_an_execution_cut_short_before_its_checks_runs_them_again(rig: Rig) -> None:
    """Claimed, then the process died before the facts, budget and gate were checked: the
    new leader must not act on the old claim. It checks again, and here the budget is gone
    (someone cordoned gpu-a1 by hand meanwhile): refused, gpu-a3 untouched."""
    request = rig.request(Action.CORDON)
    rig.wing.approve(request, "alice", execute=False)
    assert rig.store.claim_execution(request, "dead-replica", rig.clock())
    cordon(rig.cluster, "gpu-a1")
    rig.clock.now += timedelta(seconds=rig.wing.settings.remediation.execution_stale_s + 1)
    [outcome] = rig.wing.executor.resume()
    assert outcome.status == "refused", outcome
    assert not rig.cordoned("gpu-a3")
    texts = [e.text for e in rig.store.timeline(rig.incident)]
    assert any("again from its checks: dead-replica stopped before acting" in t for t in texts)


def test_a_denial_is_never_an_orphan_to_resume(rig: Rig) -> None:
    request = rig.request(Action.CORDON)
    rig.wing.voting.record_denial(request, "bob", "not during the training run")
    assert rig.store.unfinished_executions() == []
    rig.clock.now += timedelta(hours=1)
    assert rig.wing.executor.pending() == [] and rig.wing.executor.resume() == []
    assert not rig.cordoned("gpu-a3")


def test_an_action_running_in_this_process_is_not_resumed_beside_itself(rig: Rig) -> None:
    """The leader's periodic resume fires while a drain a click started here is running, its
    heartbeat already looking old: it must leave that drain alone."""
    request = rig.request(Action.DRAIN)
    rig.wing.approve(request, "alice", execute=False)
    rig.store.add_vote(rig.store.votes(request)[0].model_copy(update={"approver": "bob"}))
    stale_s = rig.wing.settings.remediation.execution_stale_s
    resumed: list[object] = []

    def leader_duties_meanwhile(entry: TimelineEntry) -> None:
        if entry.kind == "action-start":
            rig.clock.now += timedelta(seconds=stale_s + 1)
            resumed.extend(rig.wing.executor.resume())

    rig.wing.timeline.notify = leader_duties_meanwhile
    outcome = rig.wing.executor.execute(request)
    assert outcome.status == "succeeded", outcome.message
    assert resumed == []
    evicted = list(rig.server.store.evictions)
    assert len(evicted) == len(set(evicted)) == 2


def _with_proposal(action: Action) -> Any:
    from bot.model import Proposal

    return diagnosis(node="gpu-a3").model_copy(
        update={"proposals": [Proposal(action=action, node="gpu-a3", requires_approval=True)]}
    )


def test_a_drain_taken_over_elsewhere_stops_here_and_leaves_the_result_to_the_new_owner(
    sim_cluster: Any, tmp_path: Path
) -> None:
    """This process looked dead for a while (a long pause, a partition) and another gpubot
    took its drain over. Its next heartbeat finds that out: it sends no further eviction,
    and neither fails the incident nor finishes the execution the new owner is running."""
    rig = make_rig(sim_cluster, tmp_path, execution_stale_s=0.3)  # a heartbeat every 0.1 s
    try:
        inject(rig.server.store, "pdb-block", "gpu-a3", datetime.now(UTC))
        request = rig.request(Action.DRAIN)
        rig.wing.approve(request, "alice", execute=False)
        rig.store.add_vote(rig.store.votes(request)[0].model_copy(update={"approver": "bob"}))

        def taken_over_meanwhile(entry: TimelineEntry) -> None:
            if entry.kind == "action-start":
                far = rig.clock() + timedelta(days=1)
                assert rig.store.take_over_execution(request, "other-replica", rig.clock(), far)

        rig.wing.timeline.notify = taken_over_meanwhile
        started = time.monotonic()
        outcome = rig.wing.executor.execute(request)
        assert outcome.status == "duplicate", outcome.message
        assert "another gpubot took" in outcome.message
        assert time.monotonic() - started < 5  # not until the 10 s drain timeout
        still = rig.store.execution(request)
        assert still is not None
        assert (still.executor, still.finished_at) == ("other-replica", None)
        assert rig.store.incident(rig.incident).state is not IncidentState.FAILED
        kinds = [e.kind for e in rig.store.timeline(rig.incident)]
        assert "action-result" not in kinds
    finally:
        rig.store.close()


def test_a_drain_proposal_says_the_flags_it_will_run_with(rig: Rig) -> None:
    """Issue 19 item 9: the runbook's step says --delete-emptydir-data; the proposal says
    whether this drain uses it, and why, as `command_for` and the drain itself do."""
    plain = rig.request(Action.DRAIN)
    asked = rig.request(Action.DRAIN, "gpu-a1", delete_emptydir_data=True)
    said = {
        e.data["request"]: e.text for e in rig.store.timeline(rig.incident) if e.kind == "proposal"
    }
    assert said[plain].startswith("proposed: kubectl drain gpu-a3 --ignore-daemonsets (")
    assert "no --delete-emptydir-data: a pod with emptyDir data stops the drain" in said[plain]
    assert said[asked].startswith(
        "proposed: kubectl drain gpu-a1 --ignore-daemonsets --delete-emptydir-data ("
    )
    assert "--delete-emptydir-data, as asked" in said[asked]
