"""Every node's kubelet, as far as the simulated cluster needs it.

A pod bound to a Ready node and still Pending is admitted, then starts: phase
Running, the five conditions True, containers running, init containers Completed. A running
pod that is deleted or starts Terminating gets the kubelet's Normal `Killing` "Stopping
container C" event (source host = the node), which is what `collect_facts` reads as
`evicted_from`. Admission checks extended resources only (what a pod bound by `nodeName`
past the scheduler can lack): a registered device plugin's resource (capacity above 0) goes
through the device manager ("Allocate failed due to no healthy devices present; cannot
allocate unhealthy devices R, which is unexpected" when allocatable is 0, "... requested
number of devices unavailable for R. Requested: N, Available: A ..." when the running pods
hold the rest; reason `UnexpectedAdmissionError`), an unregistered one (capacity 0) through
the predicate check (`OutOfR`, "Node didn't have enough resource: R, requested: N, used: U,
capacity: C"), and a resource the node does not list at all is ignored, as the kubelet does.
A rejected pod is Failed with message "Pod was rejected: " + the reason's text, and gets a
Warning event with that reason. cpu, memory and pod count are left to the scheduler.
`nvidia-smi -L`: a pod with `restartPolicy: Never` whose every container runs `nvidia-smi
-L` (as command and args, or inside a shell line) runs to completion instead of running
forever, and the kubelet keeps
what it printed for `GET pods/NAME/log` (`container_log`). The container sees every GPU of
the node with `NVIDIA_VISIBLE_DEVICES=all` (indexed as on the host), otherwise the first
GPUs the device plugin calls healthy, as many as it requests (numbered from 0, as in a
container). A GPU that fell off the bus (last Xid 79 in `hardware.gpu_state`) is not listed:
"Unable to determine the device handle for GPU BUS: GPU is lost.  Reboot the system to
recover this GPU", exit code 15. Without a loaded driver (the node expects the GPU
Operator's driver pod, `nvidia.com/gpu.deploy.driver=true`, and none is Running and Ready)
it prints "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.
..." and exits 9. Exit 0 makes the pod Succeeded, anything else Failed.

It starts, rejects and stops pods bound to a node; it must never bind one (the scheduler's
business) nor replace one (the controllers').
"""

from __future__ import annotations

import copy
import hashlib
import re
import threading
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Mapping
from datetime import datetime

from bot.kube_objects import (
    container_requests,
    labels_of,
    name_of,
    namespace_of,
    pod_ready,
    pod_requests,
    quantity,
    spec_of,
    status_of,
)
from gpusim.defaulting import pod_qos
from gpusim.hardware import XID_FELL_OFF_BUS, gpu_count, gpu_state
from gpusim.metrics import gpu_uuid, model_name, pci_bus_id
from gpusim.objects import (
    DRIVER_APP,
    GPU_OPERATOR_NS,
    GPU_RESOURCE,
    Json,
    ts,
)
from gpusim.reading import (
    condition_of,
    list_all,
    node_ready,
    phase_of,
    terminating,
    uid_of,
)
from gpusim.recording import EventRecorder
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState

_POD_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady")


NVIDIA_SMI_NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)


_NVIDIA_SMI_LIST = re.compile(r"(?:^|[\s;&|(/])nvidia-smi\s+(?:-L|--list-gpus)(?=$|[\s;&|)])")


_SMI_DRIVER_NOT_LOADED = 9


_SMI_NOT_FOUND = 6


_SMI_GPU_LOST = 15


_PODS = BY_KIND["Pod"]


_NODES = BY_KIND["Node"]


class RecentUids:
    """A bounded set of uids already acted on (oldest forgotten first)."""

    def __init__(self, capacity: int = 200_000) -> None:
        self._items: OrderedDict[str, None] = OrderedDict()
        self._capacity = capacity

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def add(self, key: str) -> None:
        self._items[key] = None
        self._items.move_to_end(key)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)


