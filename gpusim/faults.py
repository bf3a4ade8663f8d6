"""Fault injection: change the simulated cluster the way the real components would.

Each fault writes through `ClusterState.patch` / `create` / `delete` / `evict`, so resourceVersions
move and watchers see the same sequence of events a real cluster shows. Field values, label
values, container-status shapes and Event reason/message/source follow the component that
makes the change in a real cluster:

- kubelet: node status setters (`Rebooted` is a Warning "Node N has been rebooted, boot id:
  ID", its node events name the node with `uid` = the node name), container back-off
  ("back-off 5m0s restarting failed container=C pod=P_NS(UID)", event `BackOff`), the device
  manager (a stopped device plugin leaves its devices unhealthy: allocatable 0 at once,
  capacity 0 once the 5-minute endpoint grace period is over; after a restart every resource
  a plugin ever registered stays in capacity at 0 until the plugin registers again).
- node lifecycle controller: Ready/MemoryPressure/DiskPressure/PIDPressure Unknown with
  reason `NodeStatusUnknown` "Kubelet stopped posting node status.", the
  `node.kubernetes.io/unreachable` NoSchedule and NoExecute taints with `timeAdded`, pods
  marked Ready=False with a Warning `NodeNotReady` "Node is not ready" event.
- NVIDIA device plugin: a GPU leaves `nvidia.com/gpu` allocatable on a critical Xid (not on
  13, 31, 43, 45, 68, 109).
- GPU Operator upgrade controller (k8s-operator-libs): `nvidia.com/gpu-driver-upgrade-state`
  walks its states, each change with a Normal `GPUDriverUpgrade` event "Successfully updated
  node state label to STATE" from `nvidia-gpu-operator`; the node goes `upgrade-failed` when
  the restarted driver pod is not ready with more than 10 restarts.
- mig-manager: `nvidia.com/mig.config.state=failed`.

GPU-level facts no Kubernetes object holds (the last Xid, ECC and NVLink counters, Fabric
Manager) live in `gpu_state(store)`, for the dcgm-exporter style metrics endpoint; the faults
that Prometheus would alert on return Alertmanager webhook alerts in `FaultResult.alerts`.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import re
import threading
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.kube.objects import (
    controller_of,
    labels_of,
    name_of,
    namespace_of,
    pod_finished,
    pod_requests,
    quantity,
    selector_matches,
)
from gpusim.objects import GPU_OPERATOR_NS, Json, running_conditions, ts
from gpusim.patching import STRATEGIC_PATCH
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState

GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
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
XIDS_KEEPING_GPU_HEALTHY = frozenset({13, 31, 43, 45, 68, 109})
"""Xids the device plugin (`internal/rm/health.go`) ignores; any other marks the GPU unhealthy."""

DEVICE_PLUGIN = "nvidia-device-plugin-daemonset"
DRIVER = "nvidia-driver-daemonset"
_UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
_NOT_READY_TAINT = "node.kubernetes.io/not-ready"
_KUBELET_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
_PLUGIN_STOP_GRACE = timedelta(minutes=5)
"""kubelet devicemanager `endpointStopGracePeriod`."""
_DRIVER_FAILING_RESTARTS = 11
"""k8s-operator-libs `isDriverPodFailing`: not ready and RestartCount > 10."""
_OPERATOR_COMPONENT = "nvidia-gpu-operator"
_OPERATOR_EVENT_REASON = "GPUDriverUpgrade"
_REBOOT_DOWNTIME = timedelta(minutes=3)
_ZERO_TIME = "0001-01-01T00:00:00Z"
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")


class FaultError(ValueError):
    """An unknown fault, node or parameter: nothing was changed."""


@dataclass(frozen=True)
class FaultResult:
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


# ---- GPU state the Kubernetes API does not hold ---------------------------------------------


@dataclass
class _SimState:
    gpus: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    upgrade_targets: dict[str, str] = field(default_factory=dict)
    """node -> driver version an upgrade in progress installs."""


_STATES: weakref.WeakKeyDictionary[ClusterState, _SimState] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _sim_state(store: ClusterState) -> _SimState:
    with _STATES_LOCK:
        state = _STATES.get(store)
        if state is None:
            state = _STATES[store] = _SimState()
        return state


def gpu_state(store: ClusterState) -> dict[str, dict[int, dict[str, Any]]]:
    """node -> GPU index -> what DCGM would report for it; only GPUs a fault touched.

    Fields: `xid` (last Xid, the `DCGM_FI_DEV_XID_ERRORS` gauge; 0 = none), `healthy` (the
    device plugin's view), `ecc_dbe_volatile` / `ecc_dbe_aggregate`,
    `uncorrectable_remapped_rows`, `nvlink_crc_flit_errors` / `nvlink_replay_errors` /
    `nvlink_recovery_errors`, `fabric_manager` ("running" | "down").
    """
    return _sim_state(store).gpus


def _gpu(store: ClusterState, node: str, index: int) -> dict[str, Any]:
    return (
        gpu_state(store)
        .setdefault(node, {})
        .setdefault(
            index,
            {
                "xid": 0,
                "healthy": True,
                "ecc_dbe_volatile": 0,
                "ecc_dbe_aggregate": 0,
                "uncorrectable_remapped_rows": 0,
                "nvlink_crc_flit_errors": 0,
                "nvlink_replay_errors": 0,
                "nvlink_recovery_errors": 0,
                "fabric_manager": "running",
            },
        )
    )


# ---- small helpers --------------------------------------------------------------------------


def _digest(*parts: str, length: int = 5) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    raw = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in raw[:length])


def _container_id(*parts: str) -> str:
    return "containerd://" + hashlib.sha256("/".join(parts).encode()).hexdigest()


def _go_duration(seconds: int) -> str:
    minutes, secs = divmod(seconds, 60)
    return f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _backoff_s(restarts: int) -> int:
    """kubelet's crash-loop back-off after `restarts` restarts: 10 s doubling, capped at 5 min."""
    return int(min(10 * 2 ** max(0, restarts - 1), 300))


def _patch(store: ClusterState, kind: str, namespace: str, name: str, body: Json) -> Json:
    return store.patch(BY_KIND[kind], namespace, name, STRATEGIC_PATCH, body)


def _node(store: ClusterState, name: str) -> Json:
    return store.get(BY_KIND["Node"], "", name)


def _pods_on(store: ClusterState, node: str) -> list[Json]:
    pods, _ = store.list(BY_KIND["Pod"], "", field_selector=f"spec.nodeName={node}")
    return pods


def _operator_pod(store: ClusterState, node: str, app: str) -> Json | None:
    pods, _ = store.list(BY_KIND["Pod"], GPU_OPERATOR_NS, f"app={app}", f"spec.nodeName={node}")
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return live[0] if live else None


def _is_daemonset_pod(pod: Json) -> bool:
    owner = controller_of(pod)
    return bool(owner and owner[0] == "DaemonSet")


def _is_mirror_pod(pod: Json) -> bool:
    return "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {})


def _gpu_count(node: Json) -> int:
    status = node.get("status") or {}
    label = labels_of(node).get("nvidia.com/gpu.count", "")
    counted = int(label) if label.isdigit() else 0
    return max(counted, quantity((status.get("capacity") or {}).get(GPU_RESOURCE, 0)))


def _allocatable(node: Json) -> int:
    return quantity(((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, 0))


def _require_gpu_node(node: Json, fault: str) -> int:
    count = _gpu_count(node)
    if count == 0 and labels_of(node).get("nvidia.com/gpu.present") != "true":
        raise FaultError(f'{fault}: node "{name_of(node)}" has no NVIDIA GPUs')
    return count


def _require_gpu_index(node: Json, fault: str, gpu: Any) -> int:
    count = _require_gpu_node(node, fault)
    if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < max(count, 1):
        raise FaultError(
            f'{fault}: gpu must be an index from 0 to {max(count, 1) - 1} on "{name_of(node)}", '
            f"not {gpu!r}"
        )
    return gpu


def _require_int(fault: str, name: str, value: Any, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise FaultError(f"{fault}: {name} must be an integer >= {minimum}, not {value!r}")
    return value


def _set_allocatable(
    store: ClusterState, node: str, value: int, capacity: int | None = None
) -> None:
    status: Json = {"allocatable": {GPU_RESOURCE: str(value)}}
    if capacity is not None:
        status["capacity"] = {GPU_RESOURCE: str(capacity)}
    _patch(store, "Node", "", node, {"status": status})


def _mark_gpu_unhealthy(store: ClusterState, node: str, index: int) -> str | None:
    """The device plugin takes the GPU out of allocatable, once: kubelet reports healthy devices."""
    gpu = _gpu(store, node, index)
    if not gpu["healthy"]:
        return None
    gpu["healthy"] = False
    before = _allocatable(_node(store, node))
    after = max(0, before - 1)
    _set_allocatable(store, node, after)
    return (
        f"{node}: device plugin marked GPU {index} unhealthy, "
        f"allocatable {GPU_RESOURCE} {before} -> {after}"
    )


def _alert(
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


# ---- events -----------------------------------------------------------------------------------


def _record_event(
    store: ClusterState,
    involved: Json,
    reason: str,
    message: str,
    at: datetime,
    *,
    component: str,
    host: str | None = None,
    type_: str = "Normal",
    count: int = 1,
    first: datetime | None = None,
    field_path: str | None = None,
) -> Json:
    """An Event as client-go's recorder writes it (name = OBJECT.<hex nanoseconds>)."""
    kind = str(involved.get("kind"))
    name = name_of(involved)
    namespace = namespace_of(involved) if kind != "Node" else ""
    reference: Json = {"kind": kind, "name": name, "apiVersion": involved.get("apiVersion", "v1")}
    if namespace:
        reference["namespace"] = namespace
    # kubelet's nodeRef carries the node name as uid; every other recorder the object's uid.
    kubelet_node = kind == "Node" and component == "kubelet"
    reference["uid"] = name if kubelet_node else involved["metadata"].get("uid", "")
    if kind != "Node":
        reference["resourceVersion"] = involved["metadata"].get("resourceVersion", "")
    if field_path:
        reference["fieldPath"] = field_path
    source: Json = {"component": component}
    if host:
        source["host"] = host
    event_namespace = namespace or "default"
    nanos = int(at.timestamp()) * 1_000_000_000 + at.microsecond * 1000
    body: Json = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": event_namespace},
        "involvedObject": reference,
        "reason": reason,
        "message": message,
        "source": source,
        "firstTimestamp": ts(first or at),
        "lastTimestamp": ts(at),
        "count": count,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": host or "",
    }
    while True:
        body["metadata"]["name"] = f"{name}.{nanos:x}"
        try:
            return store.create(BY_KIND["Event"], event_namespace, body)
        except ApiError as exc:
            if exc.code != 409:
                raise
            nanos += 1


def _node_status_event(store: ClusterState, node: Json, status: str, at: datetime) -> None:
    """kubelet's recordNodeStatusEvent: "Node N status is now: STATUS"."""
    _record_event(
        store,
        node,
        status,
        f"Node {name_of(node)} status is now: {status}",
        at,
        component="kubelet",
        host=name_of(node),
    )


# ---- cordon (kubectl + node lifecycle controller + kubelet) ---------------------------------


def cordon(store: ClusterState, node: str, now: datetime) -> list[str]:
    """`kubectl cordon`, then the node lifecycle controller's taint and the kubelet's event."""
    current = _node(store, node)
    if (current.get("spec") or {}).get("unschedulable"):
        return [f"{node}: already cordoned"]
    _patch(store, "Node", "", node, {"spec": {"unschedulable": True}})
    taints = [t for t in (current.get("spec") or {}).get("taints") or []]
    if not any(t.get("key") == _UNSCHEDULABLE_TAINT for t in taints):
        taints.append({"key": _UNSCHEDULABLE_TAINT, "effect": "NoSchedule", "timeAdded": ts(now)})
        _patch(store, "Node", "", node, {"spec": {"taints": taints}})
    _node_status_event(store, current, "NodeNotSchedulable", now)
    return [f"{node}: cordoned (spec.unschedulable, taint {_UNSCHEDULABLE_TAINT}:NoSchedule)"]


def uncordon(store: ClusterState, node: str, now: datetime) -> list[str]:
    """`kubectl uncordon`, then the controller drops the taint and the kubelet says so."""
    current = _node(store, node)
    if not (current.get("spec") or {}).get("unschedulable"):
        return [f"{node}: not cordoned"]
    _patch(store, "Node", "", node, {"spec": {"unschedulable": None}})
    taints = [
        t
        for t in (current.get("spec") or {}).get("taints") or []
        if t.get("key") != _UNSCHEDULABLE_TAINT
    ]
    _patch(store, "Node", "", node, {"spec": {"taints": taints or None}})
    _node_status_event(store, current, "NodeSchedulable", now)
    return [f"{node}: uncordoned"]


# ---- faults ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    store: ClusterState
    node: Json
    now: datetime

    @property
    def name(self) -> str:
        return name_of(self.node)


def _zero_capacity(t: _Target) -> FaultResult:
    count = _require_gpu_node(t.node, "zero-capacity")
    before = _allocatable(t.node)
    for index in range(count):
        _gpu(t.store, t.name, index)["healthy"] = False
    _set_allocatable(t.store, t.name, 0)
    capacity = quantity(((t.node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE))
    return FaultResult(
        "zero-capacity",
        t.name,
        [
            f"{t.name}: device plugin reports every GPU unhealthy, allocatable {GPU_RESOURCE} "
            f"{before} -> 0 (capacity stays {capacity})"
        ],
    )


def _crashloop_status(
    pod: Json, container: str, restarts: int, now: datetime, exit_code: int = 1
) -> tuple[Json, datetime]:
    """containerStatuses entry of a container in CrashLoopBackOff, and when the loop began."""
    spec_container: Json = next(
        (c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == container),
        {},
    )
    old: Json = next(
        (
            s
            for s in (pod.get("status") or {}).get("containerStatuses") or []
            if s.get("name") == container
        ),
        {},
    )
    image = str(spec_container.get("image") or old.get("image") or "")
    finished = now - timedelta(seconds=min(_backoff_s(restarts) // 2, 120) + 7)
    started = finished - timedelta(seconds=2)
    began = started - timedelta(seconds=sum(_backoff_s(r) + 2 for r in range(1, max(restarts, 1))))
    ref = f"{name_of(pod)}_{namespace_of(pod)}({pod['metadata'].get('uid', '')})"
    container_id = _container_id(name_of(pod), container, str(restarts), ts(started))
    status: Json = {
        "name": container,
        "image": image,
        "imageID": old.get("imageID")
        or f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": container_id,
        "ready": False,
        "started": False,
        "restartCount": restarts,
        "state": {
            "running": None,
            "terminated": None,
            "waiting": {
                "reason": "CrashLoopBackOff",
                "message": f"back-off {_go_duration(_backoff_s(restarts))} restarting failed "
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
                "containerID": container_id,
            },
        },
    }
    return status, began


def _not_ready_conditions(container: str, at: datetime) -> list[Json]:
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


def _make_crashloop(
    store: ClusterState, pod: Json, restarts: int, now: datetime, node: Json
) -> tuple[Json, datetime]:
    container = str(((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", "main"))
    status, began = _crashloop_status(pod, container, restarts, now)
    patched = _patch(
        store,
        "Pod",
        namespace_of(pod),
        name_of(pod),
        {
            "status": {
                "phase": "Running",
                "conditions": _not_ready_conditions(container, began),
                "containerStatuses": [status],
            }
        },
    )
    _record_event(
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


def _plugin_crashloop(t: _Target, restarts: int = 7) -> FaultResult:
    _require_gpu_node(t.node, "plugin-crashloop")
    restarts = _require_int("plugin-crashloop", "restarts", restarts, 1)
    pod = _operator_pod(t.store, t.name, DEVICE_PLUGIN)
    if pod is None:
        raise FaultError(f'plugin-crashloop: no {DEVICE_PLUGIN} pod on node "{t.name}"')
    _, began = _make_crashloop(t.store, pod, restarts, t.now, t.node)
    capacity = quantity(((t.node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE))
    # The plugin's endpoint stopped: its devices are unhealthy (allocatable 0); past the
    # kubelet's 5-minute grace period the resource is removed, which sets capacity to 0.
    capacity_after = 0 if t.now - began > _PLUGIN_STOP_GRACE else capacity
    _set_allocatable(t.store, t.name, 0, capacity_after)
    for index in range(_gpu_count(t.node)):
        _gpu(t.store, t.name, index)
    return FaultResult(
        "plugin-crashloop",
        t.name,
        [
            f"{t.name}: pod {GPU_OPERATOR_NS}/{name_of(pod)} in CrashLoopBackOff, "
            f"{restarts} restarts, last exit code 1",
            f"{t.name}: allocatable {GPU_RESOURCE} 0, capacity {capacity} -> {capacity_after}",
        ],
    )


def _xid(t: _Target, code: int, gpu: int = 0) -> FaultResult:
    code = _require_int("xid", "code", code, 1)
    gpu = _require_gpu_index(t.node, "xid", gpu)
    state = _gpu(t.store, t.name, gpu)
    state["xid"] = code
    lines = [f"{t.name}: GPU {gpu} reported Xid {code} (DCGM_FI_DEV_XID_ERRORS={code})"]
    if code not in XIDS_KEEPING_GPU_HEALTHY:
        changed = _mark_gpu_unhealthy(t.store, t.name, gpu)
        if changed:
            lines.append(changed)
    alert = _alert(
        "GPUXidError",
        t.name,
        t.now,
        "warning" if code in XIDS_KEEPING_GPU_HEALTHY else "critical",
        f"Xid {code} on {t.name} GPU {gpu}",
        f"DCGM_FI_DEV_XID_ERRORS is {code} on GPU {gpu} of {t.name}",
        gpu=str(gpu),
        xid=str(code),
    )
    return FaultResult("xid", t.name, lines, [alert])


def _ecc_dbe(t: _Target, gpu: int = 0) -> FaultResult:
    gpu = _require_gpu_index(t.node, "ecc-dbe", gpu)
    state = _gpu(t.store, t.name, gpu)
    state["ecc_dbe_volatile"] += 1
    state["ecc_dbe_aggregate"] += 1
    state["uncorrectable_remapped_rows"] += 1
    state["xid"] = 48  # the driver logs a double-bit error as Xid 48
    lines = [
        f"{t.name}: GPU {gpu} double-bit ECC error (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL="
        f"{state['ecc_dbe_volatile']}), Xid 48"
    ]
    changed = _mark_gpu_unhealthy(t.store, t.name, gpu)
    if changed:
        lines.append(changed)
    alerts = [
        _alert(
            "GPUECCDoubleBitError",
            t.name,
            t.now,
            "critical",
            f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL increased on {t.name} GPU {gpu}",
            f"Uncorrectable (double-bit) ECC errors on GPU {gpu} of {t.name}",
            gpu=str(gpu),
        ),
        _alert(
            "GPUXidError",
            t.name,
            t.now,
            "critical",
            f"Xid 48 on {t.name} GPU {gpu}",
            f"DCGM_FI_DEV_XID_ERRORS is 48 on GPU {gpu} of {t.name}",
            gpu=str(gpu),
            xid="48",
        ),
    ]
    return FaultResult("ecc-dbe", t.name, lines, alerts)


def _nvlink(t: _Target, gpu: int = 0, link: int = 0, errors: int = 250) -> FaultResult:
    gpu = _require_gpu_index(t.node, "nvlink", gpu)
    link = _require_int("nvlink", "link", link, 0)
    errors = _require_int("nvlink", "errors", errors, 1)
    state = _gpu(t.store, t.name, gpu)
    state["nvlink_crc_flit_errors"] += errors
    state["nvlink_replay_errors"] += max(1, errors // 10)
    alert = _alert(
        "GPUNVLinkErrors",
        t.name,
        t.now,
        "warning",
        f"NVLink CRC errors rising on {t.name} GPU {gpu} link {link}",
        f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL increased by {errors} on GPU {gpu}",
        gpu=str(gpu),
        link=str(link),
    )
    return FaultResult(
        "nvlink",
        t.name,
        [f"{t.name}: GPU {gpu} NVLink {link}: {errors} CRC flit errors"],
        [alert],
    )


def _fabric_manager_down(t: _Target) -> FaultResult:
    count = _require_gpu_node(t.node, "fabric-manager-down")
    for index in range(count):
        _gpu(t.store, t.name, index)["fabric_manager"] = "down"
    alert = _alert(
        "GPUFabricManagerDown",
        t.name,
        t.now,
        "critical",
        "nvidia-fabricmanager not running",
        f"NVIDIA Fabric Manager is not running on {t.name}: CUDA cannot use the NVSwitch fabric",
    )
    return FaultResult(
        "fabric-manager-down",
        t.name,
        [f"{t.name}: nvidia-fabricmanager.service stopped"],
        [alert],
    )


def _mig_failed(t: _Target, config: str | None = None) -> FaultResult:
    _require_gpu_node(t.node, "mig-failed")
    labels = labels_of(t.node)
    if labels.get("nvidia.com/mig.capable") == "false":
        raise FaultError(f'mig-failed: node "{t.name}" is not MIG capable')
    if config is not None and (not isinstance(config, str) or not config):
        raise FaultError(f"mig-failed: config must be a MIG profile name, not {config!r}")
    wanted: Json = {"nvidia.com/mig.config.state": "failed"}
    if config:
        wanted["nvidia.com/mig.config"] = config
    _patch(t.store, "Node", "", t.name, {"metadata": {"labels": wanted}})
    profile = config or labels.get("nvidia.com/mig.config", "")
    return FaultResult(
        "mig-failed",
        t.name,
        [f"{t.name}: mig-manager failed to apply {profile}: nvidia.com/mig.config.state=failed"],
    )


def _reboot(t: _Target, reapply_mig: bool = False, boot_id: str | None = None) -> FaultResult:
    if not isinstance(reapply_mig, bool):
        raise FaultError(f"reboot: reapply_mig must be true or false, not {reapply_mig!r}")
    if boot_id is not None and (not isinstance(boot_id, str) or not boot_id):
        raise FaultError(f"reboot: boot_id must be a non-empty string, not {boot_id!r}")
    new_boot = boot_id or str(uuid.uuid4())
    old_boot = ((t.node.get("status") or {}).get("nodeInfo") or {}).get("bootID")
    if new_boot == old_boot:
        raise FaultError(f"reboot: boot id {new_boot} is the current one")
    now, down = t.now, t.now - _REBOOT_DOWNTIME
    labels = labels_of(t.node)
    status = t.node.get("status") or {}
    capacity = dict(status.get("capacity") or {})
    lines = [f"{t.name}: rebooted, bootID {old_boot} -> {new_boot}"]

    # The node controller saw it go away; the kubelet came back with a new boot id.
    _record_event(
        t.store,
        t.node,
        "NodeNotReady",
        f"Node {t.name} status is now: NodeNotReady",
        down + timedelta(seconds=40),
        component="node-controller",
    )
    conditions = [
        {"type": kind, "lastHeartbeatTime": ts(now), "lastTransitionTime": ts(now)}
        for kind in _KUBELET_CONDITIONS
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
            node_status["capacity"] = zeroed
            node_status["allocatable"] = dict(zeroed)
            lines.append(
                f"{t.name}: MIG layout {mig_config} lost and not re-applied: "
                + ", ".join(f"{k}=0" for k in sorted(zeroed))
            )
    elif GPU_RESOURCE in capacity:
        # A fresh device plugin finds every GPU healthy again.
        node_status["allocatable"] = {GPU_RESOURCE: capacity[GPU_RESOURCE]}
    _patch(t.store, "Node", "", t.name, {"status": node_status})
    for gpu in gpu_state(t.store).get(t.name, {}).values():
        gpu.update(xid=0, healthy=True, ecc_dbe_volatile=0, fabric_manager="running")

    lines.extend(_restart_containers(t.store, t.name, down, now))
    for reason, message, type_ in (
        ("Starting", "Starting kubelet.", "Normal"),
        ("NodeAllocatableEnforced", "Updated Node Allocatable limit across pods", "Normal"),
        ("NodeHasSufficientMemory", None, "Normal"),
        ("NodeHasNoDiskPressure", None, "Normal"),
        ("NodeHasSufficientPID", None, "Normal"),
        ("Rebooted", f"Node {t.name} has been rebooted, boot id: {new_boot}", "Warning"),
        ("NodeReady", None, "Normal"),
    ):
        _record_event(
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


def _restart_containers(store: ClusterState, node: str, down: datetime, now: datetime) -> list[str]:
    """After a reboot every running container is gone: restarted (exit 255, reason Unknown)."""
    restarted = 0
    for pod in _pods_on(store, node):
        if pod["metadata"].get("deletionTimestamp") or pod_finished(pod):
            continue
        status = pod.get("status") or {}
        never = (pod.get("spec") or {}).get("restartPolicy") == "Never"
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
                    containerID=_container_id(name_of(pod), old["name"], ts(now)),
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
        _patch(store, "Pod", namespace_of(pod), name_of(pod), {"status": body})
        restarted += 1
    return [f"{node}: containers of {restarted} pod(s) restarted after the reboot"]


def _not_ready(t: _Target) -> FaultResult:
    conditions = (t.node.get("status") or {}).get("conditions") or []
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
        if c.get("type") in _KUBELET_CONDITIONS and c.get("status") != "Unknown"
    ]
    _patch(t.store, "Node", "", t.name, {"status": {"conditions": changed}})
    _record_event(
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
        for tn in (t.node.get("spec") or {}).get("taints") or []
        if tn.get("key") not in (_UNREACHABLE_TAINT, _NOT_READY_TAINT)
    ]
    taints += [
        {"key": _UNREACHABLE_TAINT, "effect": effect, "timeAdded": ts(now)}
        for effect in ("NoSchedule", "NoExecute")
    ]
    _patch(t.store, "Node", "", t.name, {"spec": {"taints": taints}})
    marked = 0
    for pod in _pods_on(t.store, t.name):
        pod_conditions = (pod.get("status") or {}).get("conditions") or []
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod_conditions):
            continue
        patched = _patch(
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
        _record_event(
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
            f"{t.name}: taints {_UNREACHABLE_TAINT}:NoSchedule and :NoExecute",
            f"{t.name}: {marked} pod(s) marked Ready=False",
        ],
    )


def _pdb_block(t: _Target) -> FaultResult:
    pods = [
        p
        for p in _pods_on(t.store, t.name)
        if not _is_daemonset_pod(p) and not _is_mirror_pod(p) and not pod_finished(p)
    ]
    pdbs: dict[tuple[str, str], Json] = {}
    for pod in pods:
        budgets, _ = t.store.list(BY_KIND["PodDisruptionBudget"], namespace_of(pod))
        for pdb in budgets:
            if selector_matches((pdb.get("spec") or {}).get("selector"), labels_of(pod)):
                pdbs[(namespace_of(pdb), name_of(pdb))] = pdb
    if not pdbs:
        raise FaultError(f'pdb-block: no PodDisruptionBudget covers a pod on node "{t.name}"')
    lines = []
    for (namespace, name), pdb in sorted(pdbs.items()):
        healthy = int((pdb.get("status") or {}).get("currentHealthy") or 0)
        generation = int((pdb.get("metadata") or {}).get("generation") or 1) + 1
        _patch(
            t.store,
            "PodDisruptionBudget",
            namespace,
            name,
            {
                "metadata": {"generation": generation},
                "spec": {"minAvailable": healthy, "maxUnavailable": None},
                "status": {
                    "observedGeneration": generation,
                    "desiredHealthy": healthy,
                    "disruptionsAllowed": 0,
                    "conditions": [
                        {
                            "type": "DisruptionAllowed",
                            "status": "False",
                            "reason": "InsufficientPods",
                            "message": "",
                            "lastTransitionTime": ts(t.now),
                            "observedGeneration": generation,
                        }
                    ],
                },
            },
        )
        lines.append(
            f"{namespace}/{name}: minAvailable={healthy} of {healthy} healthy, disruptionsAllowed=0"
        )
    return FaultResult("pdb-block", t.name, lines)


def _finalizer_stuck(
    t: _Target, pod: str | None = None, finalizer: str = "example.com/checkpoint-upload"
) -> FaultResult:
    if not isinstance(finalizer, str) or "/" not in finalizer:
        raise FaultError(
            f"finalizer-stuck: finalizer must look like domain/name, not {finalizer!r}"
        )
    candidates = [
        p
        for p in _pods_on(t.store, t.name)
        if not _is_daemonset_pod(p)
        and not _is_mirror_pod(p)
        and not pod_finished(p)
        and not p["metadata"].get("deletionTimestamp")
        and (pod is None or name_of(p) == pod)
    ]
    if not candidates:
        what = f'pod "{pod}" not found' if pod else "no pod outside DaemonSets"
        raise FaultError(f'finalizer-stuck: {what} on node "{t.name}"')
    # GPU workers first: the pods whose stuck deletion hurts a drain most.
    chosen = sorted(
        candidates,
        key=lambda p: (-pod_requests(p).get(GPU_RESOURCE, 0), namespace_of(p), name_of(p)),
    )[0]
    finalizers = [*(chosen["metadata"].get("finalizers") or []), finalizer]
    _patch(
        t.store,
        "Pod",
        namespace_of(chosen),
        name_of(chosen),
        {"metadata": {"finalizers": list(dict.fromkeys(finalizers))}},
    )
    return FaultResult(
        "finalizer-stuck",
        t.name,
        [
            f"{namespace_of(chosen)}/{name_of(chosen)}: finalizer {finalizer} that nothing "
            "removes (a delete leaves the pod Terminating)"
        ],
    )


# ---- driver upgrades (GPU Operator upgrade controller) ---------------------------------------


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
    patched = _patch(
        store, "Node", "", node, {"metadata": {"labels": {UPGRADE_STATE_LABEL: state}}}
    )
    _record_event(
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
    old = _operator_pod(store, node_name, DRIVER)
    if old is None:
        raise FaultError(f'no {DRIVER} pod on node "{node_name}"')
    store.delete(BY_KIND["Pod"], GPU_OPERATOR_NS, name_of(old))
    new = copy.deepcopy(old)
    meta = new["metadata"]
    for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "finalizers"):
        meta.pop(key, None)
    revision = _digest(DRIVER, version, length=10)
    meta["name"] = f"{DRIVER}-{_digest(DRIVER, node_name, version)}"
    generation = int((meta.get("labels") or {}).get("pod-template-generation") or 1) + 1
    meta["labels"] = {
        **(meta.get("labels") or {}),
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
        "hostIP": (old.get("status") or {}).get("hostIP"),
        "podIP": (old.get("status") or {}).get("podIP"),
        "startTime": ts(at),
        "qosClass": (old.get("status") or {}).get("qosClass", "BestEffort"),
        "conditions": running_conditions(started),
        "containerStatuses": [
            {
                "name": container_name,
                "image": image,
                "imageID": "nvcr.io/nvidia/driver@sha256:"
                + hashlib.sha256(image.encode()).hexdigest(),
                "containerID": _container_id(meta["name"], container_name, ts(started)),
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
        _, began = _make_crashloop(store, created, _DRIVER_FAILING_RESTARTS, at, node)
        created = store.get(BY_KIND["Pod"], GPU_OPERATOR_NS, name_of(created))
        lines.append(
            f"{node_name}: {name_of(created)} in CrashLoopBackOff with "
            f"{_DRIVER_FAILING_RESTARTS} restarts since {ts(began)}"
        )
    return created, lines


def _delete_gpu_pods(store: ClusterState, node: str) -> list[str]:
    """The upgrade controller's pod-deletion step: GPU pods go through the Eviction API."""
    lines = []
    for pod in _pods_on(store, node):
        if _is_daemonset_pod(pod) or pod_finished(pod) or pod["metadata"].get("deletionTimestamp"):
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
        _, restarted = _restart_driver_pod(store, _node(store, node), version, at, crashing)
        lines += restarted
        # GPU Feature Discovery relabels once the new driver is loaded.
        stamp = {**_driver_labels(version), "nvidia.com/gfd.timestamp": str(int(at.timestamp()))}
        _patch(store, "Node", "", node, {"metadata": {"labels": stamp}})
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
        current_node = _node(store, node)
    except ApiError as exc:
        raise FaultError(f'node "{node}" not found') from exc
    if state not in UPGRADE_STATES:
        raise FaultError(f"unknown upgrade state {state!r}; known: {', '.join(UPGRADE_STATES)}")
    version = _sim_state(store).upgrade_targets.get(node)
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
        _sim_state(store).upgrade_targets.pop(node, None)
    return lines


def _driver_upgrade(t: _Target, version: str) -> FaultResult:
    _require_gpu_node(t.node, "driver-upgrade")
    version = _check_version("driver-upgrade", version)
    labels = labels_of(t.node)
    current = labels.get(UPGRADE_STATE_LABEL, "upgrade-done")
    if current != "upgrade-done":
        raise FaultError(f'driver-upgrade: "{t.name}" is already upgrading (state {current})')
    if labels.get("nvidia.com/cuda.driver-version.full") == version:
        raise FaultError(f'driver-upgrade: "{t.name}" already runs driver {version}')
    if _operator_pod(t.store, t.name, DRIVER) is None:
        raise FaultError(f'driver-upgrade: no {DRIVER} pod on node "{t.name}"')
    _sim_state(t.store).upgrade_targets[t.name] = version
    _set_upgrade_state(t.store, t.name, "upgrade-required", t.now)
    return FaultResult(
        "driver-upgrade",
        t.name,
        [
            f"{t.name}: driver {labels.get('nvidia.com/cuda.driver-version.full')} -> {version}: "
            f"{UPGRADE_STATE_LABEL}=upgrade-required"
        ],
    )


def _driver_upgrade_failed(t: _Target, version: str = "570.86.15") -> FaultResult:
    _require_gpu_node(t.node, "driver-upgrade-failed")
    labels = labels_of(t.node)
    current = labels.get(UPGRADE_STATE_LABEL, "upgrade-done")
    if current == UPGRADE_FAILED:
        raise FaultError(f'driver-upgrade-failed: "{t.name}" has already failed its upgrade')
    if _operator_pod(t.store, t.name, DRIVER) is None:
        raise FaultError(f'driver-upgrade-failed: no {DRIVER} pod on node "{t.name}"')
    state = _sim_state(t.store)
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
    _, restarted = _restart_driver_pod(t.store, _node(t.store, t.name), target, t.now, True)
    lines += restarted
    before = _allocatable(_node(t.store, t.name))
    _set_allocatable(t.store, t.name, 0)
    lines.append(f"{t.name}: no driver loaded, allocatable {GPU_RESOURCE} {before} -> 0")
    _set_upgrade_state(t.store, t.name, UPGRADE_FAILED, t.now)
    lines.append(f"{t.name}: {UPGRADE_STATE_LABEL}={UPGRADE_FAILED}")
    return FaultResult("driver-upgrade-failed", t.name, lines)


# ---- the entry point ------------------------------------------------------------------------

_FAULTS: dict[str, Callable[..., FaultResult]] = {
    "zero-capacity": _zero_capacity,
    "plugin-crashloop": _plugin_crashloop,
    "xid": _xid,
    "ecc-dbe": _ecc_dbe,
    "nvlink": _nvlink,
    "fabric-manager-down": _fabric_manager_down,
    "reboot": _reboot,
    "mig-failed": _mig_failed,
    "driver-upgrade": _driver_upgrade,
    "driver-upgrade-failed": _driver_upgrade_failed,
    "pdb-block": _pdb_block,
    "finalizer-stuck": _finalizer_stuck,
    "not-ready": _not_ready,
}
FAULTS = tuple(_FAULTS)


def fault_parameters(fault: str) -> dict[str, Any]:
    """The parameters a fault takes, with their defaults (`inspect.Parameter.empty`: required)."""
    handler = _FAULTS.get(fault)
    if handler is None:
        raise FaultError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    parameters = list(inspect.signature(handler).parameters.values())[1:]
    return {p.name: p.default for p in parameters}


def inject(store: ClusterState, fault: str, node: str, now: datetime, **params: Any) -> FaultResult:
    """Make `fault` happen on `node` at `now`. Raises FaultError, changing nothing, for an
    unknown fault, node or parameter."""
    handler = _FAULTS.get(fault)
    if handler is None:
        raise FaultError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
    try:
        node_obj = _node(store, node)
    except ApiError as exc:
        raise FaultError(f'{fault}: node "{node}" not found') from exc
    try:
        inspect.signature(handler).bind(None, **params)
    except TypeError as exc:
        accepted = ", ".join(fault_parameters(fault)) or "none"
        raise FaultError(f"{fault}: {exc} (parameters: {accepted})") from exc
    return handler(_Target(store, node_obj, now), **params)
