"""What every fault and repair is written with.

The error a refused fault raises (`FaultError`: nothing changed), the result it returns
(`FaultResult`: lines for people, the alerts Prometheus would fire), the node it acts on
(`Target`), the checks of its parameters, and the small reads and writes the components it
plays make on a node and its pods (kubectl's cordon, the device plugin's allocatable, the
kubelet's crash-loop status). Every write goes through the `ClusterState` API methods, so
resourceVersions move and watchers see what a real cluster shows. It must never decide
which fault happens, nor write around the API (no object is changed in place).
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.kube_objects import (
    controller_of,
    labels_of,
    meta,
    name_of,
    namespace_of,
    quantity,
    spec_of,
    status_of,
)
from gpusim.hardware import (
    gpu_count,
    gpu_record,
    gpu_state,
)
from gpusim.objects import (
    GPU_OPERATOR_NS,
    GPU_RESOURCE,
    UNSCHEDULABLE_TAINT,
    Json,
    running_conditions,
    ts,
)
from gpusim.patching import STRATEGIC_PATCH
from gpusim.recording import node_status_event, record_event
from gpusim.resources import BY_KIND
from gpusim.state import ClusterState

_ZERO_TIME = "0001-01-01T00:00:00Z"


class FaultError(ValueError):
    """An unknown fault, node or parameter: nothing was changed."""


@dataclass(frozen=True)
class FaultResult:
    """What a fault (or its repair) did to one node, and what Prometheus would fire for it."""

    fault: str
    node: str
    description: list[str]
    """What changed, one line per change, for people."""
    alerts: list[Json] = field(default_factory=list)
    """Alertmanager webhook alerts (payload v4 shape) the fault makes Prometheus fire."""

    def payload(self, receiver: str = "gpubot") -> Json:
        """The alerts as one Alertmanager webhook payload (version 4)."""
        names = sorted({a["labels"].get("alertname", "") for a in self.alerts})
        group = {"alertname": names[0]} if len(names) == 1 else {}
        group_text = ",".join(f'{k}="{v}"' for k, v in group.items())
        return {
            "version": "4",
            "groupKey": f"{{}}:{{{group_text}}}",
            "truncatedAlerts": 0,
            "receiver": receiver,
            "status": "firing",
            "alerts": copy.deepcopy(self.alerts),
            "groupLabels": group,
            "commonLabels": group,
            "commonAnnotations": {},
            "externalURL": "http://alertmanager:9093",
        }


@dataclass(frozen=True)
class Target:
    """The node a fault acts on, as it was read just before, and the moment it happens."""

    store: ClusterState
    node: Json
    now: datetime

    @property
    def name(self) -> str:
        return name_of(self.node)


def container_id(*parts: str) -> str:
    return "containerd://" + hashlib.sha256("/".join(parts).encode()).hexdigest()


def go_duration(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def backoff_s(restarts: int) -> int:
    """kubelet's crash-loop back-off after `restarts` restarts: 10 s doubling, capped at 5 min."""
    return int(min(10 * 2 ** max(0, restarts - 1), 300))


def patch_object(store: ClusterState, kind: str, namespace: str, name: str, body: Json) -> Json:
    return store.patch(BY_KIND[kind], namespace, name, STRATEGIC_PATCH, body)


def get_node(store: ClusterState, name: str) -> Json:
    return store.get(BY_KIND["Node"], "", name)


def pods_on(store: ClusterState, node: str) -> list[Json]:
    pods, _ = store.list(BY_KIND["Pod"], "", field_selector=f"spec.nodeName={node}")
    return pods


def operator_pod(store: ClusterState, node: str, app: str) -> Json | None:
    pods, _ = store.list(BY_KIND["Pod"], GPU_OPERATOR_NS, f"app={app}", f"spec.nodeName={node}")
    live = [p for p in pods if not meta(p).get("deletionTimestamp")]
    return live[0] if live else None


