"""Facts of one node: readiness, GPUs (capacity, allocatable, labels, MIG), the GPU software
components on it, its pods, what blocks a drain, Xids from alerts, and its lifecycle markers
(cordon, reboot, uncordon, driver upgrade and MIG states).

Why it exists: every node rule reads `NodeFacts`. A node only alerts name has facts of its own
(`unknown_node`) and the one line that says it is absent (`absent_line`), its name escaped.
What it must never do: judge (a symptom is the rule files' business), read other nodes (pool
facts are `collecting.py`'s), or show a name from outside unescaped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from bot.config import GpuNodeMarkers, Settings
from bot.facts.pods import COMPONENT_DEPLOY_LABELS, drain_blockers, pod_facts
from bot.facts.snapshots import Index, age_s, latest_event
from bot.kube_objects import (
    Obj,
    controller_of,
    event_time,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_time,
    quantity,
    spec_of,
    status_of,
)
from bot.model import (
    ComponentFacts,
    GpuError,
    GpuFacts,
    Lang,
    NodeFacts,
    PodFacts,
    ReadyStatus,
    Signal,
    XidFacts,
)
from bot.outside_text import kubernetes_name, shown_name
from bot.texts import say

GPU_PRESENT_LABEL = "nvidia.com/gpu.present"


MIG_RESOURCE_PREFIX = "nvidia.com/mig-"


_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


GPU_FAULT_ALERTS = {
    "GPUECCDoubleBitError": "ecc-double-bit",
    "GPURowRemapFailure": "row-remap-failure",
    "GPUNVLinkErrors": "nvlink-errors",
    "GPUFabricManagerDown": "fabric-manager-down",
}


def pool_of(labels: Mapping[str, str], pool_labels: Sequence[str]) -> str | None:
    for key in pool_labels:
        if labels.get(key):
            return labels[key]
    return None


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    key = taint.get("key", "")
    return (
        f"{key}={value}:{taint.get('effect', '')}" if value else f"{key}:{taint.get('effect', '')}"
    )


def _gpu_facts(node: Obj, settings: Settings) -> GpuFacts:
    status = status_of(node)
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    labels = labels_of(node)
    count_label = labels.get("nvidia.com/gpu.count")
    return GpuFacts(
        capacity=quantity(capacity.get(settings.gpu_resource, 0)),
        allocatable=quantity(allocatable.get(settings.gpu_resource, 0)),
        count_label=int(count_label) if count_label and count_label.isdigit() else None,
        present_label=labels.get(GPU_PRESENT_LABEL) == "true",
        product=labels.get("nvidia.com/gpu.product"),
        # The kubelet keeps a resource a plugin once registered at "0" until it registers
        # again (after a reboot that lost the MIG layout): zero means not offered.
        mig_capacity=_offered_mig(capacity),
        mig_allocatable=_offered_mig(allocatable),
    )


def _stack_marker(gpu: GpuFacts, gpu_resource: str) -> str | None:
    """What the GPU stack itself says, when it says anything."""
    if gpu.present_label:
        return f"label {GPU_PRESENT_LABEL}=true"
    if gpu.capacity:
        return f"capacity {gpu_resource}={gpu.capacity}"
    if gpu.count_label:
        return f"label nvidia.com/gpu.count={gpu.count_label}"
    if gpu.mig_capacity:
        return f"MIG resources {', '.join(sorted(gpu.mig_capacity))}"
    if gpu.product:
        return f"label nvidia.com/gpu.product={gpu.product}"
    return None


def _offered_mig(resources: Mapping[str, Any]) -> dict[str, int]:
    counts = {k: quantity(v) for k, v in resources.items() if k.startswith(MIG_RESOURCE_PREFIX)}
    return {k: n for k, n in counts.items() if n > 0}


def _driver_version(labels: Mapping[str, str]) -> str | None:
    full = labels.get("nvidia.com/cuda.driver-version.full")
    if full:
        return full
    parts = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    return ".".join(p for p in parts if p) or None


def gpu_marker(node: Obj, markers: GpuNodeMarkers) -> str | None:
    """What marks the node as a GPU node without its GPU stack's help (the first found)."""
    labels = labels_of(node)
    for key in markers.labels:
        if key.endswith("*"):
            found = sorted(k for k in labels if k.startswith(key[:-1]))
        else:
            found = [key] if key in labels else []
        for label in found:
            if labels[label].lower() not in ("false", "0", ""):
                return f"label {label}={labels[label]}"
    for key in markers.instance_type_labels:
        kind = labels.get(key, "")
        if kind and any(re.search(pattern, kind) for pattern in markers.instance_types):
            return f"instance type {kind} ({key})"
    for taint in spec_of(node).get("taints") or []:
        if isinstance(taint, Mapping) and taint.get("key") in markers.taints:
            return f"taint {_taint_text(taint)}"
    return None


