"""The health gate of runbook step 9 — the one gate: `health_gate` is the one call that
answers "may this node go back into service?". The executor asks it before an uncordon (with
the evidence only Prometheus, a pod on the node or a job can give: `bot.gate.gating`), the
rules read its failing items as `node.gate_failures` and `/gpubot status` shows them (with the
facts alone).

Every item is pass, fail or unknown, with its reason; the gate passes only when every required
item passes. "Unknown" is not "pass": a gate that could not look does not open. The items the
Kubernetes facts decide (ready, GPUs allocatable, driver like the pool's, MIG applied, no
driver upgrade under way, GPU Operator pods running, no GPU error alert firing) are what
`node.gate_failures` lists; items that need Prometheus, a pod on the node or an external job
(no new Xid/ECC/NVLink errors in the window, the GPU smoke test, DCGM diagnostics, nccl-tests)
are unknown until that evidence is supplied. The smoke test is optional
(`require_smoke_test`), but one that ran counts whatever was configured: a node whose GPUs
nvidia-smi cannot list does not reopen.

What it must never do: pass on missing evidence, or differ between the places that show it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol

from bot.model import Lang, NodeFacts, PoolFacts
from bot.texts import TEXTS, say

CheckOutcome = Literal["pass", "fail", "unknown"]
"""What one check of the gate saw: not a word of what happened to a request (that is
`bot.model.RequestStatus`), but whether this node passed this item."""
_PRESSURE = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")


@dataclass(frozen=True)
class GateItem:
    name: str
    outcome: CheckOutcome
    reason: str
    """In English, for logs and the rules' facts; a person reads `text(lang)`."""
    required: bool = True
    fact: str | None = None
    """The failing fact in the words of the node's facts (`node.gate_failures`), where they
    say it more exactly than `reason` (the resource name, the count)."""
    key: str = ""
    """The reason's sentence in `bot.texts`, filled in with `values`; none for a reason that
    is the evidence's own words (a smoke test's, an alert's)."""
    values: dict[str, str] = field(default_factory=dict)

    def text(self, lang: Lang) -> str:
        """The reason in `lang`."""
        return item_reason(lang, self.key, self.values, self.reason)

    def line(self, lang: Lang) -> str:
        """ "name: reason" in `lang`."""
        return say(lang, "gate.line", name=item_name(lang, self.name), reason=self.text(lang))

    def as_data(self) -> dict[str, object]:
        """As a timeline entry keeps it, to be rendered later in any language."""
        return {
            "name": self.name,
            "outcome": self.outcome,
            "reason": self.reason,
            "required": self.required,
            "key": self.key,
            "values": dict(self.values),
        }


def item_name(lang: Lang, name: str) -> str:
    """An item's name as a person reads it; an unknown name as itself."""
    key = f"gate.name.{name}"
    return say(lang, key) if key in TEXTS else name


def item_reason(lang: Lang, key: object, values: object, reason: str) -> str:
    """A stored item's reason in `lang` (`GateItem.as_data`): from its key where it has one,
    else the English it was stored with."""
    if isinstance(key, str) and key in TEXTS and isinstance(values, dict):
        return say(lang, key, **values)
    return reason


def failing_text(items: list[GateItem], lang: Lang) -> str:
    """The failing items, "name: reason; …", in `lang`."""
    return say(lang, "gate.separator").join(i.line(lang) for i in items)


def _item(
    name: str,
    outcome: CheckOutcome,
    key: str,
    required: bool = True,
    fact: str | None = None,
    **values: object,
) -> GateItem:
    """An item whose reason is the catalogue's sentence `key` (in English as `reason`)."""
    shown = {k: str(v) for k, v in values.items()}
    return GateItem(name, outcome, say(Lang.EN, key, **shown), required, fact, key, shown)


class SmokeResult(Protocol):
    """What the GPU smoke test saw (`bot.gate.smoke_test.SmokeTest`)."""

    @property
    def outcome(self) -> CheckOutcome: ...
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
        """What keeps the gate shut: required items that did not pass (failed or unknown)."""
        return [i for i in self.items if i.required and i.outcome != "pass"]

    @property
    def failed(self) -> list[GateItem]:
        """Items that looked and saw a failure (not those that could not look)."""
        return [i for i in self.items if i.outcome == "fail"]


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
    """The GPU smoke-test pod's result (`bot.gate.smoke_test.run_smoke_test`)."""
    require_dcgm_diag: bool = False
    require_nccl_tests: bool = False
    require_smoke_test: bool = False


