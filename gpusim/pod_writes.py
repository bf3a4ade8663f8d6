"""How the simulated controllers write: pods created and deleted through the API with the
Events the real controllers record, and a workload's status written only when it changed.

The Job, ReplicaSet and DaemonSet controllers write the same way (a `SuccessfulCreate` or
`SuccessfulDelete` Event naming the controller, the server's pod defaults applied, a status
update that leaves `omitempty` zeros out), so that is written once, here, and a watcher or
`kubectl describe` sees what the real controller-manager shows.

It must never decide what to create, delete or report (the controllers do), nor write around
`ClusterState`'s API.
"""

from __future__ import annotations

import copy
from datetime import datetime

from bot.kube_objects import name_of, namespace_of, status_of
from gpusim.defaulting import pod_on_create
from gpusim.known_pods import KnownPods
from gpusim.objects import Json
from gpusim.recording import EventRecorder
from gpusim.resources import BY_KIND, ApiError, ResourceType
from gpusim.state import ClusterState

_OMIT_EMPTY = frozenset(
    {
        "numberAvailable",
        "numberUnavailable",
        "updatedNumberScheduled",
        "readyReplicas",
        "availableReplicas",
        "fullyLabeledReplicas",
    }
)
"""Status fields the API leaves out when 0 (`omitempty`)."""

_PODS = BY_KIND["Pod"]


class PodWrites:
    """The controllers' writes to the cluster. It owns nothing of its own: it writes through
    the store, records through the event recorder, and tells `KnownPods` of each pod it
    creates; it must never decide what a controller wants."""

    def __init__(self, store: ClusterState, events: EventRecorder, known: KnownPods) -> None:
        self.store = store
        self._events = events
        self._known = known

    def create_pod(self, namespace: str, body: Json, owner: Json, now: datetime) -> Json:
        # Through the API, as the real controllers create pods: the server's defaults apply.
        created = self.store.create(_PODS, namespace, pod_on_create(body))
        self._known.remember(created)
        component = {
            "Job": "job-controller",
            "ReplicaSet": "replicaset-controller",
            "DaemonSet": "daemonset-controller",
        }.get(str(owner.get("kind")), "controller-manager")
        self._events.emit(
            {
                "apiVersion": owner.get("apiVersion", "apps/v1"),
                "kind": owner.get("kind", ""),
                "metadata": {
                    "name": owner.get("name", ""),
                    "namespace": namespace,
                    "uid": owner.get("uid", ""),
                },
            },
            "Normal",
            "SuccessfulCreate",
            f"Created pod: {name_of(created)}",
            now,
            component=component,
        )
        return created

    def delete_pod(self, pod: Json, owner: Json, now: datetime) -> None:
        try:
            self.store.delete(_PODS, namespace_of(pod), name_of(pod))
        except ApiError:
            return
        self._events.emit(
            owner,
            "Normal",
            "SuccessfulDelete",
            f"Deleted pod: {name_of(pod)}",
            now,
            component="daemonset-controller"
            if owner.get("kind") == "DaemonSet"
            else "replicaset-controller",
        )

    def update_status(self, resource: ResourceType, obj: Json, wanted: Json) -> bool:
        """Write `status` only when a field differs (an omitted omitempty field counts as 0)."""
        current = status_of(obj)
        if all(current.get(k, 0 if k in _OMIT_EMPTY else None) == v for k, v in wanted.items()):
            return False
        body = copy.deepcopy(obj)
        body["status"] = {**current, **wanted}
        for key in _OMIT_EMPTY:
            if body["status"].get(key) == 0:
                del body["status"][key]
        try:
            self.store.replace(resource, namespace_of(obj), name_of(obj), body)
        except ApiError:
            return False
        return True