def _pods_marker(pods: list[PodFacts], gpu_resource: str) -> str | None:
    component = next((p for p in pods if p.component), None)
    if component is not None:
        return f"GPU component pod {component.namespace}/{component.name} on it"
    gpu_pod = next((p for p in pods if p.gpu_request > 0), None)
    if gpu_pod is not None:
        return f"pod {gpu_pod.namespace}/{gpu_pod.name} requesting {gpu_resource} on it"
    return None


def _gpu_errors(pods: list[PodFacts]) -> list[GpuError]:
    """What the pods say about the GPUs, at most five of a kind (a thousand pods rejected at
    admission say one thing a thousand times)."""
    errors: list[GpuError] = []
    count: Counter[str] = Counter()
    for pod in pods:
        if pod.gpu_error and pod.gpu_error_text and count[pod.gpu_error] < 5:
            count[pod.gpu_error] += 1
            errors.append(
                GpuError(
                    kind=pod.gpu_error,
                    pod=f"{pod.namespace}/{pod.name}",
                    message=pod.gpu_error_text,
                )
            )
    return errors


def _components(pods: list[PodFacts], deploy: Mapping[str, bool]) -> dict[str, ComponentFacts]:
    by_component: dict[str, PodFacts] = {}
    for candidate in pods:
        if candidate.component and (
            candidate.component not in by_component
            or (candidate.failing and not by_component[candidate.component].failing)
        ):
            # Two pods of one component during a rollout: the failing one is the news.
            by_component[candidate.component] = candidate
    components = {}
    for component, deploy_key in COMPONENT_DEPLOY_LABELS.items():
        pod = by_component.get(component)
        components[component] = ComponentFacts(
            name=component,
            pod=pod.name if pod else None,
            namespace=pod.namespace if pod else None,
            by_gpu_operator=bool(pod and pod.by_gpu_operator),
            gpu_error=pod.gpu_error if pod else None,
            gpu_error_text=pod.gpu_error_text if pod else None,
            present=pod is not None,
            phase=pod.phase if pod else None,
            failing=bool(pod and pod.failing),
            waiting_reason=pod.waiting_reason if pod else None,
            failing_container=pod.failing_container if pod else None,
            last_reason=pod.last_reason if pod else None,
            last_restart_s=pod.last_restart_s if pod else None,
            restarts=pod.restarts if pod else 0,
            deploy_label=deploy.get(deploy_key),
        )
    return components


UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
_UPGRADE_SETTLED = ("upgrade-done", "upgrade-failed")
# k8s-operator-libs (pkg/upgrade/consts.go) stamps when these two waits began, in Unix seconds.
_UPGRADE_START_ANNOTATIONS = (
    "nvidia.com/gpu-driver-upgrade-validation-start-time",
    "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time",
)


def _upgrade_since(node: Obj, driver_pod: Obj | None, index: Index) -> datetime | None:
    """When the driver upgrade the node waits in began, as far as the cluster shows it: the
    operator's own start time, else the first pod of a newer driver DaemonSet revision (the
    rollout had begun by then), else nothing."""
    if labels_of(node).get(UPGRADE_STATE_LABEL, "upgrade-done") in _UPGRADE_SETTLED:
        return None
    annotations = meta(node).get("annotations") or {}
    for key in _UPGRADE_START_ANNOTATIONS:
        value = str(annotations.get(key) or "")
        if value.isdigit():
            return datetime.fromtimestamp(int(value), UTC)
    if driver_pod is None:
        return None
    owner = controller_of(driver_pod)
    revision = labels_of(driver_pod).get("controller-revision-hash")
    created = parse_time(meta(driver_pod).get("creationTimestamp"))
    if owner is None or revision is None or created is None:
        return None
    newer = [
        when
        for pod in index.pods_by_daemonset.get((namespace_of(driver_pod), owner[1]), [])
        if labels_of(pod).get("controller-revision-hash") not in (None, revision)
        and (when := parse_time(meta(pod).get("creationTimestamp"))) is not None
        and when > created
    ]
    return min(newer, default=None)


def firing_for(node: str, signals: list[Signal]) -> list[Signal]:
    return [s for s in signals if s.node == node and s.status == "firing"]


def xids_of(node_signals: list[Signal]) -> list[XidFacts]:
    return [
        XidFacts(
            code=int(s.labels["xid"]),
            gpu=s.gpu,
            source="kernel log" if s.source == "kernel" else f"alert {s.name}",
        )
        for s in node_signals
        if s.name == "GPUXidError" and s.labels.get("xid", "").isdigit()
    ]


def ready_status(value: str) -> ReadyStatus:
    """A node's Ready condition as the facts hold it: True, False or Unknown (absent too)."""
    if value == "True":
        return "True"
    return "False" if value == "False" else "Unknown"


