"""Facts of pods: which GPU component a pod is, whether it is failing, what it requests,
and what would stop a drain from evicting it (PDBs, DaemonSets, emptyDir, finalizers...).

Why it exists: a node's story is mostly told by its pods. What it must never do: decide that
something is a symptom (the rules do), or look at a pod's node (nodes.py does).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from bot.config import Settings
from bot.facts.drain_filters import DrainFlags, RefusalKind, Refused, disposition
from bot.facts.snapshots import Index, age_s
from bot.kube_objects import (
    Obj,
    controller_of,
    labels_of,
    meta,
    name_of,
    namespace_of,
    parse_time,
    pod_requests,
    selector_matches,
    spec_of,
    status_of,
)
from bot.model import (
    Blocker,
    BlockerKind,
    PodFacts,
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


# The other names the same components go by, outside the GPU Operator: the standalone device
# plugin (Helm chart `app.kubernetes.io/name`, static manifest `name=nvidia-device-plugin-ds`),
# GKE's own plugin and driver installer (`k8s-app`), OpenShift's per-RHCOS driver DaemonSets
# (`app.kubernetes.io/component=nvidia-driver`), the standalone dcgm-exporter and GFD charts.
COMPONENT_ALIASES = {
    "nvidia-device-plugin": DEVICE_PLUGIN,
    "nvidia-device-plugin-ds": DEVICE_PLUGIN,
    "nvidia-gpu-device-plugin": DEVICE_PLUGIN,
    "nvidia-driver": "nvidia-driver-daemonset",
    "nvidia-driver-installer": "nvidia-driver-daemonset",
    "nvidia-vgpu-manager-daemonset": "nvidia-driver-daemonset",
    "nvidia-container-toolkit": "nvidia-container-toolkit-daemonset",
    "dcgm-exporter": "nvidia-dcgm-exporter",
}
_LABELS = ("app", "app.kubernetes.io/name", "app.kubernetes.io/component", "k8s-app", "name")


FAILING_WAIT_REASONS = {
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "InvalidImageName",
}


# What a pod (its status, its containers, its events) says about the GPUs of its node, in the
# words kubelet, the device plugin, NVML and the CUDA runtime use. First match wins.
GPU_ERRORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("gpu-lost", re.compile(r"GPU is lost|fallen off the bus", re.I)),
    ("devices-unhealthy", re.compile(r"devices? (?:are|is) unhealthy|unhealthy devices", re.I)),
    (
        "devices-unavailable",
        re.compile(r"requested number of devices unavailable|Requested: ?\d+, Available: ?\d+"),
    ),
    (
        "system-not-ready",
        re.compile(r"system not yet initiali[sz]ed|cudaErrorSystemNotReady", re.I),
    ),
    ("no-nvidia-runtime", re.compile(r'no runtime for "?nvidia"? is configured', re.I)),
    (
        "driver-in-use",
        re.compile(r"Could not unload NVIDIA driver kernel modules, driver is in use", re.I),
    ),
    (
        "nvml-failed",
        re.compile(
            r"Failed to initiali[sz]e NVML|could not load NVML library|"
            r"Driver/library version mismatch|NVML: Unknown Error",
            re.I,
        ),
    ),
)


def _component_name(name: str | None) -> str | None:
    if not name:
        return None
    if name in COMPONENT_DEPLOY_LABELS:
        return name
    return COMPONENT_ALIASES.get(name)


def component_of(pod: Obj) -> str | None:
    """Which GPU software component the pod is, by what it is and not where it lives: its
    labels, else the DaemonSet that owns it (OpenShift's `nvidia-driver-daemonset-<rhcos>`,
    a Helm release's `<release>-nvidia-device-plugin`)."""
    return _component(labels_of(pod), controller_of(pod))


def _component(labels: Mapping[str, str], owner: tuple[str, str] | None) -> str | None:
    for key in _LABELS:
        found = _component_name(labels.get(key))
        if found:
            return found
    if owner is None or owner[0] != "DaemonSet":
        return None
    daemonset = owner[1]
    for name in (*COMPONENT_DEPLOY_LABELS, *COMPONENT_ALIASES):
        if daemonset == name or daemonset.startswith(name + "-") or daemonset.endswith("-" + name):
            return _component_name(name)
    return None


def by_gpu_operator(pod: Obj) -> bool:
    """A pod of the GPU Operator's own DaemonSets (their `app` label is the DaemonSet's name)."""
    return _by_gpu_operator(labels_of(pod))


def _by_gpu_operator(labels: Mapping[str, str]) -> bool:
    app = labels.get("app", "")
    return app in COMPONENT_DEPLOY_LABELS or app.startswith("nvidia-driver-daemonset-")


def _messages(status: Mapping[str, Any], statuses: list[Obj], events: list[Obj]) -> list[str]:
    found = [str(status.get("message") or "")]
    for container in statuses:
        for part in ("state", "lastState"):
            state = container.get(part) or {}
            for phase in ("waiting", "terminated"):
                if isinstance(state.get(phase), Mapping):
                    found.append(str(state[phase].get("message") or ""))
    found += [str(e.get("message") or "") for e in events]
    return [m.strip() for m in found if m.strip()]


def gpu_error(messages: list[str]) -> tuple[str, str] | None:
    """(kind, the message that says it) for the first GPU failure the messages name."""
    for kind, pattern in GPU_ERRORS:
        for message in messages:
            found = pattern.search(message)
            if found:
                # A log tail holds many lines: the one that says it is the one to show.
                start = message.rfind("\n", 0, found.start()) + 1
                end = message.find("\n", found.end())
                line = message[start : None if end < 0 else end].strip()
                return kind, line[:300]
    return None


def _container_statuses(status: Mapping[str, Any]) -> list[Obj]:
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def pod_facts(
    pod: Obj, now: datetime, settings: Settings, events: list[Obj] | None = None
) -> PodFacts:
    """`events`: the pod's own events (what kubelet said about its sandbox, its admission)."""
    # Each part is read once: 100,000 pods of a fleet make this the costliest function of
    # a diagnosis.
    metadata = meta(pod)
    spec = spec_of(pod)
    status = status_of(pod)
    statuses = _container_statuses(status)
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
    annotations = metadata.get("annotations") or {}
    gpu = gpu_error(_messages(status, statuses, events or []))
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    # A pod that cannot even get a sandbox waits in ContainerCreating without a failing
    # reason: when its messages name a GPU cause, it is failing all the same.
    failing = (
        phase == "Failed"
        or waiting in FAILING_WAIT_REASONS
        or (gpu is not None and phase != "Succeeded" and not ready)
    )
    terminating = metadata.get("deletionTimestamp") is not None
    finalizers = [str(f) for f in metadata.get("finalizers") or []]
    daemonset = bool(controller and controller[0] == "DaemonSet")
    mirror = "kubernetes.io/config.mirror" in annotations
    finished = phase in ("Succeeded", "Failed")
    labels = labels_of(pod)
    return PodFacts(
        name=str(metadata.get("name", "")),
        namespace=str(metadata.get("namespace", "")),
        phase=phase,
        owner_kind=controller[0] if controller else None,
        owner_name=controller[1] if controller else None,
        component=_component(labels, controller),
        by_gpu_operator=_by_gpu_operator(labels),
        reason=str(status["reason"]) if status.get("reason") else None,
        message=str(status["message"]).strip()[:300] if status.get("message") else None,
        gpu_error=gpu[0] if gpu else None,
        gpu_error_text=gpu[1] if gpu else None,
        gpu_request=pod_requests(pod).get(settings.gpu_resource, 0),
        restarts=restarts,
        waiting_reason=waiting,
        failing_container=str(troubled["name"]) if troubled and troubled.get("name") else None,
        last_exit_code=int(last["exitCode"]) if "exitCode" in last else None,
        last_reason=last.get("reason"),
        last_message=(str(last["message"]).strip()[:300] or None) if last.get("message") else None,
        last_restart_s=age_s(now, parse_time(last.get("finishedAt"))),
        failing=failing,
        terminating=terminating,
        finalizers=finalizers,
        grace_period_s=_grace_period(spec),
        emptydir=any("emptyDir" in (v or {}) for v in spec.get("volumes") or []),
        mirror=mirror,
        daemonset=daemonset,
        age_s=age_s(now, parse_time(metadata.get("creationTimestamp"))) or 0,
        must_leave=not daemonset
        and not mirror
        and (not finished or (terminating and bool(finalizers))),
    )


def _grace_period(spec: Mapping[str, Any]) -> int:
    value = spec.get("terminationGracePeriodSeconds")
    return 30 if value is None else int(value)  # 0 is a real answer: kill at once


def _blocking_pdbs(pod: Obj, index: Index) -> list[Obj]:
    # The Eviction API checks PDBs only for Running pods; others are evicted regardless.
    if status_of(pod).get("phase") != "Running":
        return []
    labels = labels_of(pod)
    return [
        pdb
        for pdb in index.pdb_candidates(namespace_of(pod), labels)
        if selector_matches(spec_of(pdb).get("selector"), labels)
        and int(status_of(pdb).get("disruptionsAllowed") or 0) <= 0
    ]


_REFUSED_BECAUSE: dict[RefusalKind, str] = {
    "emptydir": "uses emptyDir: its local data is lost on eviction",
    "no-controller": "no controller: nothing recreates it after eviction",
    "daemonset-missing": "its DaemonSet is gone: nothing recreates it after eviction",
    "daemonset": "managed by a DaemonSet",
}
"""What each refusal of the drain means for the pod, as the proposal says it."""


def drain_blockers(
    node_pods: list[tuple[Obj, PodFacts]], index: Index, now: datetime, settings: Settings
) -> list[Blocker]:
    """What stands in the way of a drain of the node, pod by pod. The refusals are the
    drain's own (`bot.facts.drain_filters`, under the flags gpubot's drain is proposed with),
    so the proposal names exactly the pods the drain would refuse."""
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
        refused = disposition(pod, DrainFlags(), index.daemonset_exists).refusals
        blockers.extend(
            Blocker(
                kind=kind,
                pod=facts.name,
                namespace=facts.namespace,
                detail=detail,
                bypass_flag=flag,
            )
            for kind, detail, flag in _pod_blocks(pod, facts, index, now, settings, refused)
        )
    return blockers


def _pod_blocks(
    pod: Obj,
    facts: PodFacts,
    index: Index,
    now: datetime,
    settings: Settings,
    refused: tuple[Refused, ...],
) -> list[tuple[BlockerKind, str, str | None]]:
    """(kind, detail, kubectl flag that gets past it) for each thing holding this pod:
    `refused`, the drain's refusals of it, and for a pod the drain must see gone what keeps
    it (a budget, a finalizer, a long grace period)."""
    blocks: list[tuple[BlockerKind, str, str | None]] = []
    # A pod already being deleted no longer needs an eviction: its PDB is not in the way.
    leaving = facts.must_leave
    for pdb in [] if facts.terminating or not leaving else _blocking_pdbs(pod, index):
        status = pdb.get("status") or {}
        detail = (
            f"PDB {name_of(pdb)} (disruptionsAllowed={int(status.get('disruptionsAllowed') or 0)}"
            f", currentHealthy={status.get('currentHealthy', '?')}"
            f", desiredHealthy={status.get('desiredHealthy', '?')})"
        )
        blocks.append(("pdb", detail, None))
    blocks += [(r.kind, _REFUSED_BECAUSE[r.kind], r.flag) for r in refused]
    if not leaving:
        return blocks
    deleted_at = parse_time(meta(pod).get("deletionTimestamp"))
    if facts.terminating and facts.finalizers:
        detail = f"Terminating (phase {facts.phase}), held by finalizers " + ", ".join(
            facts.finalizers
        )
        blocks.append(("finalizer", detail, None))
    elif facts.terminating and deleted_at is not None and deleted_at < now:
        # deletionTimestamp is when the grace period ends: past it, the kubelet is not acting.
        detail = f"Terminating for {age_s(now, deleted_at)}s past its grace period"
        blocks.append(("terminating", detail, None))
    if facts.grace_period_s > settings.thresholds.long_grace_s:
        blocks.append(("long-grace", f"terminationGracePeriodSeconds={facts.grace_period_s}", None))
    return blocks
