"""The GPU Operator's driver upgrade, as its upgrade controller (NVIDIA/k8s-operator-libs
`pkg/upgrade`) walks a node through it.

`nvidia.com/gpu-driver-upgrade-state` goes through its states, each change with a Normal
`GPUDriverUpgrade` event "Successfully updated node state label to STATE" from
`nvidia-gpu-operator`; on the way the controller cordons, evicts the GPU pods, restarts the
driver pod from the new template, and GPU Feature Discovery relabels the driver version. The
node goes `upgrade-failed` when the restarted driver pod is not ready with more than 10
restarts. It plays the operator's controller and must never do what that controller would not
(it never drains beyond the GPU pods: the ClusterPolicy's drain is off by default).
"""

from __future__ import annotations

import copy
import re
from datetime import datetime, timedelta
from typing import Any

from bot.kube_objects import (
    labels_of,
    meta,
    name_of,
    namespace_of,
    pod_finished,
    pod_ready,
    pod_requests,
    spec_of,
)
from gpusim.faulting import (
    FaultError,
    FaultResult,
    Target,
    allocatable_gpus,
    cordon,
    get_node,
    is_daemonset_pod,
    make_crashloop,
    nothing_to_repair,
    operator_pod,
    patch_object,
    pods_on,
    register_devices,
    replace_operator_pod,
    require_gpu_node,
    set_allocatable,
    uncordon,
)
from gpusim.hardware import (
    forget,
    hardware,
    recall,
    remember,
)
from gpusim.objects import (
    DRIVER_APP,
    GPU_OPERATOR_NS,
    GPU_RESOURCE,
    Json,
    digest,
    ts,
)
from gpusim.recording import record_event
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState

UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_STATES = (
    "upgrade-required",
    "cordon-required",
    "wait-for-jobs-required",
    "pod-deletion-required",
    "drain-required",
    "pod-restart-required",
    "validation-required",
    "uncordon-required",
    "upgrade-done",
)
UPGRADE_FAILED = "upgrade-failed"
_DRIVER_FAILING_RESTARTS = 11
"""k8s-operator-libs `isDriverPodFailing`: not ready and RestartCount > 10."""
_OPERATOR_COMPONENT = "nvidia-gpu-operator"
_OPERATOR_EVENT_REASON = "GPUDriverUpgrade"
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
INITIAL_STATE_ANNOTATION = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
"""k8s-operator-libs `UpgradeInitialStateAnnotationKeyFmt`: the node was cordoned when its
upgrade began, so the controller leaves it cordoned at the end."""
_UPGRADE = "driver-upgrade"
"""The key under which an upgrade keeps what the node ran before it (both upgrade faults)."""


def _check_version(fault: str, version: Any) -> str:
    if not isinstance(version, str) or not _VERSION.match(version):
        raise FaultError(f"{fault}: version must look like 570.86.15, not {version!r}")
    return version


def _driver_labels(version: str) -> dict[str, str]:
    major, minor, rev = [*version.split("."), "", ""][:3]
    return {
        "nvidia.com/cuda.driver-version.full": version,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": rev,
    }


def _set_upgrade_state(store: ClusterState, node: str, state: str, at: datetime) -> None:
    """NodeUpgradeStateProvider.ChangeNodeUpgradeState: a label patch and a Normal event."""
    patched = patch_object(
        store, "Node", "", node, {"metadata": {"labels": {UPGRADE_STATE_LABEL: state}}}
    )
    record_event(
        store,
        patched,
        _OPERATOR_EVENT_REASON,
        f"Successfully updated node state label to {state}",
        at,
        component=_OPERATOR_COMPONENT,
    )