def is_daemonset_pod(pod: Json) -> bool:
    owner = controller_of(pod)
    return bool(owner and owner[0] == "DaemonSet")


def is_mirror_pod(pod: Json) -> bool:
    return "kubernetes.io/config.mirror" in (meta(pod).get("annotations") or {})


def allocatable_gpus(node: Json) -> int:
    return quantity((status_of(node).get("allocatable") or {}).get(GPU_RESOURCE, 0))


def require_gpu_node(node: Json, fault: str) -> int:
    count = gpu_count(node)
    if count == 0 and labels_of(node).get("nvidia.com/gpu.present") != "true":
        raise FaultError(f'{fault}: node "{name_of(node)}" has no NVIDIA GPUs')
    return count


def require_gpu_index(node: Json, fault: str, gpu: Any) -> int:
    count = require_gpu_node(node, fault)
    if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < max(count, 1):
        raise FaultError(
            f'{fault}: gpu must be an index from 0 to {max(count, 1) - 1} on "{name_of(node)}", '
            f"not {gpu!r}"
        )
    return gpu


def require_int(fault: str, name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise FaultError(f"{fault}: {name} must be an integer >= {minimum}, not {value!r}")
    return value


def set_allocatable(
    store: ClusterState, node: str, value: int, capacity: int | None = None
) -> None:
    status: Json = {"allocatable": {GPU_RESOURCE: str(value)}}
    if capacity is not None:
        status["capacity"] = {GPU_RESOURCE: str(capacity)}
    patch_object(store, "Node", "", node, {"status": status})


def mark_gpu_unhealthy(store: ClusterState, node: str, index: int) -> str | None:
    """The device plugin takes the GPU out of allocatable, once: kubelet reports healthy devices."""
    record = gpu_record(store, node, index)
    if not record["healthy"]:
        return None
    record["healthy"] = False
    before = allocatable_gpus(get_node(store, node))
    after = max(0, before - 1)
    set_allocatable(store, node, after)
    return (
        f"{node}: device plugin marked GPU {index} unhealthy, "
        f"allocatable {GPU_RESOURCE} {before} -> {after}"
    )


def alert(
    name: str,
    node: str,
    now: datetime,
    severity: str,
    summary: str,
    description: str,
    **labels: str,
) -> Json:
    alert_labels = {"alertname": name, "node": node, **labels, "severity": severity}
    canonical = ",".join(f"{k}={v}" for k, v in sorted(alert_labels.items()))
    return {
        "status": "firing",
        "labels": alert_labels,
        "annotations": {"summary": summary, "description": description},
        "startsAt": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
        "endsAt": _ZERO_TIME,
        "generatorURL": "http://prometheus:9090/graph?g0.expr=" + name,
        "fingerprint": hashlib.sha256(canonical.encode()).hexdigest()[:16],
    }


def cordon(store: ClusterState, node: str, now: datetime) -> list[str]:
    """`kubectl cordon`, then the node lifecycle controller's taint and the kubelet's event."""
    current = get_node(store, node)
    if spec_of(current).get("unschedulable"):
        return [f"{node}: already cordoned"]
    patch_object(store, "Node", "", node, {"spec": {"unschedulable": True}})
    taints = [t for t in spec_of(current).get("taints") or []]
    if not any(t.get("key") == UNSCHEDULABLE_TAINT for t in taints):
        taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule", "timeAdded": ts(now)})
        patch_object(store, "Node", "", node, {"spec": {"taints": taints}})
    node_status_event(store, current, "NodeNotSchedulable", now)
    return [f"{node}: cordoned (spec.unschedulable, taint {UNSCHEDULABLE_TAINT}:NoSchedule)"]


def uncordon(store: ClusterState, node: str, now: datetime) -> list[str]:
    """`kubectl uncordon`, then the controller drops the taint and the kubelet says so."""
    current = get_node(store, node)
    if not spec_of(current).get("unschedulable"):
        return [f"{node}: not cordoned"]
    patch_object(store, "Node", "", node, {"spec": {"unschedulable": None}})
    taints = [
        t for t in spec_of(current).get("taints") or [] if t.get("key") != UNSCHEDULABLE_TAINT
    ]
    patch_object(store, "Node", "", node, {"spec": {"taints": taints or None}})
    node_status_event(store, current, "NodeSchedulable", now)
    return [f"{node}: uncordoned"]


def crashloop_status(
    pod: Json, container: str, restarts: int, now: datetime, exit_code: int = 1
) -> tuple[Json, datetime]:
    """containerStatuses entry of a container in CrashLoopBackOff, and when the loop began."""
    spec_container: Json = next(
        (c for c in spec_of(pod).get("containers") or [] if c.get("name") == container),
        {},
    )
    old: Json = next(
        (s for s in status_of(pod).get("containerStatuses") or [] if s.get("name") == container),
        {},
    )
    image = str(spec_container.get("image") or old.get("image") or "")
    finished = now - timedelta(seconds=min(backoff_s(restarts) // 2, 120) + 7)
    started = finished - timedelta(seconds=2)
    began = started - timedelta(seconds=sum(backoff_s(r) + 2 for r in range(1, max(restarts, 1))))
    ref = f"{name_of(pod)}_{namespace_of(pod)}({pod['metadata'].get('uid', '')})"
    new_id = container_id(name_of(pod), container, str(restarts), ts(started))
    status: Json = {
        "name": container,
        "image": image,
        "imageID": old.get("imageID")
        or f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": new_id,
        "ready": False,
        "started": False,
        "restartCount": restarts,
        "state": {
            "running": None,
            "terminated": None,
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {go_duration(backoff_s(restarts))} restarting failed "
                f"container={container} pod={ref}",
            },
        },
        "lastState": {
            "running": None,
            "waiting": None,
            "terminated": {
                "exitCode": exit_code,
                "reason": "Error",
                "startedAt": ts(started),
                "finishedAt": ts(finished),
                "containerID": new_id,
            },
        },
    }
    return status, began


def not_ready_conditions(container: str, at: datetime) -> list[Json]:
    message = f"containers with unready status: [{container}]"
    return [
        {
            "type": kind,
            "status": "False",
            "reason": "ContainersNotReady",
            "message": message,
            "lastTransitionTime": ts(at),
        }
        for kind in ("Ready", "ContainersReady")
    ]


def make_crashloop(
    store: ClusterState, pod: Json, restarts: int, now: datetime, node: Json
) -> tuple[Json, datetime]:
    container = str((spec_of(pod).get("containers") or [{}])[0].get("name", "main"))
    status, began = crashloop_status(pod, container, restarts, now)
    patched = patch_object(
        store,
        "Pod",
        namespace_of(pod),
        name_of(pod),
        {
            "status": {
                "phase": "Running",
                "conditions": not_ready_conditions(container, began),
                "containerStatuses": [status],
            }
        },
    )
    record_event(
        store,
        patched,
        "BackOff",
        f"Back-off restarting failed container {container} in pod "
        f"{name_of(pod)}_{namespace_of(pod)}({pod['metadata'].get('uid', '')})",
        now,
        component="kubelet",
        host=name_of(node),
        type_="Warning",
        count=max(1, restarts * 4),
        first=began,
        field_path=f"spec.containers{{{container}}}",
    )
    return patched, began


# ---- what repairs share ----------------------------------------------------------------------


def nothing_to_repair(fault: str, node: str, why: str) -> FaultResult:
    """A repair of a node that does not show the fault: nothing changed, and why not."""
    return FaultResult(fault, node, [f"{node}: nothing to repair: {why}"])


def healthy_gpus(store: ClusterState, node: Json) -> int:
    """GPUs of the node the device plugin would call healthy."""
    records = gpu_state(store).get(name_of(node), {})
    return sum(1 for i in range(gpu_count(node)) if records.get(i, {}).get("healthy", True))


def register_devices(store: ClusterState, node: Json) -> list[str]:
    """The device plugin (re)registers with the kubelet: capacity every GPU, allocatable the
    healthy ones. Nothing is written when both already say so."""
    name, count = name_of(node), gpu_count(node)
    healthy = healthy_gpus(store, node)
    capacity = quantity((status_of(node).get("capacity") or {}).get(GPU_RESOURCE, 0))
    before = allocatable_gpus(node)
    if (capacity, before) == (count, healthy):
        return []
    set_allocatable(store, name, healthy, count)
    return [
        f"{name}: device plugin registered {count} GPUs, {healthy} healthy: allocatable "
        f"{GPU_RESOURCE} {before} -> {healthy}, capacity {capacity} -> {count}"
    ]


def start_containers(store: ClusterState, pod: Json, at: datetime) -> Json:
    """The kubelet starts the pod's containers that are not running (a crash loop that ends,
    a container killed on purpose) and they stay up: running since `at`, ready, one restart
    more; what they last exited with stays in `lastState`, as the kubelet keeps it."""
    statuses = []
    for old in status_of(pod).get("containerStatuses") or []:
        state = old.get("state") or {}
        if state.get("running") and old.get("ready"):
            continue
        name = str(old.get("name", ""))
        statuses.append(
            {
                "name": name,
                "ready": True,
                "started": True,
                "restartCount": int(old.get("restartCount") or 0) + 1,
                "containerID": container_id(name_of(pod), name, "started", ts(at)),
                "state": {"running": {"startedAt": ts(at)}, "waiting": None, "terminated": None},
            }
        )
    conditions = [
        {
            "type": kind,
            "status": "True",
            "lastTransitionTime": ts(at),
            "reason": None,
            "message": None,
        }
        for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")
        if any(c.get("type") == kind for c in status_of(pod).get("conditions") or [])
    ]
    body: Json = {"status": {"phase": "Running", "conditions": conditions}}
    if statuses:
        body["status"]["containerStatuses"] = statuses
    return patch_object(store, "Pod", namespace_of(pod), name_of(pod), body)


def replace_operator_pod(
    store: ClusterState,
    node: str,
    app: str,
    at: datetime,
    *,
    template: Json | None = None,
    name: str | None = None,
    image: str | None = None,
    labels: Json | None = None,
) -> tuple[Json, Json]:
    """`kubectl delete pod` of the node's GPU Operator pod `app`, and the pod its DaemonSet
    makes in its place, started and ready: a copy of `template` (the pod as it was once) or
    of the deleted pod, under `name` or a name generated from its generateName, with `image`
    and `labels` changed when given. Returns (deleted, created)."""
    old = operator_pod(store, node, app)
    if old is None:
        raise FaultError(f'no {app} pod on node "{node}"')
    store.delete(BY_KIND["Pod"], GPU_OPERATOR_NS, name_of(old))
    new = copy.deepcopy(template or old)
    metadata = new["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "finalizers"):
        metadata.pop(key, None)
    metadata.pop("name", None)
    if name:
        metadata["name"] = name
    elif not metadata.get("generateName"):
        metadata["generateName"] = f"{app}-"
    metadata["labels"] = {**(metadata.get("labels") or {}), **(labels or {})}
    containers = spec_of(new).get("containers") or []
    for container in containers:
        if image:
            container["image"] = image
    started = at + timedelta(seconds=5)
    shown = str(containers[0].get("image", "")) if containers else ""
    container_name = str(containers[0]["name"]) if containers else app
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
                "image": shown,
                "imageID": f"{shown.split(':')[0]}@sha256:"
                + hashlib.sha256(shown.encode()).hexdigest(),
                "containerID": container_id(app, node, container_name, ts(started)),
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": ts(started)}},
                "lastState": {},
            }
        ],
    }
    created = store.create(BY_KIND["Pod"], GPU_OPERATOR_NS, new)
    return old, created