class Kubelet:
    """The kubelets of every node of a ClusterState. It owns the uids of the pods whose
    containers it has stopped, so each stop is told (a `Killing` event) once."""

    def __init__(self, store: ClusterState, events: EventRecorder) -> None:
        self.store = store
        self._events = events
        self._killed = RecentUids()

    def killing(self, pod: Json, now: datetime) -> list[str]:
        uid, node = uid_of(pod), spec_of(pod).get("nodeName")
        if not node or phase_of(pod) != "Running" or uid in self._killed:
            return []
        self._killed.add(uid)
        for container in spec_of(pod).get("containers") or []:
            name = str(container.get("name", ""))
            self._events.emit(
                pod,
                "Normal",
                "Killing",
                f"Stopping container {name}",
                now,
                component="kubelet",
                host=str(node),
                field_path=f"spec.containers{{{name}}}",
            )
        return [f"{namespace_of(pod)}/{name_of(pod)}: kubelet on {node} stops its containers"]

    def start_pods(self, pods: list[Json], now: datetime) -> list[str]:
        nodes = {name_of(n): n for n in list_all(self.store, _NODES)}
        admitted: dict[str, list[Json]] = defaultdict(list)
        for pod in pods:
            if spec_of(pod).get("nodeName") and phase_of(pod) == "Running":
                admitted[str(spec_of(pod)["nodeName"])].append(pod)
        changes: list[str] = []
        for pod in pods:
            node = nodes.get(str(spec_of(pod).get("nodeName") or ""))
            if node is None or phase_of(pod) != "Pending" or terminating(pod):
                continue
            if node_ready(node) != "True":
                continue
            where = f"{namespace_of(pod)}/{name_of(pod)}"
            body = copy.deepcopy(pod)
            rejection = _admission_failure(pod, node, admitted[name_of(node)])
            if rejection is not None:
                reason, message = rejection
                body["status"] = _rejected_status(pod, reason, message)
                if self._write_status(body):
                    self._events.emit(
                        body,
                        "Warning",
                        reason,
                        message,
                        now,
                        component="kubelet",
                        host=name_of(node),
                    )
                    changes.append(f"{where} rejected by the kubelet on {name_of(node)}: {reason}")
                continue
            if _runs_to_completion(pod):
                exits = {}
                for container in spec_of(pod).get("containers") or []:
                    code, output = _nvidia_smi(self.store, container, node)
                    exits[str(container.get("name", ""))] = code
                    _keep_log(self.store, pod, str(container.get("name", "")), output)
                body["status"] = _finished_status(pod, node, now, exits)
                if self._write_status(body):
                    changes.append(
                        f"{where} ran nvidia-smi -L on {name_of(node)}: {body['status']['phase']}"
                    )
                continue
            body["status"] = _running_status(pod, node, now)
            if self._write_status(body):
                admitted[name_of(node)].append(body)
                changes.append(f"{where} running on {name_of(node)}")
        return changes

    def _write_status(self, pod: Json) -> bool:
        try:
            self.store.replace(_PODS, namespace_of(pod), name_of(pod), pod)
        except ApiError:
            return False
        return True


def _pod_ip(pod: Json, now: datetime) -> str:
    raw = hashlib.sha256(f"{namespace_of(pod)}/{name_of(pod)}/{ts(now)}".encode()).digest()
    return f"10.{raw[0] % 64 + 128}.{raw[1]}.{raw[2] % 250 + 2}"


def _node_ip(node: Json) -> str:
    for address in status_of(node).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address", ""))
    return ""


def _running_status(pod: Json, node: Json, now: datetime) -> Json:
    """What the kubelet reports once the pod's containers run."""
    spec, old = spec_of(pod), status_of(pod)
    moment = ts(now)
    scheduled = condition_of(pod, "PodScheduled") or {}
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": moment}
        for kind in _POD_CONDITIONS
    ]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": scheduled.get("lastTransitionTime") or moment,
        }
    )
    host_ip, pod_ip = _node_ip(node), _pod_ip(pod, now)
    status: Json = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}] if host_ip else [],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": moment,
        "containerStatuses": [
            _container_status(pod, c, {"running": {"startedAt": moment}}, now)
            for c in spec.get("containers") or []
        ],
        "qosClass": old.get("qosClass") or pod_qos(pod),
    }
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [
            _container_status(
                pod,
                c,
                {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": moment,
                        "finishedAt": moment,
                    }
                },
                now,
                ready=False,
            )
            for c in spec["initContainers"]
        ]
    return status


