"""A cluster snapshot (what `kubectl get nodes,pods,events,pdb,ds -A -o json` prints) -> facts.

The same code will read objects from the live API: it only ever sees plain JSON objects,
so anything the API server can return, the snapshot can hold. It computes facts, never
opinions: what counts as a symptom is the rule files' business.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bot.config import Settings
from bot.errors import InputError
from bot.kube.objects import (
    Obj,
    controller_of,
    event_time,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_time,
    pod_requests,
    quantity,
    selector_matches,
    spec_of,
    status_of,
)
from bot.model import (
    Blocker,
    BlockerKind,
    ClusterFacts,
    ComponentFacts,
    GpuFacts,
    NodeFacts,
    PendingPod,
    PodFacts,
    PoolFacts,
    ReadyStatus,
    ReasonKind,
    SchedulingReason,
    Signal,
    XidFacts,
)

# The GPU Operator's DaemonSets (pod label `app`) and the `nvidia.com/gpu.deploy.*` label
# that switches each one on a node.
COMPONENT_DEPLOY_LABELS = {
    "nvidia-driver-daemonset": "driver",
    "nvidia-container-toolkit-daemonset": "container-toolkit",
    "nvidia-device-plugin-daemonset": "device-plugin",
    "gpu-feature-discovery": "gpu-feature-discovery",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-mig-manager": "mig-manager",
    "nvidia-operator-validator": "operator-validator",
}
DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
# The standalone device plugin Helm chart names its pods differently.
_COMPONENT_ALIASES = {"nvidia-device-plugin": DEVICE_PLUGIN}

_FAILING_WAIT_REASONS = {
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "InvalidImageName",
}
_GPU_LABEL = "nvidia.com/gpu.present"
_MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_GPU_FAULT_ALERTS = {
    "GPUECCDoubleBitError": "ecc-double-bit",
    "GPURowRemapFailure": "row-remap-failure",
    "GPUNVLinkErrors": "nvlink-errors",
    "GPUFabricManagerDown": "fabric-manager-down",
}


@dataclass
class Snapshot:
    """The objects of one snapshot, by kind."""

    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    daemonsets: list[Obj] = field(default_factory=list)

    @classmethod
    def from_items(cls, items: Iterable[Obj], where: str = "snapshot") -> Snapshot:
        snapshot = cls()
        buckets = {
            "Node": snapshot.nodes,
            "Pod": snapshot.pods,
            "Event": snapshot.events,
            "PodDisruptionBudget": snapshot.pdbs,
            "DaemonSet": snapshot.daemonsets,
        }
        for index, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InputError(f"{where}: items[{index}]", "expected a Kubernetes object")
            kind = item.get("kind")
            if not isinstance(kind, str):
                raise InputError(f"{where}: items[{index}]", "object has no kind")
            if not name_of(item):
                raise InputError(f"{where}: items[{index}] ({kind})", "metadata.name missing")
            bucket = buckets.get(kind)
            if bucket is not None:
                bucket.append(item)
        return snapshot


def load_snapshot(path: Path) -> Snapshot:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(str(path), exc.strerror or str(exc)) from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}", f"not valid JSON: {exc.msg}") from exc
    return parse_snapshot(raw, str(path))


def parse_snapshot(raw: Any, where: str = "snapshot") -> Snapshot:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("items"), list):
        raise InputError(where, "expected a Kubernetes List (an object with an items array)")
    return Snapshot.from_items(raw["items"], where)


def _age(now: datetime, then: datetime | None) -> int | None:
    return None if then is None else max(0, int((now - then).total_seconds()))


def pool_of(labels: Mapping[str, str], pool_labels: Sequence[str]) -> str | None:
    for key in pool_labels:
        if labels.get(key):
            return labels[key]
    return None


def _component_of(pod: Obj, settings: Settings) -> str | None:
    if namespace_of(pod) not in settings.operator_namespaces:
        return None
    labels = labels_of(pod)
    for candidate in (labels.get("app"), labels.get("app.kubernetes.io/name")):
        if candidate in COMPONENT_DEPLOY_LABELS:
            return candidate
        if candidate in _COMPONENT_ALIASES:
            return _COMPONENT_ALIASES[candidate]
    name = name_of(pod)
    for prefix in (*COMPONENT_DEPLOY_LABELS, *_COMPONENT_ALIASES):
        if name.startswith(prefix + "-"):
            return _COMPONENT_ALIASES.get(prefix, prefix)
    return None


def _container_statuses(pod: Obj) -> list[Obj]:
    status = pod.get("status") or {}
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _pod_facts(pod: Obj, now: datetime, settings: Settings) -> PodFacts:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    statuses = _container_statuses(pod)
    waiting = next(
        (
            s["state"]["waiting"].get("reason")
            for s in statuses
            if isinstance((s.get("state") or {}).get("waiting"), Mapping)
            and s["state"]["waiting"].get("reason")
        ),
        None,
    )
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    troubled = next(
        (
            s
            for s in statuses
            if (s.get("state") or {}).get("waiting")
            or ((s.get("state") or {}).get("terminated") or {}).get("exitCode") not in (None, 0)
        ),
        None,
    ) or next((s for s in statuses if (s.get("lastState") or {}).get("terminated")), None)
    last: Obj = {}
    if troubled is not None:
        state = troubled.get("state") or {}
        last = (troubled.get("lastState") or {}).get("terminated") or state.get("terminated") or {}
    phase = str(status.get("phase") or "Pending")
    controller = controller_of(pod)
    annotations = meta(pod).get("annotations") or {}
    failing = phase == "Failed" or waiting in _FAILING_WAIT_REASONS
    terminating = meta(pod).get("deletionTimestamp") is not None
    finalizers = [str(f) for f in meta(pod).get("finalizers") or []]
    daemonset = bool(controller and controller[0] == "DaemonSet")
    mirror = "kubernetes.io/config.mirror" in annotations
    finished = phase in ("Succeeded", "Failed")
    return PodFacts(
        name=name_of(pod),
        namespace=namespace_of(pod),
        phase=phase,
        owner_kind=controller[0] if controller else None,
        owner_name=controller[1] if controller else None,
        component=_component_of(pod, settings),
        gpu_request=pod_requests(pod).get(settings.gpu_resource, 0),
        restarts=restarts,
        waiting_reason=waiting,
        failing_container=str(troubled["name"]) if troubled and troubled.get("name") else None,
        last_exit_code=int(last["exitCode"]) if "exitCode" in last else None,
        last_reason=last.get("reason"),
        last_message=(str(last["message"]).strip()[:300] or None) if last.get("message") else None,
        last_restart_s=_age(now, parse_time(last.get("finishedAt"))),
        failing=failing,
        terminating=terminating,
        finalizers=finalizers,
        grace_period_s=_grace_period(spec),
        emptydir=any("emptyDir" in (v or {}) for v in spec.get("volumes") or []),
        mirror=mirror,
        daemonset=daemonset,
        age_s=_age(now, parse_time(meta(pod).get("creationTimestamp"))) or 0,
        must_leave=not daemonset
        and not mirror
        and (not finished or (terminating and bool(finalizers))),
    )


def _grace_period(spec: Obj) -> int:
    value = spec.get("terminationGracePeriodSeconds")
    return 30 if value is None else int(value)  # 0 is a real answer: kill at once


def _taint_text(taint: Obj) -> str:
    value = taint.get("value")
    key = taint.get("key", "")
    return (
        f"{key}={value}:{taint.get('effect', '')}" if value else f"{key}:{taint.get('effect', '')}"
    )


@dataclass
class _Index:
    """The snapshot's objects grouped the way the node facts need them."""

    pods_by_node: dict[str, list[Obj]]
    node_events: dict[str, list[Obj]]
    pod_events: dict[tuple[str, str], list[Obj]]
    owner_events: list[Obj]
    kill_events_by_host: dict[str, list[Obj]]
    pdbs_by_namespace: dict[str, list[Obj]]

    @classmethod
    def build(cls, snapshot: Snapshot) -> _Index:
        pods_by_node: dict[str, list[Obj]] = defaultdict(list)
        for pod in snapshot.pods:
            node = spec_of(pod).get("nodeName")
            if node:
                pods_by_node[node].append(pod)
        node_events: dict[str, list[Obj]] = defaultdict(list)
        pod_events: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        owner_events: list[Obj] = []
        kills: dict[str, list[Obj]] = defaultdict(list)
        for event in snapshot.events:
            involved = event.get("involvedObject") or event.get("regarding") or {}
            kind = involved.get("kind")
            if kind == "Node":
                node_events[str(involved.get("name", ""))].append(event)
            elif kind == "Pod":
                key = (str(involved.get("namespace", "")), str(involved.get("name", "")))
                pod_events[key].append(event)
                if event.get("reason") in ("Killing", "Evicted"):
                    source = event.get("source") or {}
                    host = source.get("host") or event.get("reportingInstance")
                    if host:
                        kills[str(host)].append(event)
            elif kind in ("ReplicaSet", "Job", "StatefulSet"):
                owner_events.append(event)
        pdbs: dict[str, list[Obj]] = defaultdict(list)
        for pdb in snapshot.pdbs:
            pdbs[namespace_of(pdb)].append(pdb)
        return cls(pods_by_node, node_events, pod_events, owner_events, kills, pdbs)