def _restart_driver_pod(
    store: ClusterState, node: Json, version: str, at: datetime, crashing: bool
) -> tuple[Json, list[str]]:
    """The operator deletes the driver pod; the DaemonSet controller creates one from the new
    template (new revision hash, image for `version`), running and ready unless `crashing`."""
    node_name = name_of(node)
    current = operator_pod(store, node_name, DRIVER_APP)
    generation = int(labels_of(current or {}).get("pod-template-generation") or 1) + 1
    image = f"nvcr.io/nvidia/driver:{version}-ubuntu22.04"
    old, created = replace_operator_pod(
        store,
        node_name,
        DRIVER_APP,
        at,
        name=f"{DRIVER_APP}-{digest(DRIVER_APP, node_name, version)}",
        image=image,
        labels={
            "controller-revision-hash": digest(DRIVER_APP, version, length=10),
            "pod-template-generation": str(generation),
        },
    )
    lines = [f"{node_name}: driver pod {name_of(old)} replaced by {name_of(created)} ({image})"]
    if crashing:
        _, began = make_crashloop(store, created, _DRIVER_FAILING_RESTARTS, at, node)
        created = store.get(BY_KIND["Pod"], GPU_OPERATOR_NS, name_of(created))
        lines.append(
            f"{node_name}: {name_of(created)} in CrashLoopBackOff with "
            f"{_DRIVER_FAILING_RESTARTS} restarts since {ts(began)}"
        )
    return created, lines


def _delete_gpu_pods(store: ClusterState, node: str) -> list[str]:
    """The upgrade controller's pod-deletion step: GPU pods go through the Eviction API."""
    lines = []
    for pod in pods_on(store, node):
        if is_daemonset_pod(pod) or pod_finished(pod) or meta(pod).get("deletionTimestamp"):
            continue
        if not any(k.startswith("nvidia.com/") for k in pod_requests(pod)):
            continue
        try:
            store.evict(namespace_of(pod), name_of(pod), {})
            lines.append(f"{namespace_of(pod)}/{name_of(pod)}: evicted for the driver upgrade")
        except ApiError as exc:
            lines.append(f"{namespace_of(pod)}/{name_of(pod)}: eviction refused ({exc.message})")
    return lines


def _begin_upgrade(store: ClusterState, node: Json, version: str, at: datetime) -> None:
    """ProcessDoneOrUnknownNodes: a node whose driver pod is out of date is marked
    upgrade-required, and annotated when it is already cordoned (the upgrade must leave it
    so). The simulator also keeps the driver pod and labels the node runs, for a repair."""
    name = name_of(node)
    remember(
        store,
        name,
        _UPGRADE,
        {
            "driver_pod": copy.deepcopy(operator_pod(store, name, DRIVER_APP)),
            "version": labels_of(node).get("nvidia.com/cuda.driver-version.full", ""),
        },
    )
    hardware(store).upgrade_targets[name] = version
    if spec_of(node).get("unschedulable"):
        patch_object(
            store,
            "Node",
            "",
            name,
            {"metadata": {"annotations": {INITIAL_STATE_ANNOTATION: "true"}}},
        )
    _set_upgrade_state(store, name, "upgrade-required", at)


def _cordoned_before(store: ClusterState, node: str) -> bool:
    return INITIAL_STATE_ANNOTATION in (meta(get_node(store, node)).get("annotations") or {})


def _finish_upgrade(store: ClusterState, node: str, at: datetime) -> list[str]:
    """updateNodeToUncordonOrDoneState and what follows: uncordon-required and the uncordon,
    unless the node was cordoned when the upgrade began (then straight to upgrade-done, the
    annotation removed, the cordon kept), then upgrade-done."""
    lines: list[str] = []
    if _cordoned_before(store, node):
        patch_object(
            store, "Node", "", node, {"metadata": {"annotations": {INITIAL_STATE_ANNOTATION: None}}}
        )
        lines.append(f"{node}: cordoned before the upgrade began: stays cordoned")
    else:
        _set_upgrade_state(store, node, "uncordon-required", at)
        lines.append(f"{node}: {UPGRADE_STATE_LABEL}=uncordon-required")
        lines += uncordon(store, node, at)
    _set_upgrade_state(store, node, "upgrade-done", at)
    lines.append(f"{node}: {UPGRADE_STATE_LABEL}=upgrade-done")
    hardware(store).upgrade_targets.pop(node, None)
    forget(store, node, _UPGRADE)
    return lines