def _container_status(
    pod: Json, container: Json, state: Json, now: datetime, ready: bool = True
) -> Json:
    name, image = str(container.get("name", "")), str(container.get("image", ""))
    return {
        "name": name,
        "image": image,
        "imageID": f"{image.split(':')[0]}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
        "containerID": "containerd://"
        + hashlib.sha256(f"{uid_of(pod)}/{name}/{ts(now)}".encode()).hexdigest(),
        "ready": ready,
        "started": ready,
        "restartCount": 0,
        "state": state,
        "lastState": {},
    }


def _extended(resource: str) -> bool:
    return "/" in resource and not resource.startswith("kubernetes.io/")


def _admission_failure(pod: Json, node: Json, admitted: list[Json]) -> tuple[str, str] | None:
    """(reason, message) when the kubelet would reject `pod`, given the pods it already runs.

    The device manager's admit handler runs before the predicate check: a resource a device
    plugin registered (capacity above 0) fails there (`UnexpectedAdmissionError`), an
    unregistered one (capacity 0) in the predicate check (`OutOf<resource>`); a resource the
    node does not list is dropped from the request first (removeMissingExtendedResources)."""
    requests = {r: n for r, n in pod_requests(pod).items() if _extended(r)}
    if not requests:
        return None
    status = status_of(node)
    capacity = status.get("capacity") or {}
    allocatable = status.get("allocatable") or {}
    used: dict[str, int] = defaultdict(int)
    for other in admitted:
        for resource, amount in pod_requests(other).items():
            used[resource] += amount
    for resource in sorted(requests):
        if resource not in capacity and resource not in allocatable:
            continue
        wanted = requests[resource]
        offered = quantity(allocatable.get(resource, 0))
        if quantity(capacity.get(resource, 0)) > 0:
            if offered == 0:
                return "UnexpectedAdmissionError", (
                    "Allocate failed due to no healthy devices present; cannot allocate "
                    f"unhealthy devices {resource}, which is unexpected"
                )
            free = max(0, offered - used[resource])
            if wanted > free:
                return "UnexpectedAdmissionError", (
                    f"Allocate failed due to requested number of devices unavailable for "
                    f"{resource}. Requested: {wanted}, Available: {free}, which is unexpected"
                )
        elif wanted > offered - used[resource]:
            return f"OutOf{resource}", (
                f"Node didn't have enough resource: {resource}, requested: {wanted}, "
                f"used: {used[resource]}, capacity: {offered}"
            )
    return None


def _rejected_status(pod: Json, reason: str, message: str) -> Json:
    """kubelet.rejectPod: Failed, with the admission failure as reason and message."""
    status: Json = {
        "phase": "Failed",
        "reason": reason,
        "message": f"Pod was rejected: {message}",
        "qosClass": status_of(pod).get("qosClass") or pod_qos(pod),
    }
    if status_of(pod).get("conditions"):
        status["conditions"] = copy.deepcopy(status_of(pod)["conditions"])
    return status


def _runs_to_completion(pod: Json) -> bool:
    """A `restartPolicy: Never` pod whose every container runs `nvidia-smi -L`."""
    spec = spec_of(pod)
    containers = spec.get("containers") or []
    if spec.get("restartPolicy") != "Never" or not containers or spec.get("initContainers"):
        return False
    return all(_NVIDIA_SMI_LIST.search(" ".join(_argv(c))) for c in containers)


def _argv(container: Json) -> list[str]:
    return [str(a) for a in [*(container.get("command") or []), *(container.get("args") or [])]]


def _driver_loaded(store: ClusterState, node: Json) -> bool:
    """A driver the GPU Operator deploys is loaded while its pod is Running and Ready; a node
    without `nvidia.com/gpu.deploy.driver=true` has its driver on the host."""
    if labels_of(node).get("nvidia.com/gpu.deploy.driver") != "true":
        return True
    drivers, _ = store.list(
        _PODS, GPU_OPERATOR_NS, f"app={DRIVER_APP}", f"spec.nodeName={name_of(node)}"
    )
    return any(pod_ready(p) and not terminating(p) for p in drivers)