def _latest(events: Iterable[Obj], reason: str) -> datetime | None:
    times = [t for e in events if e.get("reason") == reason and (t := event_time(e)) is not None]
    return max(times, default=None)


def _blocking_pdbs(pod: Obj, index: _Index) -> list[Obj]:
    # The Eviction API checks PDBs only for Running pods; others are evicted regardless.
    if status_of(pod).get("phase") != "Running":
        return []
    labels = labels_of(pod)
    return [
        pdb
        for pdb in index.pdbs_by_namespace.get(namespace_of(pod), [])
        if selector_matches(spec_of(pdb).get("selector"), labels)
        and int(status_of(pdb).get("disruptionsAllowed") or 0) <= 0
    ]


def _blockers(
    node_pods: list[tuple[Obj, PodFacts]], index: _Index, now: datetime, settings: Settings
) -> list[Blocker]:
    blockers: list[Blocker] = []
    daemonset_pods = [facts for _, facts in node_pods if facts.daemonset]
    if daemonset_pods:
        names = [p.name for p in daemonset_pods]
        shown = ", ".join(names[:3]) + (" …" if len(names) > 3 else "")
        namespaces = {p.namespace for p in daemonset_pods}
        blockers.append(
            Blocker(
                kind="daemonset",
                pod=shown,
                namespace=namespaces.pop() if len(namespaces) == 1 else "*",
                detail=f"{len(daemonset_pods)} DaemonSet pod(s) stay on the node",
                bypass_flag="--ignore-daemonsets",
            )
        )
    for pod, facts in node_pods:
        if facts.must_leave:
            blockers.extend(
                Blocker(
                    kind=kind,
                    pod=facts.name,
                    namespace=facts.namespace,
                    detail=detail,
                    bypass_flag=flag,
                )
                for kind, detail, flag in _pod_blocks(pod, facts, index, now, settings)
            )
    return blockers


