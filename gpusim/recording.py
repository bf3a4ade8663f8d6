"""Events as Kubernetes components record them, written through the simulated API.

`record_event` is client-go's core/v1 recorder as the kubelet, the node lifecycle controller
and the GPU Operator use it (name = OBJECT.<hex nanoseconds>, `count`, `firstTimestamp` /
`lastTimestamp`, `source`); `node_status_event` is the kubelet's recordNodeStatusEvent. It only
creates Events: it must never change the object an Event is about.

`EventRecorder` is the recorder of the simulated scheduler, kubelet and controllers: core/v1
events for the kubelet and the controllers, and for the scheduler the shape its events.k8s.io
recorder leaves when read as core/v1 (`eventTime`, `action`, `reportingComponent`, no
`source`, no counts).
"""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

from bot.kube_objects import meta, name_of, namespace_of
from gpusim.objects import DEFAULT_SCHEDULER, Json, ts
from gpusim.resources import BY_KIND, ApiError
from gpusim.state import ClusterState


def record_event(
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
    reference["uid"] = name if kubelet_node else meta(involved).get("uid", "")
    if kind != "Node":
        reference["resourceVersion"] = meta(involved).get("resourceVersion", "")
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


def node_status_event(store: ClusterState, node: Json, status: str, at: datetime) -> None:
    """kubelet's recordNodeStatusEvent: "Node N status is now: STATUS"."""
    record_event(
        store,
        node,
        status,
        f"Node {name_of(node)} status is now: {status}",
        at,
        component="kubelet",
        host=name_of(node),
    )


def micro(moment: datetime) -> str:
    """A MicroTime as the API prints it (events.k8s.io `eventTime`, `series.lastObservedTime`)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class EventRecorder:
    """Events of the simulated scheduler, kubelet and controllers. It owns a sequence, so two
    events recorded at the same instant get different names."""

    def __init__(
        self, store: ClusterState, scheduler_instance: str = "default-scheduler-control-plane"
    ) -> None:
        self.store = store
        self._scheduler_instance = scheduler_instance
        self._sequence = itertools.count()

    def emit(
        self,
        involved: Json,
        type_: str,
        reason: str,
        message: str,
        now: datetime,
        *,
        component: str = DEFAULT_SCHEDULER,
        host: str | None = None,
        action: str = "Scheduling",
        field_path: str | None = None,
    ) -> Json:
        namespace = namespace_of(involved) or "default"
        name = name_of(involved)
        nanos = int(now.timestamp() * 1e9) + next(self._sequence)
        reference: Json = {
            "apiVersion": involved.get("apiVersion", "v1"),
            "kind": involved.get("kind", "Pod"),
            "name": name,
            "namespace": namespace_of(involved),
            "uid": str(meta(involved).get("uid", "")),
        }
        if meta(involved).get("resourceVersion"):
            reference["resourceVersion"] = meta(involved)["resourceVersion"]
        if field_path:
            reference["fieldPath"] = field_path
        body: Json = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{nanos:x}", "namespace": namespace},
            "involvedObject": reference,
            "reason": reason,
            "message": message,
            "type": type_,
        }
        if component == DEFAULT_SCHEDULER:
            # events.k8s.io/v1 as the core/v1 API shows it: no source, count or timestamps.
            body.update(
                {
                    "action": action,
                    "eventTime": micro(now),
                    "firstTimestamp": None,
                    "lastTimestamp": None,
                    "reportingComponent": DEFAULT_SCHEDULER,
                    "reportingInstance": self._scheduler_instance,
                    "source": {},
                }
            )
        else:
            source: Json = {"component": component}
            if host:
                source["host"] = host
            body.update(
                {
                    "count": 1,
                    "eventTime": None,
                    "firstTimestamp": ts(now),
                    "lastTimestamp": ts(now),
                    "reportingComponent": component,
                    "reportingInstance": host or "",
                    "source": source,
                }
            )
        try:
            return self.store.create(BY_KIND["Event"], namespace, body)
        except ApiError:
            body["metadata"]["name"] = f"{name}.{uuid.uuid4().hex[:16]}"
            return self.store.create(BY_KIND["Event"], namespace, body)