def node_facts(
    node: Obj,
    index: Index,
    signals: list[Signal],
    now: datetime,
    settings: Settings,
    gpu_pools: set[str],
) -> NodeFacts:
    name = name_of(node)
    labels = labels_of(node)
    spec = spec_of(node)
    status = status_of(node)
    conditions = {str(c.get("type")): str(c.get("status")) for c in status.get("conditions") or []}
    messages = {
        str(c.get("type")): str(c.get("message") or "")
        for c in status.get("conditions") or []
        if c.get("message")
    }
    taints = list(spec.get("taints") or [])
    unschedulable = bool(spec.get("unschedulable"))
    events = index.node_events.get(name, [])
    cordoned_at = None
    if unschedulable:
        cordon_taint = next((t for t in taints if t.get("key") == _UNSCHEDULABLE_TAINT), None)
        cordoned_at = parse_time((cordon_taint or {}).get("timeAdded")) or latest_event(
            events, "NodeNotSchedulable"
        )
    uncordoned_at = None if unschedulable else latest_event(events, "NodeSchedulable")
    pool = pool_of(labels, settings.pool_labels)
    gpu = _gpu_facts(node, settings)
    raw_pods = index.pods_by_node.get(name, [])
    pod_pairs = [
        (
            pod,
            pod_facts(pod, now, settings, index.pod_events.get((namespace_of(pod), name_of(pod)))),
        )
        for pod in raw_pods
    ]
    pods = [facts for _, facts in pod_pairs]
    marker = (
        _stack_marker(gpu, settings.gpu_resource)
        or gpu_marker(node, settings.gpu_nodes)
        or _pods_marker(pods, settings.gpu_resource)
        or (f"pool {pool} is a GPU pool" if pool is not None and pool in gpu_pools else None)
    )
    deploy = {
        key.removeprefix("nvidia.com/gpu.deploy."): value == "true"
        for key, value in labels.items()
        if key.startswith("nvidia.com/gpu.deploy.")
    }
    components = _components(pods, deploy)
    node_signals = firing_for(name, signals)
    xids = xids_of(node_signals)
    mig_config = labels.get("nvidia.com/mig.config")
    mig_state = labels.get("nvidia.com/mig.config.state")
    upgrade_state = labels.get(UPGRADE_STATE_LABEL)
    driver = next(
        (pod for pod, facts in pod_pairs if facts.component == "nvidia-driver-daemonset"), None
    )
    ready = conditions.get("Ready", "Unknown")
    evictable = [p for p in pods if p.must_leave]
    cordoned_for = age_s(now, cordoned_at)
    after_cordon = (
        [f"{p.namespace}/{p.name}" for p in evictable if p.age_s < cordoned_for]
        if cordoned_for is not None
        else []
    )
    recent_events = sorted(
        {
            str(e.get("reason"))
            for e in events
            if (t := event_time(e)) is not None and (now - t).total_seconds() < 3600
        }
    )
    return NodeFacts(
        name=name,
        pool=pool,
        labels=labels,
        ready=ready_status(ready),
        conditions=conditions,
        condition_messages=messages,
        unschedulable=unschedulable,
        taints=[_taint_text(t) for t in taints],
        cordoned_for_s=cordoned_for,
        age_s=age_s(now, parse_time(meta(node).get("creationTimestamp"))),
        since_reboot_s=age_s(now, latest_event(events, "Rebooted")),
        since_uncordon_s=age_s(now, uncordoned_at),
        boot_id=(status.get("nodeInfo") or {}).get("bootID"),
        kubelet_version=(status.get("nodeInfo") or {}).get("kubeletVersion"),
        runtime_version=(status.get("nodeInfo") or {}).get("containerRuntimeVersion"),
        gpu_node=marker is not None,
        gpu_marker=marker,
        gpu=gpu,
        driver_version=_driver_version(labels),
        upgrade_state=upgrade_state,
        upgrade_for_s=age_s(now, _upgrade_since(node, driver, index)),
        mig_config=mig_config,
        mig_state=mig_state,
        deploy_labels=deploy,
        components=components,
        pods=pods,
        remaining_pods=len(evictable),
        # Also before a cordon: a drain proposal names what would block it (a budget that
        # allows no disruption) before anyone approves it, not after it stalls.
        blockers=(
            drain_blockers(pod_pairs, index, now, settings)
            if marker is not None or unschedulable
            else []
        ),
        pods_after_cordon=after_cordon,
        xids=xids,
        gpu_errors=_gpu_errors(pods),
        gpu_faults=[GPU_FAULT_ALERTS[s.name] for s in node_signals if s.name in GPU_FAULT_ALERTS],
        events=recent_events,
    )


def unknown_node(name: str, signals: list[Signal]) -> NodeFacts:
    """A node only alerts speak of: no snapshot object, so only what the alerts say."""
    return NodeFacts(name=name, known=False, gpu_node=True, xids=xids_of(firing_for(name, signals)))


def absent_line(name: str, lang: Lang, limit: int | None = None) -> str:
    """A node only alerts name, said to be absent: its name escaped (`gpu-a1\\u200b`, never
    as it renders; at most `limit` characters of it), and marked when no node could have it
    (not a DNS-1123 subdomain)."""
    shown = shown_name(name)
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    line = say(lang, "diagnosis.absent_node", node=shown)
    if not kubernetes_name(name):
        line += say(lang, "diagnosis.not_a_node_name")
    return line