def _ready(node: NodeFacts) -> GateItem:
    pressure = [c for c in _PRESSURE if node.conditions.get(c) == "True"]
    if node.ready != "True":
        return _item("node-ready", "fail", "gate.not_ready", ready=node.ready or "unknown")
    if pressure:
        return _item("node-ready", "fail", "gate.pressure", pressure=", ".join(pressure))
    return _item("node-ready", "pass", "gate.ready")


def _gpus(node: NodeFacts, gpu_resource: str) -> GateItem:
    gpu = node.gpu
    if gpu is None:
        return _item("gpus-allocatable", "unknown", "gate.no_gpu_facts")
    if node.mig_config and node.mig_config != "all-disabled":
        if not gpu.mig_allocatable and gpu.allocatable < gpu.expected:
            return _item("gpus-allocatable", "fail", "gate.mig_nothing", config=node.mig_config)
        return _item("gpus-allocatable", "pass", "gate.mig_offered", config=node.mig_config)
    if gpu.expected == 0:
        return _item("gpus-allocatable", "fail", "gate.no_gpu")
    if gpu.allocatable < gpu.expected:
        return _item(
            "gpus-allocatable",
            "fail",
            "gate.allocatable",
            fact=f"{gpu_resource} allocatable {gpu.allocatable}/{gpu.expected}",
            gpus=gpu.allocatable,
            count=gpu.expected,
        )
    return _item(
        "gpus-allocatable", "pass", "gate.allocatable", gpus=gpu.allocatable, count=gpu.expected
    )


def _driver(node: NodeFacts, pool: PoolFacts | None) -> GateItem:
    if node.driver_version is None:
        return _item("driver-consistent", "unknown", "gate.no_driver")
    if pool is None or not pool.driver_versions:
        return _item("driver-consistent", "pass", "gate.driver", version=node.driver_version)
    common, _ = Counter(pool.driver_versions).most_common(1)[0]
    rolling = any(state != "upgrade-done" for state in pool.upgrade_states)
    if node.driver_version != common and node.upgrade_state == "upgrade-done" and rolling:
        # Ahead of the pool, not adrift: the operator upgraded and validated this node and
        # goes on with the others.
        return _item("driver-consistent", "pass", "gate.driver_ahead", version=node.driver_version)
    if node.driver_version != common:
        return _item(
            "driver-consistent",
            "fail",
            "gate.driver_adrift",
            version=node.driver_version,
            pool=node.pool,
            common=common,
        )
    return _item("driver-consistent", "pass", "gate.driver_as_pool", version=node.driver_version)


def _mig(node: NodeFacts) -> GateItem:
    if not node.mig_config or node.mig_config == "all-disabled":
        return _item("mig-state", "pass", "gate.mig_unused")
    if node.mig_state != "success":
        return _item(
            "mig-state",
            "fail",
            "gate.mig_pending",
            config=node.mig_config,
            state=node.mig_state or "unset",
        )
    return _item("mig-state", "pass", "gate.mig_applied", config=node.mig_config)


def _upgrade(node: NodeFacts) -> GateItem:
    if node.upgrade_state and node.upgrade_state != "upgrade-done":
        return _item("driver-upgrade", "fail", "gate.upgrading", state=node.upgrade_state)
    return _item("driver-upgrade", "pass", "gate.no_upgrade")


def _operator(node: NodeFacts) -> list[GateItem]:
    """One item per GPU component that is failing, or missing where its deploy label wants
    it (a component switched off on purpose is not missing)."""
    wanted = [c for c in node.components.values() if c.deploy_label is not False]
    failing = [
        (
            _item(
                "gpu-operator-pods",
                "fail",
                "gate.component_failing",
                component=c.name,
                why=c.waiting_reason or c.last_reason,
            )
            if c.waiting_reason or c.last_reason
            else _item("gpu-operator-pods", "fail", "gate.component_down", component=c.name)
        )
        for c in wanted
        if c.failing
    ]
    missing = [
        _item("gpu-operator-pods", "fail", "gate.component_missing", component=c.name)
        for c in wanted
        if not c.present and c.deploy_label
    ]
    if failing or missing:
        return failing + missing
    return [_item("gpu-operator-pods", "pass", "gate.operator_runs")]


