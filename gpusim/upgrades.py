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
import hashlib
import re
from datetime import datetime, timedelta
from typing import Any

from bot.kube.objects import (
    labels_of,
    meta,
    name_of,
    namespace_of,
    pod_finished,
    pod_requests,
    status_of,
)
from gpusim.faulting import (
    FaultError,
    FaultResult,
    Target,
    allocatable_gpus,
    container_id,
    cordon,
    get_node,
    is_daemonset_pod,
    make_crashloop,
    operator_pod,
    patch_object,
    pods_on,
    require_gpu_node,
    set_allocatable,
    uncordon,
)
from gpusim.hardware import (
    hardware,
)
from gpusim.objects import (
    DRIVER_APP,
    GPU_OPERATOR_NS,
    GPU_RESOURCE,
    Json,
    digest,
    running_conditions,
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
    old = operator_pod(store, node_name, DRIVER_APP)
    if old is None:
        raise FaultError(f'no {DRIVER_APP} pod on node "{node_name}"')
    store.delete(BY_KIND["Pod"], GPU_OPERATOR_NS, name_of(old))
    new = copy.deepcopy(old)
    metadata = new["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "finalizers"):
        metadata.pop(key, None)
    revision = digest(DRIVER_APP, version, length=10)
    metadata["name"] = f"{DRIVER_APP}-{digest(DRIVER_APP, node_name, version)}"
    generation = int((metadata.get("labels") or {}).get("pod-template-generation") or 1) + 1
    metadata["labels"] = {
        **(metadata.get("labels") or {}),
        "controller-revision-hash": revision,
        "pod-template-generation": str(generation),
    }
    image = f"nvcr.io/nvidia/driver:{version}-ubuntu22.04"
    containers = new.get("spec", {}).get("containers") or []
    for container in containers:
        container["image"] = image
    started = at + timedelta(seconds=5)
    container_name = str(containers[0]["name"]) if containers else "nvidia-driver-ctr"
    new["status"] = {
        "phase": "Running",
        "hostIP": status_of(old).get("hostIP"),
        "podIP": status_of(old).get("podIP"),
        "startTime": ts(at),
        "qosClass": status_of(old).get("qosClass", "BestEffort"),
        "conditions": running_conditions(started),
        "containerStatuses": [
            {
                "name": container_name,
                "image": image,
                "imageID": "nvcr.io/nvidia/driver@sha256:"
                + hashlib.sha256(image.encode()).hexdigest(),
                "containerID": container_id(metadata["name"], container_name, ts(started)),
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": ts(started)}},
                "lastState": {},
            }
        ],
    }
    created = store.create(BY_KIND["Pod"], GPU_OPERATOR_NS, new)
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


def _enter_upgrade_state(
    store: ClusterState, node: str, state: str, version: str, at: datetime, crashing: bool = False
) -> list[str]:
    """What the controller did in the state before `state`, then the label change."""
    lines: list[str] = []
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
    elif state == "upgrade-done":
        lines += uncordon(store, node, at)
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
    if state == "upgrade-done":
        hardware(store).upgrade_targets.pop(node, None)
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
    hardware(t.store).upgrade_targets[t.name] = version
    _set_upgrade_state(t.store, t.name, "upgrade-required", t.now)
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
        state.upgrade_targets[t.name] = version
        if current != "upgrade-required":
            _set_upgrade_state(t.store, t.name, "upgrade-required", t.now - timedelta(minutes=45))
            lines.append(f"{t.name}: {UPGRADE_STATE_LABEL}=upgrade-required (driver {version})")
            current = "upgrade-required"
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
