"""Faults of a whole node, as the kubelet, the node lifecycle controller and mig-manager show
them.

A reboot (a new boot id, every container restarted, MIG instances lost unless mig-manager
re-applies them), a kubelet that stopped posting status (conditions Unknown with
`NodeStatusUnknown`, the `node.kubernetes.io/unreachable` taints, pods marked not ready), and a
MIG reconfiguration that failed (`nvidia.com/mig.config.state=failed`). Each writes what those
components would write, with their events. It must never touch a GPU's own counters beyond
what a reboot resets, nor `spec.unschedulable`: a cordon is a person's decision.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from bot.kube_objects import (
    labels_of,
    meta,
    name_of,
    namespace_of,
    pod_finished,
    pod_ready,
    pod_requests,
    spec_of,
    status_of,
)
from gpusim.faulting import (
    FaultError,
    FaultResult,
    Target,
    container_id,
    get_node,
    nothing_to_repair,
    patch_object,
    pods_on,
    require_gpu_node,
)
from gpusim.hardware import (
    forget,
    gpu_state,
    recall,
    remember,
    reset_gpu,
)
from gpusim.objects import (
    GPU_RESOURCE,
    KUBELET_CONDITIONS,
    MIG_RESOURCE_PREFIX,
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    Json,
    ts,
)
from gpusim.recording import node_status_event, record_event
from gpusim.resources import BY_KIND
from gpusim.state import ClusterState

_REBOOT_DOWNTIME = timedelta(minutes=3)


def mig_failed(t: Target, config: str | None = None) -> FaultResult:
    require_gpu_node(t.node, "mig-failed")
    labels = labels_of(t.node)
    if labels.get("nvidia.com/mig.capable") == "false":
        raise FaultError(f'mig-failed: node "{t.name}" is not MIG capable')
    if config is not None and (not isinstance(config, str) or not config):
        raise FaultError(f"mig-failed: config must be a MIG profile name, not {config!r}")
    wanted: Json = {"nvidia.com/mig.config.state": "failed"}
    if config:
        wanted["nvidia.com/mig.config"] = config
    remember(t.store, t.name, "mig-failed", {"config": labels.get("nvidia.com/mig.config")})
    patch_object(t.store, "Node", "", t.name, {"metadata": {"labels": wanted}})
    profile = config or labels.get("nvidia.com/mig.config", "")
    return FaultResult(
        "mig-failed",
        t.name,
        [f"{t.name}: mig-manager failed to apply {profile}: nvidia.com/mig.config.state=failed"],
    )


def reboot(t: Target, reapply_mig: bool = False, boot_id: str | None = None) -> FaultResult:
    if not isinstance(reapply_mig, bool):
        raise FaultError(f"reboot: reapply_mig must be true or false, not {reapply_mig!r}")
    if boot_id is not None and (not isinstance(boot_id, str) or not boot_id):
        raise FaultError(f"reboot: boot_id must be a non-empty string, not {boot_id!r}")
    new_boot = boot_id or str(uuid.uuid4())
    old_boot = (status_of(t.node).get("nodeInfo") or {}).get("bootID")
    if new_boot == old_boot:
        raise FaultError(f"reboot: boot id {new_boot} is the current one")
    now, down = t.now, t.now - _REBOOT_DOWNTIME
    labels = labels_of(t.node)
    status = status_of(t.node)
    capacity = dict(status.get("capacity") or {})
    lines = [f"{t.name}: rebooted, bootID {old_boot} -> {new_boot}"]

    # The node controller saw it go away; the kubelet came back with a new boot id.
    record_event(
        t.store,
        t.node,
        "NodeNotReady",
        f"Node {t.name} status is now: NodeNotReady",
        down + timedelta(seconds=40),
        component="node-controller",
    )
    conditions = [
        {"type": kind, "lastHeartbeatTime": ts(now), "lastTransitionTime": ts(now)}
        for kind in KUBELET_CONDITIONS
        if any(c.get("type") == kind for c in status.get("conditions") or [])
    ]
    node_status: Json = {"nodeInfo": {"bootID": new_boot}, "conditions": conditions}

    # MIG instances do not survive a reboot; the kubelet keeps every resource a plugin once
    # registered in capacity at 0 until the plugin registers it again.
    mig_config = labels.get("nvidia.com/mig.config")
    mig_lost = bool(mig_config and mig_config != "all-disabled" and not reapply_mig)
    if mig_lost:
        zeroed = {k: "0" for k in capacity if k.startswith(MIG_RESOURCE_PREFIX)}
        if labels.get("nvidia.com/mig.strategy") == "single":
            zeroed[GPU_RESOURCE] = "0"
        if zeroed:
            remember(
                t.store,
                t.name,
                "reboot",
                {
                    "capacity": {k: capacity[k] for k in zeroed if k in capacity},
                    "allocatable": {
                        k: (status.get("allocatable") or {}).get(k, capacity.get(k, "0"))
                        for k in zeroed
                    },
                },
            )
            node_status["capacity"] = zeroed
            node_status["allocatable"] = dict(zeroed)
            lines.append(
                f"{t.name}: MIG layout {mig_config} lost and not re-applied: "
                + ", ".join(f"{k}=0" for k in sorted(zeroed))
            )
    elif GPU_RESOURCE in capacity:
        # A fresh device plugin finds every GPU healthy again.
        node_status["allocatable"] = {GPU_RESOURCE: capacity[GPU_RESOURCE]}
    patch_object(t.store, "Node", "", t.name, {"status": node_status})
    # The driver loads again (volatile counters at 0), DCGM and nvidia-fabricmanager start anew.
    for gpu in gpu_state(t.store).get(t.name, {}).values():
        reset_gpu(gpu)
        gpu.update(xid=0, fabric_manager="running")

    lines.extend(restart_containers(t.store, t.name, down, now))
    for reason, message, type_ in (
        ("Starting", "Starting kubelet.", "Normal"),
        ("NodeAllocatableEnforced", "Updated Node Allocatable limit across pods", "Normal"),
        ("NodeHasSufficientMemory", None, "Normal"),
        ("NodeHasNoDiskPressure", None, "Normal"),
        ("NodeHasSufficientPID", None, "Normal"),
        ("Rebooted", f"Node {t.name} has been rebooted, boot id: {new_boot}", "Warning"),
        ("NodeReady", None, "Normal"),
    ):
        record_event(
            t.store,
            t.node,
            reason,
            message or f"Node {t.name} status is now: {reason}",
            now,
            component="kubelet",
            host=t.name,
            type_=type_,
        )
    return FaultResult("reboot", t.name, lines)


def restart_containers(store: ClusterState, node: str, down: datetime, now: datetime) -> list[str]:
    """After a reboot every running container is gone: restarted (exit 255, reason Unknown)."""
    restarted = 0
    for pod in pods_on(store, node):
        if meta(pod).get("deletionTimestamp") or pod_finished(pod):
            continue
        status = status_of(pod)
        never = spec_of(pod).get("restartPolicy") == "Never"
        statuses = []
        for old in status.get("containerStatuses") or []:
            running = (old.get("state") or {}).get("running")
            if not running:
                continue
            last = {
                "exitCode": 255,
                "reason": "Unknown",
                "startedAt": running.get("startedAt"),
                "finishedAt": ts(down),
                "containerID": old.get("containerID"),
            }
            entry: Json = {"name": old["name"]}
            if never:
                entry.update(
                    state={"running": None, "terminated": last}, ready=False, started=False
                )
            else:
                entry.update(
                    restartCount=int(old.get("restartCount") or 0) + 1,
                    containerID=container_id(name_of(pod), old["name"], ts(now)),
                    state={"running": {"startedAt": ts(now)}},
                    lastState={"terminated": last},
                )
            statuses.append(entry)
        if not statuses:
            continue
        conditions = [
            {"type": kind, "lastTransitionTime": ts(now)}
            for kind in ("PodReadyToStartContainers", "Ready", "ContainersReady")
            if any(c.get("type") == kind for c in status.get("conditions") or [])
        ]
        body: Json = {"containerStatuses": statuses, "conditions": conditions}
        if never:
            body["phase"] = "Failed"
        patch_object(store, "Pod", namespace_of(pod), name_of(pod), {"status": body})
        restarted += 1
    return [f"{node}: containers of {restarted} pod(s) restarted after the reboot"]


def not_ready(t: Target) -> FaultResult:
    conditions = status_of(t.node).get("conditions") or []
    ready: Json = next((c for c in conditions if c.get("type") == "Ready"), {})
    if ready.get("status") == "Unknown":
        raise FaultError(f'not-ready: node "{t.name}" is already Ready=Unknown')
    now = t.now
    changed = [
        {
            "type": c["type"],
            "status": "Unknown",
            "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.",
            "lastTransitionTime": ts(now),
        }
        for c in conditions
        if c.get("type") in KUBELET_CONDITIONS and c.get("status") != "Unknown"
    ]
    patch_object(t.store, "Node", "", t.name, {"status": {"conditions": changed}})
    record_event(
        t.store,
        t.node,
        "NodeNotReady",
        f"Node {t.name} status is now: NodeNotReady",
        now,
        component="node-controller",
    )
    # SwapNodeControllerTaint: unreachable replaces not-ready, stamped with timeAdded.
    taints = [
        tn
        for tn in spec_of(t.node).get("taints") or []
        if tn.get("key") not in (UNREACHABLE_TAINT, NOT_READY_TAINT)
    ]
    taints += [
        {"key": UNREACHABLE_TAINT, "effect": effect, "timeAdded": ts(now)}
        for effect in ("NoSchedule", "NoExecute")
    ]
    patch_object(t.store, "Node", "", t.name, {"spec": {"taints": taints}})
    marked = 0
    for pod in pods_on(t.store, t.name):
        pod_conditions = status_of(pod).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod_conditions):
            continue
        patched = patch_object(
            t.store,
            "Pod",
            namespace_of(pod),
            name_of(pod),
            {
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "False", "lastTransitionTime": ts(now)}
                    ]
                }
            },
        )
        record_event(
            t.store,
            patched,
            "NodeNotReady",
            "Node is not ready",
            now,
            component="node-controller",
            type_="Warning",
        )
        marked += 1
    return FaultResult(
        "not-ready",
        t.name,
        [
            f"{t.name}: Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)",
            f"{t.name}: taints {UNREACHABLE_TAINT}:NoSchedule and :NoExecute",
            f"{t.name}: {marked} pod(s) marked Ready=False",
        ],
    )


# ---- repairs ---------------------------------------------------------------------------------


def repair_reboot(t: Target) -> FaultResult:
    """A reboot ends with the node back: a new boot id, the containers restarted (both stay:
    they are history). What it can leave broken is a MIG layout mig-manager did not re-apply:
    it applies it again and the device plugin registers the MIG devices it had before."""
    lost = recall(t.store, t.name, "reboot")
    if not lost:
        return nothing_to_repair("reboot", t.name, "the node came back by itself")
    patch_object(t.store, "Node", "", t.name, {"status": lost})
    forget(t.store, t.name, "reboot")
    layout = labels_of(t.node).get("nvidia.com/mig.config", "")
    return FaultResult(
        "reboot",
        t.name,
        [
            f"{t.name}: mig-manager re-applied {layout}: "
            + ", ".join(f"{k}={v}" for k, v in sorted(lost["capacity"].items()))
        ],
    )


def repair_mig_failed(t: Target) -> FaultResult:
    """mig-manager applies a layout after all: the wanted profile goes back to the one the
    node had before the failed change (as a person relabels `nvidia.com/mig.config`; the
    simulator does not model MIG geometries) and `nvidia.com/mig.config.state` reads success."""
    labels = labels_of(t.node)
    if labels.get("nvidia.com/mig.config.state") != "failed":
        return nothing_to_repair("mig-failed", t.name, "nvidia.com/mig.config.state is not failed")
    wanted: Json = {"nvidia.com/mig.config.state": "success"}
    before = recall(t.store, t.name, "mig-failed").get("config")
    if before and before != labels.get("nvidia.com/mig.config"):
        wanted["nvidia.com/mig.config"] = before
    patch_object(t.store, "Node", "", t.name, {"metadata": {"labels": wanted}})
    forget(t.store, t.name, "mig-failed")
    profile = wanted.get("nvidia.com/mig.config") or labels.get("nvidia.com/mig.config", "")
    return FaultResult(
        "mig-failed",
        t.name,
        [f"{t.name}: mig-manager applied {profile}: nvidia.com/mig.config.state=success"],
    )


def repair_not_ready(t: Target) -> FaultResult:
    """The kubelet posts status again: its conditions as a healthy kubelet posts them, the
    node lifecycle controller lifts its not-ready / unreachable taints, and the kubelet
    reports ready again the pods whose containers all are. A cordon (spec.unschedulable and
    its taint) is a person's and stays."""
    conditions = status_of(t.node).get("conditions") or []
    unwell = [
        c
        for c in conditions
        if c.get("type") in KUBELET_CONDITIONS
        and (c.get("status"), c.get("reason")) != KUBELET_CONDITIONS[c["type"]][:2]
    ]
    taints = spec_of(t.node).get("taints") or []
    kept = [tn for tn in taints if tn.get("key") not in (UNREACHABLE_TAINT, NOT_READY_TAINT)]
    if not unwell and len(kept) == len(taints):
        return nothing_to_repair("not-ready", t.name, "the kubelet posts Ready")
    now = ts(t.now)
    posted = [
        {
            "type": c["type"],
            "status": KUBELET_CONDITIONS[c["type"]][0],
            "reason": KUBELET_CONDITIONS[c["type"]][1],
            "message": KUBELET_CONDITIONS[c["type"]][2],
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        for c in unwell
    ]
    patch_object(t.store, "Node", "", t.name, {"status": {"conditions": posted}})
    lines = [
        f"{t.name}: the kubelet posts status again: "
        + ", ".join(f"{c['type']}={c['status']}" for c in posted)
    ]
    if len(kept) != len(taints):
        patch_object(t.store, "Node", "", t.name, {"spec": {"taints": kept or None}})
        lines.append(f"{t.name}: taints {UNREACHABLE_TAINT} / {NOT_READY_TAINT} lifted")
    node_status_event(t.store, get_node(t.store, t.name), "NodeReady", t.now)
    ready = 0
    for pod in pods_on(t.store, t.name):
        statuses = status_of(pod).get("containerStatuses") or []
        if pod_ready(pod) or status_of(pod).get("phase") != "Running" or not statuses:
            continue
        if not all(s.get("ready") for s in statuses):
            continue
        patch_object(
            t.store,
            "Pod",
            namespace_of(pod),
            name_of(pod),
            {
                "status": {
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]
                }
            },
        )
        ready += 1
    lines.append(f"{t.name}: {ready} pod(s) Ready again")
    return FaultResult("not-ready", t.name, lines)