def _visible_gpus(store: ClusterState, container: Json, node: Json) -> list[int]:
    """Host indices of the GPUs the container runtime hands the container."""
    count = gpu_count(node)
    env = {
        str(e.get("name")): str(e.get("value") or "")
        for e in container.get("env") or []
        if isinstance(e, dict)
    }
    wanted = env.get("NVIDIA_VISIBLE_DEVICES")
    if wanted == "all":
        return list(range(count))
    if wanted in ("none", "void"):
        return []
    requested = container_requests(container).get(GPU_RESOURCE, 0)
    states = gpu_state(store).get(name_of(node), {})
    healthy = [i for i in range(count) if states.get(i, {}).get("healthy", True)]
    return healthy[:requested]


def _nvidia_smi(store: ClusterState, container: Json, node: Json) -> tuple[int, str]:
    """`nvidia-smi -L` in `container` on `node`: its exit code and what it printed."""
    if not _driver_loaded(store, node):
        return _SMI_DRIVER_NOT_LOADED, NVIDIA_SMI_NO_DRIVER + "\n"
    visible = _visible_gpus(store, container, node)
    if not visible:
        return _SMI_NOT_FOUND, "No devices found.\n"
    name = name_of(node)
    model = model_name(labels_of(node).get("nvidia.com/gpu.product", ""))
    states = gpu_state(store).get(name, {})
    code, lines = 0, []
    for index, host_index in enumerate(visible):
        if states.get(host_index, {}).get("xid") == XID_FELL_OFF_BUS:
            code = _SMI_GPU_LOST
            lines.append(
                f"Unable to determine the device handle for GPU {pci_bus_id(host_index)[4:]}: "
                "GPU is lost.  Reboot the system to recover this GPU"
            )
        else:
            lines.append(f"GPU {index}: {model} (UUID: {gpu_uuid(name, host_index)})")
    return code, "\n".join(lines) + "\n"


def _finished_status(pod: Json, node: Json, now: datetime, exits: Mapping[str, int]) -> Json:
    """What the kubelet reports once every container of a `restartPolicy: Never` pod exited."""
    status = _running_status(pod, node, now)
    phase = "Succeeded" if all(code == 0 for code in exits.values()) else "Failed"
    ended = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    moment = ts(now)
    for condition in status["conditions"]:
        kind = condition["type"]
        if kind == "PodReadyToStartContainers":
            condition["status"] = "False"
        elif kind in ("Ready", "ContainersReady"):
            condition.update(status="False", reason=ended)
        elif kind == "Initialized" and phase == "Succeeded":
            condition["reason"] = ended
    for container_status in status["containerStatuses"]:
        code = exits.get(container_status["name"], 0)
        container_status.update(ready=False, started=False)
        container_status["state"] = {
            "terminated": {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": moment,
                "finishedAt": moment,
                "containerID": container_status["containerID"],
            }
        }
    status["phase"] = phase
    return status


_LOGS: weakref.WeakKeyDictionary[ClusterState, dict[tuple[str, str], str]] = (
    weakref.WeakKeyDictionary()
)


_LOGS_LOCK = threading.Lock()


def _keep_log(store: ClusterState, pod: Json, container: str, output: str) -> None:
    with _LOGS_LOCK:
        _LOGS.setdefault(store, {})[(uid_of(pod), container)] = output


def forget_logs(store: ClusterState, uids: set[str]) -> None:
    if not uids:
        return
    with _LOGS_LOCK:
        logs = _LOGS.get(store, {})
        for key in [k for k in logs if k[0] in uids]:
            del logs[key]


def container_log(store: ClusterState, pod: Json, container: str) -> str | None:
    """What `container` of `pod` printed, as the simulated kubelet kept it; None when it kept
    nothing (it runs no program of that pod). Kept by pod uid, as container logs live with the
    pod on its node: a new pod of the same name starts without, and a deleted pod's go."""
    with _LOGS_LOCK:
        return _LOGS.get(store, {}).get((uid_of(pod), container))
