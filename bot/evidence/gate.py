"""The health gate of runbook step 9 — the one gate: the executor enforces it before an
uncordon, the rules read its failing items as `node.gate_failures`, `/gpubot status` shows it.

Every item is pass, fail or unknown, with its reason; the gate passes only when every required
item passes. "Unknown" is not "pass": a gate that could not look does not open. The items the
Kubernetes facts decide (`facts_items`: ready, GPUs allocatable, driver like the pool's, MIG
applied, no driver upgrade under way, GPU Operator pods running, no GPU error alert firing)
are what `node.gate_failures` lists; items that need Prometheus, a pod on the node or an
external job (no new Xid/ECC/NVLink errors in the window, the GPU smoke test, DCGM
diagnostics, nccl-tests) are unknown until that evidence is supplied. The smoke test is
optional (`require_smoke_test`), but one that ran counts whatever was configured: a node whose
GPUs nvidia-smi cannot list does not reopen.

What it must never do: pass on missing evidence, or differ between the places that show it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from bot.model import ClusterFacts, NodeFacts, PoolFacts

Verdict = Literal["pass", "fail", "unknown"]
_PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


@dataclass(frozen=True)
class GateItem:
    name: str
    outcome: Verdict
    reason: str
    required: bool = True
    fact: str | None = None
    """The failing fact in the words of the node's facts (`node.gate_failures`), where they
    say it more exactly than `reason` (the resource name, the count)."""


class SmokeResult(Protocol):
    """What the GPU smoke test saw (`bot.remediate.smoke_test.SmokeTest`)."""

    @property
    def outcome(self) -> Verdict: ...
    @property
    def reason(self) -> str: ...
    @property
    def listed(self) -> tuple[int, ...]: ...
    @property
    def expected(self) -> int: ...


@dataclass(frozen=True)
class GateResult:
    node: str
    items: list[GateItem] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(item.outcome == "pass" for item in self.items if item.required)

    @property
    def failing(self) -> list[GateItem]:
        return [i for i in self.items if i.required and i.outcome != "pass"]


@dataclass(frozen=True)
class ExternalEvidence:
    """What the Kubernetes API cannot tell; None means nobody looked."""

    new_gpu_errors: list[str] | None = None
    """Xid / ECC / NVLink errors in the observation window (Prometheus)."""
    errors_clear_by: datetime | None = None
    """With errors: when they will have left the window if no new one comes (the gate waits
    on time, and says until when)."""
    dcgm_diag_passed: bool | None = None
    nccl_tests_passed: bool | None = None
    smoke_test: SmokeResult | None = None
    """The GPU smoke-test pod's result (`bot.remediate.smoke_test.run_smoke_test`)."""
    require_dcgm_diag: bool = False
    require_nccl_tests: bool = False
    require_smoke_test: bool = False


def _ready(node: NodeFacts) -> GateItem:
    pressure = [c for c in _PRESSURE if node.conditions.get(c) == "True"]
    if node.ready != "True":
        return GateItem("node-ready", "fail", f"node Ready={node.ready or 'unknown'}")
    if pressure:
        return GateItem("node-ready", "fail", f"Ready, but {', '.join(pressure)}")
    return GateItem("node-ready", "pass", "Ready, no pressure conditions")


def _gpus(node: NodeFacts, gpu_resource: str) -> GateItem:
    gpu = node.gpu
    if gpu is None:
        return GateItem("gpus-allocatable", "unknown", "no GPU facts for the node")
    if node.mig_config and node.mig_config != "all-disabled":
        if not gpu.mig_allocatable and gpu.allocatable < gpu.expected:
            return GateItem(
                "gpus-allocatable", "fail", f"MIG config {node.mig_config} offers nothing"
            )
        return GateItem("gpus-allocatable", "pass", f"MIG layout {node.mig_config} offered")
    if gpu.expected == 0:
        return GateItem("gpus-allocatable", "fail", "the node offers no GPU")
    if gpu.allocatable < gpu.expected:
        return GateItem(
            "gpus-allocatable",
            "fail",
            f"{gpu.allocatable} of {gpu.expected} GPUs allocatable",
            fact=f"{gpu_resource} allocatable {gpu.allocatable}/{gpu.expected}",
        )
    return GateItem(
        "gpus-allocatable", "pass", f"{gpu.allocatable} of {gpu.expected} GPUs allocatable"
    )


def _driver(node: NodeFacts, pool: PoolFacts | None) -> GateItem:
    if node.driver_version is None:
        return GateItem("driver-consistent", "unknown", "no driver version label")
    if pool is None or not pool.driver_versions:
        return GateItem("driver-consistent", "pass", f"driver {node.driver_version}")
    common, _ = Counter(pool.driver_versions).most_common(1)[0]
    rolling = any(state != "upgrade-done" for state in pool.upgrade_states)
    if node.driver_version != common and node.upgrade_state == "upgrade-done" and rolling:
        # Ahead of the pool, not adrift: the operator upgraded and validated this node and
        # goes on with the others.
        return GateItem(
            "driver-consistent",
            "pass",
            f"driver {node.driver_version}: upgraded; the pool's rolling upgrade goes on",
        )
    if node.driver_version != common:
        return GateItem(
            "driver-consistent",
            "fail",
            f"driver {node.driver_version}, pool {node.pool} mostly runs {common}",
        )
    return GateItem("driver-consistent", "pass", f"driver {node.driver_version}, as the pool")