def _gpu_errors(node: NodeFacts) -> list[GateItem]:
    """Xids and GPU fault alerts firing now, one item each."""
    items = [
        _item("gpu-errors", "fail", "gate.xid_on", code=x.code, gpu=x.gpu)
        if x.gpu
        else _item("gpu-errors", "fail", "gate.xid", code=x.code)
        for x in node.xids
    ]
    items += [GateItem("gpu-errors", "fail", fault) for fault in node.gpu_faults]
    return items or [_item("gpu-errors", "pass", "gate.no_gpu_alert")]


def _external(evidence: ExternalEvidence) -> list[GateItem]:
    items = []
    if evidence.new_gpu_errors is None:
        items.append(_item("no-new-gpu-errors", "unknown", "gate.no_prometheus"))
    elif evidence.new_gpu_errors:
        errors = "; ".join(evidence.new_gpu_errors)
        if evidence.errors_clear_by is not None:
            by = f"{evidence.errors_clear_by.astimezone(UTC):%H:%M:%S}"
            items.append(
                _item("no-new-gpu-errors", "fail", "gate.new_errors_until", errors=errors, by=by)
            )
        else:
            items.append(GateItem("no-new-gpu-errors", "fail", errors))
    else:
        items.append(_item("no-new-gpu-errors", "pass", "gate.no_new_errors"))
    for name, result, required in (
        ("dcgm-diag", evidence.dcgm_diag_passed, evidence.require_dcgm_diag),
        ("nccl-tests", evidence.nccl_tests_passed, evidence.require_nccl_tests),
    ):
        outcome: CheckOutcome = "unknown" if result is None else ("pass" if result else "fail")
        items.append(_item(name, outcome, f"gate.{outcome}", required))
    return items


def _smoke(node: NodeFacts, evidence: ExternalEvidence) -> GateItem:
    """The smoke test's own verdict, then its listing against the node's GPU count (the test
    may have been told a different one). With MIG the count labels count MIG devices under
    GPU Feature Discovery's single strategy, so the physical count is the test's."""
    result = evidence.smoke_test
    if result is None:
        return _item("gpu-smoke-test", "unknown", "gate.not_run", evidence.require_smoke_test)
    if result.outcome != "pass":
        return GateItem("gpu-smoke-test", result.outcome, result.reason)
    mig = bool(node.mig_config and node.mig_config != "all-disabled")
    expected = result.expected if mig or node.gpu is None else node.gpu.expected
    missing = [str(i) for i in range(expected) if i not in result.listed]
    if missing:
        return _item(
            "gpu-smoke-test",
            "fail",
            "gate.smoke_missing",
            listed=len(result.listed),
            count=expected,
            missing=", ".join(missing),
        )
    return GateItem("gpu-smoke-test", "pass", result.reason)


def health_gate(
    node: NodeFacts,
    pools: Mapping[str, PoolFacts],
    evidence: ExternalEvidence | None = None,
    gpu_resource: str = "nvidia.com/gpu",
) -> GateResult:
    """May `node` go back into service? `pools`: the pools' facts (the driver its pool runs).
    With `evidence`, the whole gate the executor enforces; without, what the Kubernetes facts
    and the alerts firing on the node decide alone (what the rules and `/gpubot status` show).
    """
    items = [
        _ready(node),
        _gpus(node, gpu_resource),
        _driver(node, pools.get(node.pool or "")),
        _mig(node),
        _upgrade(node),
        *_operator(node),
        *_gpu_errors(node),
    ]
    if evidence is not None:
        items += _external(evidence)
        items.append(_smoke(node, evidence))
    return GateResult(node.name, items)


def failing_facts_text(node: NodeFacts, pools: Mapping[str, PoolFacts], lang: Lang) -> str:
    """What `gate_failures` lists, as a person reads it in `lang` ("name: reason; …"); empty
    when nothing fails or the node is not a GPU node. `gate_failures` stays in the facts'
    own words: the rules read it."""
    if not node.gpu_node:
        return ""
    return failing_text(health_gate(node, pools).failed, lang)  # the resource names only `fact`


def gate_failures(node: NodeFacts, pools: Mapping[str, PoolFacts], gpu_resource: str) -> list[str]:
    """Why the facts alone keep the gate shut, one reason per failing item (`node.gate_failures`:
    what the rules read); empty for a node that is not a GPU node."""
    if not node.gpu_node:
        return []
    failed = health_gate(node, pools, gpu_resource=gpu_resource).failed
    return [i.fact or i.reason for i in failed]