def _pod_blocks(
    pod: Obj, facts: PodFacts, index: _Index, now: datetime, settings: Settings
) -> list[tuple[BlockerKind, str, str | None]]:
    """(kind, detail, kubectl flag that gets past it) for each thing holding this pod."""
    blocks: list[tuple[BlockerKind, str, str | None]] = []
    # A pod already being deleted no longer needs an eviction: its PDB is not in the way.
    for pdb in [] if facts.terminating else _blocking_pdbs(pod, index):
        status = pdb.get("status") or {}
        detail = (
            f"PDB {name_of(pdb)} (disruptionsAllowed={int(status.get('disruptionsAllowed') or 0)}"
            f", currentHealthy={status.get('currentHealthy', '?')}"
            f", desiredHealthy={status.get('desiredHealthy', '?')})"
        )
        blocks.append(("pdb", detail, None))
    if facts.emptydir:
        detail = "uses emptyDir: its local data is lost on eviction"
        blocks.append(("emptydir", detail, "--delete-emptydir-data"))
    if facts.owner_kind is None:
        blocks.append(
            ("no-controller", "no controller: nothing recreates it after eviction", "--force")
        )
    deleted_at = parse_time(meta(pod).get("deletionTimestamp"))
    if facts.terminating and facts.finalizers:
        detail = f"Terminating (phase {facts.phase}), held by finalizers " + ", ".join(
            facts.finalizers
        )
        blocks.append(("finalizer", detail, None))
    elif facts.terminating and deleted_at is not None and deleted_at < now:
        # deletionTimestamp is when the grace period ends: past it, the kubelet is not acting.
        detail = f"Terminating for {_age(now, deleted_at)}s past its grace period"
        blocks.append(("terminating", detail, None))
    if facts.grace_period_s > settings.thresholds.long_grace_s:
        blocks.append(("long-grace", f"terminationGracePeriodSeconds={facts.grace_period_s}", None))
    return blocks