def _enter_upgrade_state(
    store: ClusterState, node: str, state: str, version: str, at: datetime, crashing: bool = False
) -> list[str]:
    """What the controller did in the state before `state`, then the label change."""
    lines: list[str] = []
    if state == "uncordon-required" and _cordoned_before(store, node):
        return lines  # the controller goes straight to upgrade-done (see _finish_upgrade)
    if state == "upgrade-done":
        if _cordoned_before(store, node):
            return _finish_upgrade(store, node, at)
        lines += uncordon(store, node, at)
        _set_upgrade_state(store, node, state, at)
        hardware(store).upgrade_targets.pop(node, None)
        forget(store, node, _UPGRADE)
        return [*lines, f"{node}: {UPGRADE_STATE_LABEL}={state}"]
    if state == "wait-for-jobs-required":
        lines += cordon(store, node, at)
    elif state == "drain-required":
        lines += _delete_gpu_pods(store, node)
    elif state == "validation-required":
        _, restarted = _restart_driver_pod(store, get_node(store, node), version, at, crashing)
        lines += restarted
        # GPU Feature Discovery relabels once the new driver is loaded.
        stamp = {**_driver_labels(version), "nvidia.com/gfd.timestamp": str(int(at.timestamp()))}
        patch_object(store, "Node", "", node, {"metadata": {"labels": stamp}})
        lines.append(f"{node}: GFD driver labels now {version}")
    _set_upgrade_state(store, node, state, at)
    lines.append(f"{node}: {UPGRADE_STATE_LABEL}={state}")
    return lines


def advance_upgrade(store: ClusterState, node: str, state: str, now: datetime) -> list[str]:
    """Walk a node's operator-managed driver upgrade forward to `state`, doing on the way what
    the upgrade controller does between states: cordon (leaving cordon-required), GPU pod
    eviction (leaving pod-deletion-required), driver pod restart and GFD relabel (leaving
    pod-restart-required), uncordon (leaving uncordon-required). Draining the remaining pods
    (drain-required) is left to the caller, as the ClusterPolicy's drain is off by default."""
    try:
        current_node = get_node(store, node)
    except ApiError as exc:
        raise FaultError(f'node "{node}" not found') from exc
    if state not in UPGRADE_STATES:
        raise FaultError(f"unknown upgrade state {state!r}; known: {', '.join(UPGRADE_STATES)}")
    version = hardware(store).upgrade_targets.get(node)
    current = labels_of(current_node).get(UPGRADE_STATE_LABEL, "upgrade-done")
    if version is None or current not in UPGRADE_STATES:
        raise FaultError(
            f'no driver upgrade in progress on "{node}" (state {current}); '
            "inject driver-upgrade first"
        )
    start, end = UPGRADE_STATES.index(current), UPGRADE_STATES.index(state)
    if end <= start:
        raise FaultError(f'"{node}" is already at {current}, past or at {state}')
    lines: list[str] = []
    for next_state in UPGRADE_STATES[start + 1 : end + 1]:
        lines += _enter_upgrade_state(store, node, next_state, version, now)
    return lines


def driver_upgrade(t: Target, version: str) -> FaultResult:
    require_gpu_node(t.node, "driver-upgrade")
    version = _check_version("driver-upgrade", version)
    labels = labels_of(t.node)
    current = labels.get(UPGRADE_STATE_LABEL, "upgrade-done")
    if current != "upgrade-done":
        raise FaultError(f'driver-upgrade: "{t.name}" is already upgrading (state {current})')
    if labels.get("nvidia.com/cuda.driver-version.full") == version:
        raise FaultError(f'driver-upgrade: "{t.name}" already runs driver {version}')
    if operator_pod(t.store, t.name, DRIVER_APP) is None:
        raise FaultError(f'driver-upgrade: no {DRIVER_APP} pod on node "{t.name}"')
    _begin_upgrade(t.store, t.node, version, t.now)
    return FaultResult(
        "driver-upgrade",
        t.name,
        [
            f"{t.name}: driver {labels.get('nvidia.com/cuda.driver-version.full')} -> {version}: "
            f"{UPGRADE_STATE_LABEL}=upgrade-required"
        ],
    )


