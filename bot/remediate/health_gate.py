"""The health gate of runbook step 9, as a checklist computed from evidence.

Every item is pass, fail or unknown, with its reason; the gate passes only when every
required item passes. "Unknown" is not "pass": a gate that could not look does not open.
Items that need Prometheus, a pod on the node or an external job (no new Xid/ECC/NVLink errors
in the window, the GPU smoke test, DCGM diagnostics, nccl-tests) are unknown until that
evidence is supplied. The smoke test is optional (`require_smoke_test`), but one that ran
counts whatever was configured: a node whose GPUs nvidia-smi cannot list does not reopen.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from bot.model import ClusterFacts, NodeFacts

if TYPE_CHECKING:  # smoke_test imports this module's Outcome
    from bot.remediate.smoke_test import SmokeTest

Outcome = Literal["pass", "fail", "unknown"]
_PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


@dataclass(frozen=True)
class GateItem:
    name: str
    outcome: Outcome
    reason: str
    required: bool = True


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
    dcgm_diag_passed: bool | None = None
    nccl_tests_passed: bool | None = None
    smoke_test: SmokeTest | None = None
    """The GPU smoke-test pod's result (`bot.remediate.smoke_test.run_smoke_test`)."""
    require_dcgm_diag: bool = False
    require_nccl_tests: bool = False
    require_smoke_test: bool = False


def _ready(node: NodeFacts) -> GateItem:
    pressure = [c for c in _PRESSURE if node.conditions.get(c) == "True"]
    if node.ready != "True":
        return GateItem("node-ready", "fail", f"Ready={node.ready or 'unknown'}")
    if pressure:
        return GateItem("node-ready", "fail", f"Ready, but {', '.join(pressure)}")
    return GateItem("node-ready", "pass", "Ready, no pressure conditions")


def _gpus(node: NodeFacts) -> GateItem:
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
            "gpus-allocatable", "fail", f"{gpu.allocatable} of {gpu.expected} GPUs allocatable"
        )
    return GateItem(
        "gpus-allocatable", "pass", f"{gpu.allocatable} of {gpu.expected} GPUs allocatable"
    )


def _driver(node: NodeFacts, cluster: ClusterFacts) -> GateItem:
    pool = cluster.pools.get(node.pool or "")
    if node.driver_version is None:
        return GateItem("driver-consistent", "unknown", "no driver version label")
    if pool is None or not pool.driver_versions:
        return GateItem("driver-consistent", "pass", f"driver {node.driver_version}")
    common, _ = Counter(pool.driver_versions).most_common(1)[0]
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
            "mig-state", "fail", f"nvidia.com/mig.config.state={node.mig_state or 'unset'}"
        )
    return GateItem("mig-state", "pass", f"MIG config {node.mig_config} applied")


def _operator(node: NodeFacts) -> GateItem:
    wanted = [c for c in node.components.values() if c.deploy_label is not False]
    failing = [c.name for c in wanted if c.failing]
    missing = [c.name for c in wanted if not c.present and c.deploy_label]
    if failing or missing:
        parts = [f"failing: {', '.join(failing)}"] if failing else []
        parts += [f"missing: {', '.join(missing)}"] if missing else []
        return GateItem("gpu-operator-pods", "fail", "; ".join(parts))
    return GateItem("gpu-operator-pods", "pass", "every GPU Operator pod of the node runs")


def _external(evidence: ExternalEvidence) -> list[GateItem]:
    items = []
    if evidence.new_gpu_errors is None:
        items.append(
            GateItem("no-new-gpu-errors", "unknown", "no Prometheus evidence for the window")
        )
    elif evidence.new_gpu_errors:
        items.append(GateItem("no-new-gpu-errors", "fail", "; ".join(evidence.new_gpu_errors)))
    else:
        items.append(
            GateItem("no-new-gpu-errors", "pass", "no Xid, ECC or NVLink errors in the window")
        )
    for name, result, required in (
        ("dcgm-diag", evidence.dcgm_diag_passed, evidence.require_dcgm_diag),
        ("nccl-tests", evidence.nccl_tests_passed, evidence.require_nccl_tests),
    ):
        outcome: Outcome = "unknown" if result is None else ("pass" if result else "fail")
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


def health_gate(node: NodeFacts, cluster: ClusterFacts, evidence: ExternalEvidence) -> GateResult:
    items = [_ready(node), _gpus(node), _driver(node, cluster), _mig(node), _operator(node)]
    items += _external(evidence)
    items.append(_smoke(node, evidence))
    return GateResult(node.name, items)
