"""Server-side printers of the cluster's own kinds: Node, Event, Namespace and Lease, each a
transcription of its `print*` function in pkg/printers/internalversion/printers.go (the pod's,
the longest, is `gpusim.pod_printer`).

A node's STATUS (`Ready,SchedulingDisabled`) and an event's LAST SEEN are what a person reads
in `kubectl get`, so they are computed here as the server computes them. Pure functions of the
object and the time: they must never read the cluster.
"""

from __future__ import annotations

from datetime import datetime

from bot.kube_objects import labels_of, meta, name_of, spec_of, status_of
from gpusim.objects import Json
from gpusim.table_cells import AGE, NAME, Cell, Printer, column, parse_time, since

_NODE_COLUMNS = [
    NAME,
    column("Status", "The status of the node"),
    column("Roles", "The roles of the node"),
    AGE,
    column("Version", "Kubelet Version reported by the node."),
    column("Internal-IP", "List of addresses reachable to the node.", priority=1),
    column("External-IP", "List of addresses reachable to the node.", priority=1),
    column("OS-Image", "OS Image reported by the node from /etc/os-release.", priority=1),
    column("Kernel-Version", "Kernel Version reported by the node.", priority=1),
    column("Container-Runtime", "ContainerRuntime Version reported by the node.", priority=1),
]


def _node(node: Json, now: datetime) -> list[Cell]:
    status = status_of(node)
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    words = []
    if ready is not None:
        words.append("Ready" if ready.get("status") == "True" else "NotReady")
    if not words:
        words.append("Unknown")
    if spec_of(node).get("unschedulable"):
        words.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in labels_of(node).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}

    def address(kind: str) -> str:
        for entry in status.get("addresses") or []:
            if entry.get("type") == kind:
                return str(entry.get("address", ""))
        return "<none>"

    return [
        name_of(node),
        ",".join(words),
        ",".join(sorted(roles)) or "<none>",
        since(meta(node).get("creationTimestamp"), now),
        str(info.get("kubeletVersion", "")),
        address("InternalIP"),
        address("ExternalIP"),
        str(info.get("osImage") or "<unknown>"),
        str(info.get("kernelVersion") or "<unknown>"),
        str(info.get("containerRuntimeVersion") or "<unknown>"),
    ]


_EVENT_COLUMNS = [
    column("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
    column("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    column(
        "Reason",
        "This should be a short, machine understandable string that gives the "
        "reason for the transition into the object's current status.",
    ),
    column("Object", "The object that this event is about."),
    column(
        "Subobject",
        "If referring to a piece of an object instead of an entire object, "
        "this string should contain a valid JSON/Go field access statement.",
        priority=1,
    ),
    column(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
        priority=1,
    ),
    column("Message", "A human-readable description of the status of this operation."),
    column(
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        priority=1,
    ),
    column("Count", "The number of times this event has occurred.", priority=1),
    {**column("Name", "Name must be unique within a namespace."), "priority": 1},
]


def _event(event: Json, now: datetime) -> list[Cell]:
    """printEvent (wide: the server generates every column)."""
    first = since(event.get("firstTimestamp"), now)
    if not parse_time(event.get("firstTimestamp")):
        first = since(event.get("eventTime"), now)
    last = since(event.get("lastTimestamp"), now)
    if not parse_time(event.get("lastTimestamp")):
        last = first
    count = int(event.get("count") or 0)
    series = event.get("series")
    if series:
        last = since(series.get("lastObservedTime"), now)
        count = int(series.get("count") or 0)
    elif count == 0:
        count = 1
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last,
        str(event.get("type", "")),
        str(event.get("reason", "")),
        target,
        str(involved.get("fieldPath", "")),
        f"{component}, {instance}" if instance else str(component),
        str(event.get("message", "")).strip(),
        first,
        count,
        name_of(event),
    ]


_LEASE_COLUMNS = [
    NAME,
    column("Holder", "holderIdentity contains the identity of the holder of a current lease."),
    AGE,
]


def _lease(lease: Json, now: datetime) -> list[Cell]:
    return [
        name_of(lease),
        str(spec_of(lease).get("holderIdentity") or ""),
        since(meta(lease).get("creationTimestamp"), now),
    ]


_NAMESPACE_COLUMNS = [NAME, column("Status", "The status of the namespace"), AGE]


def _namespace(namespace: Json, now: datetime) -> list[Cell]:
    return [
        name_of(namespace),
        str(status_of(namespace).get("phase", "")),
        since(meta(namespace).get("creationTimestamp"), now),
    ]


PRINTERS: dict[str, Printer] = {
    "Node": (_NODE_COLUMNS, _node),
    "Event": (_EVENT_COLUMNS, _event),
    "Lease": (_LEASE_COLUMNS, _lease),
    "Namespace": (_NAMESPACE_COLUMNS, _namespace),
}