def driver_upgrade_failed(t: Target, version: str = "570.86.15") -> FaultResult:
    require_gpu_node(t.node, "driver-upgrade-failed")
    labels = labels_of(t.node)
    current = labels.get(UPGRADE_STATE_LABEL, "upgrade-done")
    if current == UPGRADE_FAILED:
        raise FaultError(f'driver-upgrade-failed: "{t.name}" has already failed its upgrade')
    if operator_pod(t.store, t.name, DRIVER_APP) is None:
        raise FaultError(f'driver-upgrade-failed: no {DRIVER_APP} pod on node "{t.name}"')
    state = hardware(t.store)
    lines: list[str] = []
    if current == "upgrade-done" or t.name not in state.upgrade_targets:
        version = _check_version("driver-upgrade-failed", version)
        if current != "upgrade-required":
            _begin_upgrade(t.store, t.node, version, t.now - timedelta(minutes=45))
            lines.append(f"{t.name}: {UPGRADE_STATE_LABEL}=upgrade-required (driver {version})")
            current = "upgrade-required"
        else:
            state.upgrade_targets[t.name] = version
    target = state.upgrade_targets[t.name]
    started = t.now - timedelta(minutes=40)
    # Walk to pod-restart-required; the restarted driver pod then crash-loops.
    for next_state in UPGRADE_STATES[UPGRADE_STATES.index(current) + 1 :]:
        if UPGRADE_STATES.index(next_state) > UPGRADE_STATES.index("pod-restart-required"):
            break
        lines += _enter_upgrade_state(t.store, t.name, next_state, target, started)
    _, restarted = _restart_driver_pod(t.store, get_node(t.store, t.name), target, t.now, True)
    lines += restarted
    before = allocatable_gpus(get_node(t.store, t.name))
    set_allocatable(t.store, t.name, 0)
    lines.append(f"{t.name}: no driver loaded, allocatable {GPU_RESOURCE} {before} -> 0")
    _set_upgrade_state(t.store, t.name, UPGRADE_FAILED, t.now)
    lines.append(f"{t.name}: {UPGRADE_STATE_LABEL}={UPGRADE_FAILED}")
    return FaultResult("driver-upgrade-failed", t.name, lines)


# ---- repairs ---------------------------------------------------------------------------------


def _roll_back(t: Target, fault: str) -> FaultResult:
    """The upgrade is called off: the ClusterPolicy names the driver the node ran before, so
    the upgrade controller finds a driver pod out of date wherever it had been replaced (a new
    one or a crash-looping one) and restarts it from that template; the driver loads, GPU
    Feature Discovery relabels its version and the device plugin registers the GPUs again;
    then the controller finishes as ProcessUpgradeFailedNodes / updateNodeToUncordonOrDoneState
    do: uncordon-required and the uncordon, or straight to upgrade-done for a node that was
    cordoned before the upgrade began (its cordon is a person's and stays). The GPU pods the
    upgrade evicted are not brought back: their owners make new ones."""
    state = labels_of(t.node).get(UPGRADE_STATE_LABEL, "upgrade-done")
    kept = recall(t.store, t.name, _UPGRADE)
    if state == "upgrade-done" and t.name not in hardware(t.store).upgrade_targets:
        return nothing_to_repair(fault, t.name, "no driver upgrade in progress")
    lines: list[str] = []
    before: Json | None = kept.get("driver_pod")
    current = operator_pod(t.store, t.name, DRIVER_APP)
    revision = "controller-revision-hash"
    if before is not None and (
        current is None
        or labels_of(current).get(revision) != labels_of(before).get(revision)
        or not pod_ready(current)
    ):
        old, created = replace_operator_pod(t.store, t.name, DRIVER_APP, t.now, template=before)
        lines.append(
            f"{t.name}: driver pod {name_of(old)} replaced by {name_of(created)} "
            f"({_driver_image(created)}, the driver before the upgrade)"
        )
    version = str(kept.get("version") or "")
    if (
        version
        and labels_of(get_node(t.store, t.name)).get("nvidia.com/cuda.driver-version.full")
        != version
    ):
        stamp = {**_driver_labels(version), "nvidia.com/gfd.timestamp": str(int(t.now.timestamp()))}
        patch_object(t.store, "Node", "", t.name, {"metadata": {"labels": stamp}})
        lines.append(f"{t.name}: GFD driver labels back to {version}")
    lines += register_devices(t.store, get_node(t.store, t.name))
    lines += _finish_upgrade(t.store, t.name, t.now)
    return FaultResult(fault, t.name, lines)


def _driver_image(pod: Json) -> str:
    containers = spec_of(pod).get("containers") or [{}]
    return str(containers[0].get("image", ""))


def repair_driver_upgrade(t: Target) -> FaultResult:
    return _roll_back(t, "driver-upgrade")


def repair_driver_upgrade_failed(t: Target) -> FaultResult:
    return _roll_back(t, "driver-upgrade-failed")