def _mig(node: NodeFacts) -> GateItem:
    if not node.mig_config or node.mig_config == "all-disabled":
        return GateItem("mig-state", "pass", "MIG not used")
    if node.mig_state != "success":
        return GateItem(
            "mig-state",
            "fail",
            f"MIG config {node.mig_config}: nvidia.com/mig.config.state="
            f"{node.mig_state or 'unset'}",
        )
    return GateItem("mig-state", "pass", f"MIG config {node.mig_config} applied")


def _upgrade(node: NodeFacts) -> GateItem:
    if node.upgrade_state and node.upgrade_state != "upgrade-done":
        return GateItem("driver-upgrade", "fail", f"driver upgrade state={node.upgrade_state}")
    return GateItem("driver-upgrade", "pass", "no driver upgrade under way")


def _operator(node: NodeFacts) -> list[GateItem]:
    """One item per GPU component that is failing, or missing where its deploy label wants
    it (a component switched off on purpose is not missing)."""
    wanted = [c for c in node.components.values() if c.deploy_label is not False]
    failing = [
        GateItem(
            "gpu-operator-pods",
            "fail",
            f"{c.name} failing ({c.waiting_reason or c.last_reason or 'not running'})",
        )
        for c in wanted
        if c.failing
    ]
    missing = [
        GateItem("gpu-operator-pods", "fail", f"{c.name} missing (no pod on the node)")
        for c in wanted
        if not c.present and c.deploy_label
    ]
    if failing or missing:
        return failing + missing
    return [GateItem("gpu-operator-pods", "pass", "every GPU Operator pod of the node runs")]


def _gpu_errors(node: NodeFacts) -> list[GateItem]:
    """Xids and GPU fault alerts firing now, one item each."""
    items = [
        GateItem("gpu-errors", "fail", f"Xid {x.code}" + (f" on GPU {x.gpu}" if x.gpu else ""))
        for x in node.xids
    ]
    items += [GateItem("gpu-errors", "fail", fault) for fault in node.gpu_faults]
    return items or [GateItem("gpu-errors", "pass", "no GPU error alert firing")]


def _external(evidence: ExternalEvidence) -> list[GateItem]:
    items = []
    if evidence.new_gpu_errors is None:
        items.append(
            GateItem("no-new-gpu-errors", "unknown", "no Prometheus evidence for the window")
        )
    elif evidence.new_gpu_errors:
        reason = "; ".join(evidence.new_gpu_errors)
        if evidence.errors_clear_by is not None:
            reason += (
                f" (out of the window by {evidence.errors_clear_by.astimezone(UTC):%H:%M:%S} UTC"
                " if no new error comes)"
            )
        items.append(GateItem("no-new-gpu-errors", "fail", reason))
    else:
        items.append(
            GateItem("no-new-gpu-errors", "pass", "no Xid, ECC or NVLink errors in the window")
        )
    for name, result, required in (
        ("dcgm-diag", evidence.dcgm_diag_passed, evidence.require_dcgm_diag),
        ("nccl-tests", evidence.nccl_tests_passed, evidence.require_nccl_tests),
    ):
        outcome: Verdict = "unknown" if result is None else ("pass" if result else "fail")
        reason = {"unknown": "not reported", "pass": "passed", "fail": "failed"}[outcome]
        items.append(GateItem(name, outcome, reason, required))
    return items


def _smoke(node: NodeFacts, evidence: ExternalEvidence) -> GateItem:
    """The smoke test's own verdict, then its listing against the node's GPU count (the test
    may have been told a different one). With MIG the count labels count MIG devices under
    GPU Feature Discovery's single strategy, so the physical count is the test's."""
    result = evidence.smoke_test
    if result is None:
        return GateItem("gpu-smoke-test", "unknown", "not run", evidence.require_smoke_test)
    if result.outcome != "pass":
        return GateItem("gpu-smoke-test", result.outcome, result.reason)
    mig = bool(node.mig_config and node.mig_config != "all-disabled")
    expected = result.expected if mig or node.gpu is None else node.gpu.expected
    missing = [str(i) for i in range(expected) if i not in result.listed]
    if missing:
        return GateItem(
            "gpu-smoke-test",
            "fail",
            f"nvidia-smi -L listed {len(result.listed)} of the node's {expected} GPUs, "
            f"missing GPU {', '.join(missing)}",
        )
    return GateItem("gpu-smoke-test", "pass", result.reason)


def facts_items(node: NodeFacts, pool: PoolFacts | None, gpu_resource: str) -> list[GateItem]:
    """The items the Kubernetes facts (and the alerts firing on the node) decide."""
    return [
        _ready(node),
        _gpus(node, gpu_resource),
        _driver(node, pool),
        _mig(node),
        _upgrade(node),
        *_operator(node),
        *_gpu_errors(node),
    ]


def gate_failures(node: NodeFacts, pool: PoolFacts | None, gpu_resource: str) -> list[str]:
    """Why the facts alone keep the gate shut, one reason per failing item (`node.gate_failures`:
    what the rules read); empty for a node that is not a GPU node."""
    if not node.gpu_node:
        return []
    items = facts_items(node, pool, gpu_resource)
    return [i.fact or i.reason for i in items if i.outcome == "fail"]


def health_gate(
    node: NodeFacts,
    cluster: ClusterFacts,
    evidence: ExternalEvidence,
    gpu_resource: str = "nvidia.com/gpu",
) -> GateResult:
    items = facts_items(node, cluster.pools.get(node.pool or ""), gpu_resource)
    items += _external(evidence)
    items.append(_smoke(node, evidence))
    return GateResult(node.name, items)