def _gpu_facts(node: Obj, settings: Settings) -> GpuFacts:
    status = node.get("status") or {}
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    labels = labels_of(node)
    count_label = labels.get("nvidia.com/gpu.count")
    return GpuFacts(
        capacity=quantity(capacity.get(settings.gpu_resource, 0)),
        allocatable=quantity(allocatable.get(settings.gpu_resource, 0)),
        count_label=int(count_label) if count_label and count_label.isdigit() else None,
        present_label=labels.get(_GPU_LABEL) == "true",
        product=labels.get("nvidia.com/gpu.product"),
        # The kubelet keeps a resource a plugin once registered at "0" until it registers
        # again (after a reboot that lost the MIG layout): zero means not offered.
        mig_capacity=_offered_mig(capacity),
        mig_allocatable=_offered_mig(allocatable),
    )


def _offered_mig(resources: Mapping[str, Any]) -> dict[str, int]:
    counts = {k: quantity(v) for k, v in resources.items() if k.startswith(_MIG_RESOURCE_PREFIX)}
    return {k: n for k, n in counts.items() if n > 0}


def _driver_version(labels: Mapping[str, str]) -> str | None:
    full = labels.get("nvidia.com/cuda.driver-version.full")
    if full:
        return full
    parts = [labels.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    return ".".join(p for p in parts if p) or None


def _components(pods: list[PodFacts], deploy: Mapping[str, bool]) -> dict[str, ComponentFacts]:
    by_component = {p.component: p for p in pods if p.component}
    components = {}
    for component, deploy_key in COMPONENT_DEPLOY_LABELS.items():
        pod = by_component.get(component)
        components[component] = ComponentFacts(
            name=component,
            pod=pod.name if pod else None,
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


def _gate_failures(
    node_ready: str,
    gpu: GpuFacts,
    gpu_node: bool,
    mig_config: str | None,
    mig_state: str | None,
    upgrade_state: str | None,
    components: Mapping[str, ComponentFacts],
    xids: list[XidFacts],
    node_signals: list[Signal],
    settings: Settings,
) -> list[str]:
    """Runbook step 9: what must hold before a node goes back into service."""
    if not gpu_node:
        return []
    failures = []
    if node_ready != "True":
        failures.append(f"node Ready={node_ready or 'unknown'}")
    if not gpu.mig_capacity and gpu.allocatable < gpu.expected:
        failures.append(f"{settings.gpu_resource} allocatable {gpu.allocatable}/{gpu.expected}")
    if mig_config and mig_state != "success":
        failures.append(f"MIG config {mig_config} state={mig_state or 'unset'}")
    if upgrade_state and upgrade_state != "upgrade-done":
        failures.append(f"driver upgrade state={upgrade_state}")
    failures.extend(
        f"{name} failing ({c.waiting_reason or 'not running'})"
        for name, c in components.items()
        if c.failing
    )
    failures.extend(f"Xid {x.code}" + (f" on GPU {x.gpu}" if x.gpu else "") for x in xids)
    failures.extend(_GPU_FAULT_ALERTS[s.name] for s in node_signals if s.name in _GPU_FAULT_ALERTS)
    return failures


def _firing_for(node: str, signals: list[Signal]) -> list[Signal]:
    return [s for s in signals if s.node == node and s.status == "firing"]


def _xids(node_signals: list[Signal]) -> list[XidFacts]:
    return [
        XidFacts(code=int(s.labels["xid"]), gpu=s.gpu, source=f"alert {s.name}")
        for s in node_signals
        if s.name == "GPUXidError" and s.labels.get("xid", "").isdigit()
    ]


def _ready_status(value: str) -> ReadyStatus:
    if value == "True":
        return "True"
    return "False" if value == "False" else "Unknown"


def _node_facts(
    node: Obj,
    index: _Index,
    signals: list[Signal],
    now: datetime,
    settings: Settings,
    gpu_pools: set[str],
) -> NodeFacts:
    name = name_of(node)
    labels = labels_of(node)
    spec = node.get("spec") or {}
    status = node.get("status") or {}
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
        cordoned_at = parse_time((cordon_taint or {}).get("timeAdded")) or _latest(
            events, "NodeNotSchedulable"
        )
    uncordoned_at = None if unschedulable else _latest(events, "NodeSchedulable")
    pool = pool_of(labels, settings.pool_labels)
    gpu = _gpu_facts(node, settings)
    gpu_node = bool(
        gpu.present_label
        or gpu.capacity
        or gpu.count_label
        or gpu.mig_capacity
        or gpu.product
        or (pool is not None and pool in gpu_pools)
    )
    raw_pods = index.pods_by_node.get(name, [])
    pod_pairs = [(pod, _pod_facts(pod, now, settings)) for pod in raw_pods]
    pods = [facts for _, facts in pod_pairs]
    deploy = {
        key.removeprefix("nvidia.com/gpu.deploy."): value == "true"
        for key, value in labels.items()
        if key.startswith("nvidia.com/gpu.deploy.")
    }
    components = _components(pods, deploy)
    node_signals = _firing_for(name, signals)
    xids = _xids(node_signals)
    mig_config = labels.get("nvidia.com/mig.config")
    mig_state = labels.get("nvidia.com/mig.config.state")
    upgrade_state = labels.get("nvidia.com/gpu-driver-upgrade-state")
    ready = conditions.get("Ready", "Unknown")
    evictable = [p for p in pods if p.must_leave]
    cordoned_for = _age(now, cordoned_at)
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
        ready=_ready_status(ready),
        conditions=conditions,
        condition_messages=messages,
        unschedulable=unschedulable,
        taints=[_taint_text(t) for t in taints],
        cordoned_for_s=cordoned_for,
        age_s=_age(now, parse_time(meta(node).get("creationTimestamp"))),
        since_reboot_s=_age(now, _latest(events, "Rebooted")),
        since_uncordon_s=_age(now, uncordoned_at),
        boot_id=(status.get("nodeInfo") or {}).get("bootID"),
        kubelet_version=(status.get("nodeInfo") or {}).get("kubeletVersion"),
        runtime_version=(status.get("nodeInfo") or {}).get("containerRuntimeVersion"),
        gpu_node=gpu_node,
        gpu=gpu,
        driver_version=_driver_version(labels),
        upgrade_state=upgrade_state,
        mig_config=mig_config,
        mig_state=mig_state,
        deploy_labels=deploy,
        components=components,
        pods=pods,
        remaining_pods=len(evictable),
        blockers=_blockers(pod_pairs, index, now, settings) if unschedulable else [],
        pods_after_cordon=after_cordon,
        xids=xids,
        gate_failures=_gate_failures(
            ready,
            gpu,
            gpu_node,
            mig_config,
            mig_state,
            upgrade_state,
            components,
            xids,
            node_signals,
            settings,
        ),
        events=recent_events,
    )


def _unknown_node(name: str, signals: list[Signal]) -> NodeFacts:
    """A node only alerts speak of: no snapshot object, so only what the alerts say."""
    return NodeFacts(name=name, known=False, gpu_node=True, xids=_xids(_firing_for(name, signals)))


_AVAILABLE = re.compile(r"^\d+/\d+ nodes are available: ")
_COUNTED = re.compile(r"^(\d+) (.*)$")


def split_scheduler_message(message: str) -> list[tuple[int, str]]:
    """`0/12 nodes are available: 4 Insufficient nvidia.com/gpu, 3 node(s) had ...` -> parts.

    Taint texts hold `{key: value}` with commas possible inside braces, so the split is
    brace-aware. The preemption sentence repeats the counts and is dropped.
    """
    body = message.split(" preemption:", 1)[0].strip()
    body = _AVAILABLE.sub("", body).rstrip(".")
    parts: list[str] = []
    depth = 0
    current = ""
    for char in body:
        depth += char == "{"
        depth -= char == "}"
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    counted = []
    for part in parts:
        match = _COUNTED.match(part)
        counted.append((int(match.group(1)), match.group(2)) if match else (0, part))
    return counted


def classify_reason(text: str, offered: set[str], gpu_resource: str) -> ReasonKind:
    if text.startswith("Insufficient "):
        resource = text.removeprefix("Insufficient ").strip()
        if "/" in resource and resource not in offered:
            return "unknown-resource"
        if resource == gpu_resource or resource.startswith(_MIG_RESOURCE_PREFIX):
            return "insufficient-gpu"
        return "insufficient-other"
    if "untolerated taint" in text:
        return "untolerated-taint"
    if "affinity" in text or "selector" in text:
        return "affinity-selector"
    if "were unschedulable" in text:
        return "unschedulable"
    if "quota" in text:
        return "quota"
    return "other"


def _pending_pods(
    snapshot: Snapshot,
    index: _Index,
    offered: set[str],
    nodes: Mapping[str, NodeFacts],
    now: datetime,
    settings: Settings,
) -> list[PendingPod]:
    pending = []
    cordon_times = {
        name: now.timestamp() - facts.cordoned_for_s
        for name, facts in nodes.items()
        if facts.cordoned_for_s is not None
    }
    for pod in snapshot.pods:
        status = pod.get("status") or {}
        if status.get("phase") != "Pending" or spec_of(pod).get("nodeName"):
            continue
        requests = {k: v for k, v in pod_requests(pod).items() if k.startswith("nvidia.com/")}
        if not requests:
            continue
        ns, name = namespace_of(pod), name_of(pod)
        scheduling = [
            e for e in index.pod_events.get((ns, name), []) if e.get("reason") == "FailedScheduling"
        ]
        latest = max(scheduling, key=lambda e: event_time(e) or now, default=None)
        message = str(latest.get("message", "")) if latest else None
        reasons = [
            SchedulingReason(
                kind=classify_reason(text, offered, settings.gpu_resource), count=n, text=text
            )
            for n, text in (split_scheduler_message(message) if message else [])
        ]
        controller = controller_of(pod)
        generate_name = str(meta(pod).get("generateName") or "")
        evicted_from = None
        for host, kills in index.kill_events_by_host.items():
            if host not in cordon_times:
                continue
            for kill in kills:
                killed = str((kill.get("involvedObject") or {}).get("name", ""))
                when = event_time(kill)
                same_owner = killed == name or (generate_name and killed.startswith(generate_name))
                if same_owner and when is not None and when.timestamp() >= cordon_times[host]:
                    evicted_from = host
        pending.append(
            PendingPod(
                name=name,
                namespace=ns,
                owner=f"{controller[0]}/{controller[1]}" if controller else None,
                requests=requests,
                pending_s=_age(now, parse_time(meta(pod).get("creationTimestamp"))) or 0,
                reasons=reasons,
                message=message,
                unoffered_resources=sorted(r for r in requests if r not in offered),
                evicted_from=evicted_from,
            )
        )
    for event in index.owner_events:
        message = str(event.get("message", ""))
        if event.get("reason") != "FailedCreate" or "exceeded quota" not in message:
            continue
        if "nvidia.com/" not in message:
            continue
        involved = event.get("involvedObject") or {}
        # A controller retries for as long as the quota is full: pending since the first try.
        when = parse_time(event.get("firstTimestamp")) or event_time(event)
        pending.append(
            PendingPod(
                name=f"{involved.get('name', '')}-*",
                namespace=str(involved.get("namespace", "")),
                owner=f"{involved.get('kind', '')}/{involved.get('name', '')}",
                requests={},
                pending_s=_age(now, when) or 0,
                reasons=[SchedulingReason(kind="quota", count=0, text=message)],
                message=message,
                unoffered_resources=[],
                evicted_from=None,
            )
        )
    return pending


def resolve_signal_nodes(snapshot: Snapshot, signals: Sequence[Signal]) -> list[Signal]:
    """Alerts that name a node by an address (`instance` = IP) get the node's name."""
    names = {name_of(node) for node in snapshot.nodes}
    by_address = {
        str(address.get("address")): name_of(node)
        for node in snapshot.nodes
        for address in status_of(node).get("addresses") or []
        if isinstance(address, Mapping)
    }
    resolved = []
    for signal in signals:
        if signal.node and signal.node not in names and signal.node in by_address:
            signal = signal.model_copy(update={"node": by_address[signal.node]})
        resolved.append(signal)
    return resolved


def collect_facts(
    snapshot: Snapshot,
    signals: Sequence[Signal],
    settings: Settings,
    now: datetime,
    reuse: Callable[[Obj], NodeFacts | None] | None = None,
) -> ClusterFacts:
    """Everything the rules may ask about, for every node, pool and pending GPU pod.
    `reuse` may answer a node object with facts found earlier, taken as they are (a scoped
    pass has no pods of other nodes to find theirs again)."""
    index = _Index.build(snapshot)
    signal_list = list(signals)
    gpu_pools = {
        pool
        for node in snapshot.nodes
        if (pool := pool_of(labels_of(node), settings.pool_labels))
        and (
            labels_of(node).get(_GPU_LABEL) == "true"
            or quantity((status_of(node).get("capacity") or {}).get(settings.gpu_resource, 0)) > 0
        )
    }
    nodes = {}
    for node in snapshot.nodes:
        name = name_of(node)
        earlier = reuse(node) if reuse is not None else None
        if earlier is not None:
            nodes[name] = earlier
            continue
        try:
            nodes[name] = _node_facts(node, index, signal_list, now, settings, gpu_pools)
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            # Valid JSON, wrong shape (a string where the API has a list...): say where.
            raise InputError(
                f"snapshot: Node {name}",
                f"it or one of its pods/events has an unexpected shape ({exc})",
            ) from exc
    for signal in signal_list:
        if signal.node and signal.node not in nodes:
            nodes[signal.node] = _unknown_node(signal.node, signal_list)
    offered = {
        resource for node in snapshot.nodes for resource in (status_of(node).get("capacity") or {})
    }
    pools: dict[str, list[NodeFacts]] = defaultdict(list)
    for facts in nodes.values():
        if facts.pool:
            pools[facts.pool].append(facts)
    pool_facts = {
        pool: PoolFacts(
            name=pool,
            nodes=sorted(f.name for f in members),
            gpu_pool=pool in gpu_pools,
            driver_versions=dict(Counter(f.driver_version for f in members if f.driver_version)),
            upgrade_states=dict(Counter(f.upgrade_state for f in members if f.upgrade_state)),
            gpu_present=sum(1 for f in members if f.gpu and f.gpu.present_label),
            deploy_labelled=sum(1 for f in members if f.deploy_labels),
        )
        for pool, members in pools.items()
    }
    try:
        pending = _pending_pods(snapshot, index, offered, nodes, now, settings)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        raise InputError("snapshot: pending pods", f"unexpected object shape ({exc})") from exc
    return ClusterFacts(
        observed_at=now,
        nodes=nodes,
        pools=pool_facts,
        pending_pods=pending,
        offered_resources=sorted(offered),
    )
