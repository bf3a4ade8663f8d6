"""What the watches keep of each object: the few fields their diffs read, as small immutable
records (msgspec Structs, not tracked by the cyclic GC) whose repeated strings (namespaces,
node and container names, label values, waiting reasons) are interned.

A 5,000-node, 100,000-pod cluster's caches held as the API's JSON shape, even trimmed, cost
about 5 KiB per pod (a dozen dicts each); these cost a tenth of it. Each record is built from
an object as its list page or watch event arrives, and the whole object is dropped then.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from bot.facts.pods import component_of
from bot.kube_objects import (
    Obj,
    labels_of,
    meta,
    name_of,
    namespace_of,
    spec_of,
    status_of,
)

MIG_PREFIX = "nvidia.com/mig-"
WATCHED_LABELS = (
    "nvidia.com/mig.config.state",
    "nvidia.com/cuda.driver-version.full",
    "nvidia.com/gpu-driver-upgrade-state",
)
"""The node labels whose every change is a signal, in the order NodeState.labels holds them."""


def _interned(value: Any) -> Any:
    return sys.intern(value) if type(value) is str else value


class NodeState(msgspec.Struct, frozen=True, gc=False):
    name: str
    uid: str
    resource_version: str
    ready: str
    """The Ready condition's status; "Unknown" when the node has none."""
    gpus: tuple[tuple[str, str], ...]
    """Allocatable GPUs as the API writes them: whole ones and each MIG profile."""
    boot_id: str | None
    labels: tuple[str | None, ...]
    """The values of WATCHED_LABELS, None where the label is absent."""
    cordoned: bool


class ContainerState(msgspec.Struct, frozen=True, gc=False):
    name: str
    restarts: int
    waiting: str | None
    """Why the container waits (CrashLoopBackOff...), None when it does not."""


class PodState(msgspec.Struct, frozen=True, gc=False):
    namespace: str
    name: str
    uid: str
    resource_version: str
    node: str | None
    app: str | None
    requests_gpu: bool
    relevant: bool
    """A GPU component, a pod in a GPU namespace, or one asking for GPUs: the cache keeps it."""
    containers: tuple[ContainerState, ...]
    """Init containers' statuses, then the containers'."""


class EventState(msgspec.Struct, frozen=True, gc=False):
    uid: str
    resource_version: str
    reason: str | None
    involved: tuple[str, str]
    """The namespace and name of the object the event is about."""
    message: str
    """The first 500 characters: all a signal carries."""


def _version(obj: Obj) -> tuple[str, str]:
    metadata = meta(obj)
    return str(metadata.get("uid", "")), str(metadata.get("resourceVersion", ""))


def requests_gpu(pod: Obj) -> bool:
    for container in spec_of(pod).get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        if any(k.startswith("nvidia.com/") for k in wanted):
            return True
    return False


def node_state(node: Obj, gpu_resource: str = "nvidia.com/gpu") -> NodeState:
    status = status_of(node)
    ready = "Unknown"
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            ready = str(condition.get("status"))
            break
    allocatable = status.get("allocatable") or {}
    labels = labels_of(node)
    uid, version = _version(node)
    return NodeState(
        name=name_of(node),
        uid=uid,
        resource_version=version,
        ready=sys.intern(ready),
        gpus=tuple(
            (sys.intern(str(key)), sys.intern(str(value)))
            for key, value in allocatable.items()
            if key == gpu_resource or str(key).startswith(MIG_PREFIX)
        ),
        boot_id=(status.get("nodeInfo") or {}).get("bootID"),
        labels=tuple(_interned(labels.get(label)) for label in WATCHED_LABELS),
        cordoned=bool(spec_of(node).get("unschedulable")),
    )


def _containers(pod: Obj) -> tuple[ContainerState, ...]:
    status = status_of(pod)
    return tuple(
        ContainerState(
            name=sys.intern(str(s.get("name"))),
            restarts=int(s.get("restartCount") or 0),
            waiting=_interned(((s.get("state") or {}).get("waiting") or {}).get("reason")),
        )
        for s in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
    )


def pod_state(pod: Obj, operator_namespaces: tuple[str, ...] = ("gpu-operator",)) -> PodState:
    namespace = sys.intern(namespace_of(pod))
    gpu = requests_gpu(pod)
    uid, version = _version(pod)
    return PodState(
        namespace=namespace,
        name=name_of(pod),
        uid=uid,
        resource_version=version,
        node=_interned(spec_of(pod).get("nodeName")),
        app=_interned(labels_of(pod).get("app")),
        requests_gpu=gpu,
        # GPU components are recognised by what they are, in any namespace.
        relevant=gpu or namespace in operator_namespaces or component_of(pod) is not None,
        containers=_containers(pod),
    )


def event_state(event: Obj) -> EventState:
    involved = event.get("involvedObject") or {}
    uid, version = _version(event)
    return EventState(
        uid=uid,
        resource_version=version,
        reason=_interned(event.get("reason")),
        involved=(str(involved.get("namespace", "")), str(involved.get("name", ""))),
        message=str(event.get("message", ""))[:500],
    )
