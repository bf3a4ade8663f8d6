"""The health gate of runbook step 9, as a checklist computed from evidence.

Every item is pass, fail or unknown, with its reason; the gate passes only when every
required item passes. "Unknown" is not "pass": a gate that could not look does not open.
Items that need Prometheus or an external job (no new Xid/ECC/NVLink errors in the window,
DCGM diagnostics, nccl-tests) are unknown until that evidence is supplied.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from bot.model import ClusterFacts, NodeFacts

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
    require_dcgm_diag: bool = False
    require_nccl_tests: bool = False


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


def health_gate(node: NodeFacts, cluster: ClusterFacts, evidence: ExternalEvidence) -> GateResult:
    items = [_ready(node), _gpus(node), _driver(node, cluster), _mig(node), _operator(node)]
    items += _external(evidence)
    return GateResult(node.name, items)