def enable_mig(store: ClusterState, node: str, profile: str = "all-1g.10gb") -> list[str]:
    """Not a fault: what mig-manager leaves on `node` after applying `profile` (seven
    instances per A100 80GB GPU, the mixed strategy), MIG resources instead of whole GPUs.
    The GPU pods there go first, as they would have for the layout to be applied."""
    current = get_node(store, node)
    gpus = int((status_of(current).get("capacity") or {}).get(GPU_RESOURCE, "0"))
    instances = str(7 * gpus)
    resource = MIG_RESOURCE_PREFIX + profile.removeprefix("all-")
    for pod in pods_on(store, node):
        if pod_requests(pod).get(GPU_RESOURCE, 0) > 0:
            store.delete(BY_KIND["Pod"], namespace_of(pod), name_of(pod))
    patch_object(
        store,
        "Node",
        "",
        node,
        {
            "metadata": {
                "labels": {
                    "nvidia.com/mig.strategy": "mixed",
                    "nvidia.com/mig.config": profile,
                    "nvidia.com/mig.config.state": "success",
                }
            },
            "status": {
                "capacity": {GPU_RESOURCE: "0", resource: instances},
                "allocatable": {GPU_RESOURCE: "0", resource: instances},
            },
        },
    )
    return [f"{node}: MIG layout {profile} applied: {resource}={instances}"]
