"""`gpubot rules lint` beyond the schema: every CEL expression of every rule is evaluated
against reference facts in which every field exists, so a misspelt field (`node.gpu.alocatable`)
is caught at lint time instead of at 3 a.m. on the first node that reaches it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.config import Settings
from bot.errors import RuleError
from bot.model import (
    Blocker,
    ClusterFacts,
    ComponentFacts,
    GpuFacts,
    Lang,
    NodeFacts,
    PendingPod,
    PodFacts,
    PoolFacts,
    SchedulingReason,
    Signal,
    Stage,
    XidFacts,
)
from bot.rules.cel import Activation, EvaluationError, Expression
from bot.rules.contexts import cluster_context, node_context, pool_context
from bot.rules.loading import CompiledRule, RuleSet
from bot.rules.matching import to_blockers, with_variables


def _reference_node() -> NodeFacts:
    pod = PodFacts(
        name="train-0",
        namespace="ml",
        phase="Running",
        owner_kind="Job",
        owner_name="train",
        component="nvidia-device-plugin-daemonset",
        gpu_request=1,
        restarts=1,
        waiting_reason="CrashLoopBackOff",
        failing_container="main",
        last_exit_code=1,
        last_reason="Error",
        last_message="m",
        last_restart_s=1,
        failing=True,
        terminating=False,
        finalizers=[],
        grace_period_s=30,
        emptydir=True,
        mirror=False,
        daemonset=False,
        age_s=60,
        must_leave=True,
    )
    component = ComponentFacts(
        name="nvidia-device-plugin-daemonset",
        pod="p",
        present=True,
        phase="Running",
        failing=True,
        waiting_reason="CrashLoopBackOff",
        failing_container="main",
        last_reason="Error",
        last_restart_s=1,
        restarts=9,
        deploy_label=True,
    )
    return NodeFacts(
        name="ref",
        pool="pool",
        labels={"a": "b"},
        ready="True",
        conditions={"Ready": "True"},
        condition_messages={"Ready": "ok"},
        unschedulable=True,
        taints=["t:NoSchedule"],
        cordoned_for_s=1,
        age_s=1,
        since_reboot_s=1,
        since_uncordon_s=1,
        boot_id="b",
        kubelet_version="v",
        runtime_version="r",
        gpu_node=True,
        gpu=GpuFacts(
            capacity=8,
            allocatable=8,
            count_label=8,
            present_label=True,
            product="p",
            mig_capacity={"nvidia.com/mig-1g.10gb": 1},
            mig_allocatable={"nvidia.com/mig-1g.10gb": 1},
        ),
        driver_version="1",
        upgrade_state="upgrade-done",
        mig_config="all-1g.10gb",
        mig_state="success",
        deploy_labels={"device-plugin": True},
        components={"nvidia-device-plugin-daemonset": component},
        pods=[pod],
        remaining_pods=1,
        blockers=[Blocker(kind="pdb", pod="p", namespace="n", detail="d")],
        pods_after_cordon=["ml/p"],
        xids=[XidFacts(code=79, gpu="0", source="s")],
        gate_failures=["x"],
        events=["Rebooted"],
    )


def reference_context(ruleset: RuleSet, settings: Settings) -> dict[str, Any]:
    """Every variable of every scope at once, built by the same code diagnosis uses."""
    node = _reference_node()
    pool = PoolFacts(
        name="pool",
        nodes=["ref"],
        gpu_pool=True,
        driver_versions={"1": 1},
        upgrade_states={"upgrade-done": 1},
        gpu_present=1,
        deploy_labelled=1,
    )
    pending = PendingPod(
        name="p",
        namespace="n",
        owner="ReplicaSet/r",
        requests={"nvidia.com/gpu": 1},
        pending_s=1,
        reasons=[SchedulingReason(kind="insufficient-gpu", count=1, text="t")],
        message="m",
        unoffered_resources=["nvidia.com/gpus"],
        evicted_from="ref",
    )
    cluster = ClusterFacts(
        observed_at=datetime(2026, 1, 1, tzinfo=UTC),
        nodes={"ref": node},
        pools={"pool": pool},
        pending_pods=[pending],
        offered_resources=["nvidia.com/gpu"],
    )
    alert = Signal(
        source="alertmanager",
        name="GPUXidError",
        node="ref",
        gpu="0",
        labels={"alertname": "GPUXidError", "xid": "79"},
        fingerprint="f",
    )
    return {
        **node_context(
            node, Stage.STEADY, [alert], ruleset.xid_catalog, cluster, settings, Lang.EN, ["r"]
        ),
        **pool_context(pool, {"r": 1}, ["r"], settings),
        **cluster_context(cluster, settings),
    }


def _expressions(rule: CompiledRule) -> list[tuple[str, Expression]]:
    named: list[tuple[str, Expression]] = [("when", rule.when)]
    named += [
        (f"severity_overrides[{i}].when", e) for i, (e, _) in enumerate(rule.severity_overrides)
    ]
    named += [(f"proposals[{i}].when", e) for i, (e, _, _) in enumerate(rule.proposals) if e]
    named += [(f"evidence[{i}]", e) for i, e in enumerate(rule.evidence)]
    if rule.blockers is not None:
        named.append(("blockers", rule.blockers))
    return named


def lint_rules(ruleset: RuleSet, settings: Settings) -> list[RuleError]:
    problems = []
    reference = Activation(reference_context(ruleset, settings))
    for rule in ruleset.rules:
        try:
            activation = with_variables(rule, reference)
        except EvaluationError as exc:
            problems.append(RuleError(rule.where, str(exc), rule.id))
            continue
        for name, expression in _expressions(rule):
            try:
                value = expression.evaluate(activation)
                if expression is rule.blockers:
                    to_blockers(value)
            except EvaluationError as exc:
                problems.append(RuleError(rule.where, f"{name}: {exc}", rule.id))
    return problems
