"""Server-side printing: the `Table` kube-apiserver answers when kubectl asks for one.

kubectl's `get` sends `Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...` and prints
the columns and cells the server computed, so what a person sees of a node (`Ready,
SchedulingDisabled`), a pod (`CrashLoopBackOff`, `Init:0/1`, `Terminating`, `3 (5m ago)`) or an
event (`LAST SEEN`) is the server's doing. Columns and cells follow
pkg/printers/internalversion/printers.go (`AddHandlers` and the `print*` functions) for the
kinds the simulator serves; the server always generates the wide columns (priority 1) and
kubectl shows them only with `-o wide` (the table convertor in
pkg/registry/*/storage calls the generator with `Wide: true`). Ages are
apimachinery's `duration.HumanDuration` of the time since the timestamp, at the moment of the
request. Each row carries the object as `includeObject` asks: `PartialObjectMetadata` by
default (what kubectl reads the NAMESPACE column and `--show-labels` from), the whole object,
or none. Kinds without a printer get the default convertor's NAME and CREATED AT.

Pure functions of the objects they are given and the time: they must never read the cluster.

Over 600 lines because it holds one printer per kind, each a transcription of its function in
printers.go; they share the age and status helpers and nothing else, so splitting them by
kind would only move the helpers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from bot.kube_objects import labels_of, meta, name_of, spec_of, status_of
from gpusim.objects import Json

Cell = str | int | bool | None


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def _parse(stamp: Any) -> datetime | None:
    if not stamp:
        return None
    text = str(stamp).replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def since(stamp: Any, now: datetime) -> str:
    """translateTimestampSince: `<unknown>` for a zero time."""
    parsed = _parse(stamp)
    if parsed is None:
        return "<unknown>"
    return human_duration((now - parsed).total_seconds())


def _column(name: str, description: str, kind: str = "string", priority: int = 0) -> Json:
    column: Json = {"name": name, "type": kind, "format": "", "description": description}
    if name == "Name":
        column["format"] = "name"
    column["priority"] = priority
    return column


_NAME = _column("Name", "Name must be unique within a namespace.")
_AGE = _column(
    "Age",
    "CreationTimestamp is a timestamp representing the server time when this object was created.",
)
_CONTAINERS = _column("Containers", "Names of each container in the template.", priority=1)
_IMAGES = _column("Images", "Images referenced by each container in the template.", priority=1)
_SELECTOR = _column("Selector", "A label selector.", priority=1)


def _containers(template_spec: Mapping[str, Any]) -> tuple[str, str]:
    """layoutContainerCells."""
    containers = template_spec.get("containers") or []
    return (
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
    )


def format_labels(labels: Mapping[str, str] | None) -> str:
    """labels.FormatLabels: sorted `k=v` joined by commas, `<none>` when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_selector(selector: Mapping[str, Any] | None) -> str:
    """metav1.FormatLabelSelector."""
    if selector is None:
        return "<none>"
    parts: list[str] = []
    for key, value in sorted((selector.get("matchLabels") or {}).items()):
        parts.append(f"{key}={value}")
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = sorted(expression.get("values") or [])
        if operator == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif operator == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif operator == "Exists":
            parts.append(key)
        elif operator == "DoesNotExist":
            parts.append(f"!{key}")
    text = ",".join(parts)
    return text if text else "<none>"


# ---- nodes --------------------------------------------------------------------------------

_NODE_COLUMNS = [
    _NAME,
    _column("Status", "The status of the node"),
    _column("Roles", "The roles of the node"),
    _AGE,
    _column("Version", "Kubelet Version reported by the node."),
    _column("Internal-IP", "List of addresses reachable to the node.", priority=1),
    _column("External-IP", "List of addresses reachable to the node.", priority=1),
    _column("OS-Image", "OS Image reported by the node from /etc/os-release.", priority=1),
    _column("Kernel-Version", "Kernel Version reported by the node.", priority=1),
    _column("Container-Runtime", "ContainerRuntime Version reported by the node.", priority=1),
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


# ---- pods ---------------------------------------------------------------------------------

_POD_COLUMNS = [
    _NAME,
    _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "The aggregate status of the containers in this pod."),
    _column(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    _AGE,
    _column("IP", "podIP address allocated to the pod.", priority=1),
    _column("Node", "NodeName indicates in which node this pod is scheduled.", priority=1),
    _column("Nominated Node", "nominatedNodeName is set when this pod preempts.", priority=1),
    _column("Readiness Gates", "If specified, all readiness gates will be evaluated.", priority=1),
]


def _restartable(container: Mapping[str, Any] | None) -> bool:
    return bool(container) and container.get("restartPolicy") == "Always"  # type: ignore[union-attr]


def _condition_true(conditions: list[Json], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _pod(pod: Json, now: datetime) -> list[Cell]:
    """printPod."""
    spec, status = spec_of(pod), status_of(pod)
    conditions = status.get("conditions") or []
    restarts = 0
    restartable_restarts = 0
    total = len(spec.get("containers") or [])
    ready = 0
    last_restart: datetime | None = None
    last_restartable: datetime | None = None
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    for condition in conditions:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {str(c.get("name")): c for c in spec.get("initContainers") or []}
    total += sum(1 for c in init_specs.values() if _restartable(c))
    init_statuses = status.get("initContainerStatuses") or []
    initializing = False

    def finished_at(container: Json) -> datetime | None:
        return _parse(
            ((container.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        )

    for index, container in enumerate(init_statuses):
        restarts += int(container.get("restartCount") or 0)
        finished = finished_at(container)
        if finished and (last_restart is None or finished > last_restart):
            last_restart = finished
        restartable = _restartable(init_specs.get(str(container.get("name"))))
        if restartable:
            restartable_restarts += int(container.get("restartCount") or 0)
            if finished and (last_restartable is None or finished > last_restartable):
                last_restartable = finished
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if restartable and container.get("started"):
            if container.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            if not terminated.get("reason"):
                if terminated.get("signal"):
                    reason = f"Init:Signal:{terminated['signal']}"
                else:
                    reason = f"Init:ExitCode:{terminated.get('exitCode', 0)}"
            else:
                reason = "Init:" + str(terminated["reason"])
        elif waiting and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = "Init:" + str(waiting["reason"])
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or _condition_true(conditions, "Initialized"):
        restarts = restartable_restarts
        last_restart = last_restartable
        has_running = False
        for container in reversed(status.get("containerStatuses") or []):
            restarts += int(container.get("restartCount") or 0)
            finished = finished_at(container)
            if finished and (last_restart is None or finished > last_restart):
                last_restart = finished
            state = container.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif terminated is not None:
                if terminated.get("signal"):
                    reason = f"Signal:{terminated['signal']}"
                else:
                    reason = f"ExitCode:{terminated.get('exitCode', 0)}"
            elif container.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"
    deleting = bool(meta(pod).get("deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    # Convert_v1_PodStatus_To_core_PodStatus: podIP is authoritative, and stands in for an
    # empty podIPs, before the printer reads PodIPs[0].
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        true = sum(
            1 for gate in gates if _condition_true(conditions, str(gate.get("conditionType")))
        )
        gates_cell = f"{true}/{len(gates)}"
    return [
        name_of(pod),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        since(meta(pod).get("creationTimestamp"), now),
        str(status.get("podIP") or (ips[0].get("ip") if ips else "") or "<none>"),
        str(spec.get("nodeName") or "<none>"),
        str(status.get("nominatedNodeName") or "<none>"),
        gates_cell,
    ]


# ---- events -------------------------------------------------------------------------------

_EVENT_COLUMNS = [
    _column(
        "Last Seen", "The time at which the most recent occurrence of this event was recorded."
    ),
    _column("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    _column(
        "Reason",
        "This should be a short, machine understandable string that gives the "
        "reason for the transition into the object's current status.",
    ),
    _column("Object", "The object that this event is about."),
    _column(
        "Subobject",
        "If referring to a piece of an object instead of an entire object, "
        "this string should contain a valid JSON/Go field access statement.",
        priority=1,
    ),
    _column(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
        priority=1,
    ),
    _column("Message", "A human-readable description of the status of this operation."),
    _column(
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        priority=1,
    ),
    _column("Count", "The number of times this event has occurred.", priority=1),
    {**_column("Name", "Name must be unique within a namespace."), "priority": 1},
]


def _event(event: Json, now: datetime) -> list[Cell]:
    """printEvent (wide: the server generates every column)."""
    first = since(event.get("firstTimestamp"), now)
    if not _parse(event.get("firstTimestamp")):
        first = since(event.get("eventTime"), now)
    last = since(event.get("lastTimestamp"), now)
    if not _parse(event.get("lastTimestamp")):
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


# ---- the workload kinds and the rest ------------------------------------------------------

_PDB_COLUMNS = [
    _NAME,
    _column("Min Available", "The minimum number of pods that must be available."),
    _column("Max Unavailable", "The maximum number of pods that may be unavailable."),
    _column(
        "Allowed Disruptions",
        "Calculated number of pods that may be disrupted at this time.",
        "integer",
    ),
    _AGE,
]


def _pdb(pdb: Json, now: datetime) -> list[Cell]:
    spec = spec_of(pdb)
    minimum, maximum = spec.get("minAvailable"), spec.get("maxUnavailable")
    return [
        name_of(pdb),
        "N/A" if minimum is None else str(minimum),
        "N/A" if maximum is None else str(maximum),
        int(status_of(pdb).get("disruptionsAllowed") or 0),
        since(meta(pdb).get("creationTimestamp"), now),
    ]


_DAEMONSET_COLUMNS = [
    _NAME,
    _column(
        "Desired", "The total number of nodes that should be running the daemon pod.", "integer"
    ),
    _column("Current", "The number of nodes that are running at least 1 daemon pod.", "integer"),
    _column(
        "Ready",
        "The number of nodes that should be running the daemon pod and have one "
        "or more of the daemon pod running and ready.",
        "integer",
    ),
    _column(
        "Up-to-date", "The total number of nodes that are running updated daemon pod", "integer"
    ),
    _column(
        "Available",
        "The number of nodes that should be running the daemon pod and have "
        "one or more of the daemon pod running and available.",
        "integer",
    ),
    _column(
        "Node Selector",
        "NodeSelector is a selector which must be true for the pod to fit on a node.",
    ),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _SELECTOR,
]


def _template_spec(obj: Json) -> Json:
    return dict((spec_of(obj).get("template") or {}).get("spec") or {})


def _daemonset(ds: Json, now: datetime) -> list[Cell]:
    status = status_of(ds)
    names, images = _containers(_template_spec(ds))
    return [
        name_of(ds),
        int(status.get("desiredNumberScheduled") or 0),
        int(status.get("currentNumberScheduled") or 0),
        int(status.get("numberReady") or 0),
        int(status.get("updatedNumberScheduled") or 0),
        int(status.get("numberAvailable") or 0),
        format_labels(_template_spec(ds).get("nodeSelector")),
        since(meta(ds).get("creationTimestamp"), now),
        names,
        images,
        format_selector(spec_of(ds).get("selector")),
    ]


_REPLICASET_COLUMNS = [
    _NAME,
    _column("Desired", "Replicas is the number of desired pods.", "integer"),
    _column("Current", "Replicas is the most recently observed number of replicas.", "integer"),
    _column("Ready", "The number of ready replicas for this replica set.", "integer"),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _SELECTOR,
]


def _replicaset(rs: Json, now: datetime) -> list[Cell]:
    status = status_of(rs)
    names, images = _containers(_template_spec(rs))
    return [
        name_of(rs),
        int(spec_of(rs).get("replicas", 1)),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
        since(meta(rs).get("creationTimestamp"), now),
        names,
        images,
        format_selector(spec_of(rs).get("selector")),
    ]


_DEPLOYMENT_COLUMNS = [
    _NAME,
    _column("Ready", "Number of the pod with ready state"),
    _column(
        "Up-to-date",
        "Total number of non-terminated pods targeted by this deployment "
        "that have the desired template spec.",
    ),
    _column(
        "Available",
        "Total number of available pods (ready for at least minReadySeconds) "
        "targeted by this deployment.",
    ),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _SELECTOR,
]


def _deployment(deployment: Json, now: datetime) -> list[Cell]:
    status = status_of(deployment)
    names, images = _containers(_template_spec(deployment))
    return [
        name_of(deployment),
        f"{int(status.get('readyReplicas') or 0)}/{int(spec_of(deployment).get('replicas', 1))}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        since(meta(deployment).get("creationTimestamp"), now),
        names,
        images,
        format_selector(spec_of(deployment).get("selector")),
    ]


_JOB_COLUMNS = [
    _NAME,
    _column("Status", "Status of the job."),
    _column("Completions", "The number of pods which reached phase Succeeded."),
    _column("Duration", "Time required to complete the job."),
    _AGE,
    _CONTAINERS,
    _IMAGES,
    _SELECTOR,
]


def _job(job: Json, now: datetime) -> list[Cell]:
    """printJob."""
    spec, status = spec_of(job), status_of(job)
    succeeded = int(status.get("succeeded") or 0)
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    else:
        parallelism = int(spec.get("parallelism") or 0)
        completions = f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"
    start, end = _parse(status.get("startTime")), _parse(status.get("completionTime"))
    duration = ""
    if start is not None:
        duration = human_duration(((end or now) - start).total_seconds())
    conditions = status.get("conditions") or []
    if _condition_true(conditions, "Complete"):
        state = "Complete"
    elif _condition_true(conditions, "Failed"):
        state = "Failed"
    elif meta(job).get("deletionTimestamp"):
        state = "Terminating"
    elif _condition_true(conditions, "Suspended"):
        state = "Suspended"
    elif _condition_true(conditions, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    names, images = _containers(_template_spec(job))
    return [
        name_of(job),
        state,
        completions,
        duration,
        since(meta(job).get("creationTimestamp"), now),
        names,
        images,
        format_selector(spec.get("selector")),
    ]


_LEASE_COLUMNS = [
    _NAME,
    _column("Holder", "holderIdentity contains the identity of the holder of a current lease."),
    _AGE,
]


def _lease(lease: Json, now: datetime) -> list[Cell]:
    return [
        name_of(lease),
        str(spec_of(lease).get("holderIdentity") or ""),
        since(meta(lease).get("creationTimestamp"), now),
    ]


_NAMESPACE_COLUMNS = [_NAME, _column("Status", "The status of the namespace"), _AGE]


def _namespace(namespace: Json, now: datetime) -> list[Cell]:
    return [
        name_of(namespace),
        str(status_of(namespace).get("phase", "")),
        since(meta(namespace).get("creationTimestamp"), now),
    ]


_SERVICE_ACCOUNT_COLUMNS = [
    _NAME,
    _column(
        "Secrets",
        "Secrets is a list of the secrets in the same namespace that pods "
        "running using this ServiceAccount are allowed to use.",
        "integer",
    ),
    _AGE,
]


def _service_account(account: Json, now: datetime) -> list[Cell]:
    return [
        name_of(account),
        len(account.get("secrets") or []),
        since(meta(account).get("creationTimestamp"), now),
    ]


_ROLE_COLUMNS = [
    _NAME,
    _column(
        "Created At",
        "CreationTimestamp is a timestamp representing the server time when "
        "this object was created.",
        "date",
    ),
]


def _role(role: Json, now: datetime) -> list[Cell]:
    return [name_of(role), str(meta(role).get("creationTimestamp", ""))]


def _binding_columns(kind: str) -> list[Json]:
    return [
        _NAME,
        _column(
            "Role",
            "RoleRef can reference a Role in the current namespace or a ClusterRole "
            "in the global namespace.",
        ),
        _AGE,
        _column("Users", f"Users in the {kind}", priority=1),
        _column("Groups", f"Groups in the {kind}", priority=1),
        _column("ServiceAccounts", f"ServiceAccounts in the {kind}", priority=1),
    ]


def _binding(binding: Json, now: datetime) -> list[Cell]:
    """printRoleBinding / printClusterRoleBinding with rbac.SubjectsStrings."""
    ref = binding.get("roleRef") or {}
    users, groups, accounts = [], [], []
    for subject in binding.get("subjects") or []:
        kind, name = subject.get("kind"), str(subject.get("name", ""))
        if kind == "User":
            users.append(name)
        elif kind == "Group":
            groups.append(name)
        elif kind == "ServiceAccount":
            accounts.append(f"{subject.get('namespace', '')}/{name}")
    return [
        name_of(binding),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        since(meta(binding).get("creationTimestamp"), now),
        ", ".join(users),
        ", ".join(groups),
        ", ".join(accounts),
    ]


_PRINTERS: dict[str, tuple[list[Json], Callable[[Json, datetime], list[Cell]]]] = {
    "Node": (_NODE_COLUMNS, _node),
    "Pod": (_POD_COLUMNS, _pod),
    "Event": (_EVENT_COLUMNS, _event),
    "PodDisruptionBudget": (_PDB_COLUMNS, _pdb),
    "DaemonSet": (_DAEMONSET_COLUMNS, _daemonset),
    "ReplicaSet": (_REPLICASET_COLUMNS, _replicaset),
    "Deployment": (_DEPLOYMENT_COLUMNS, _deployment),
    "Job": (_JOB_COLUMNS, _job),
    "Lease": (_LEASE_COLUMNS, _lease),
    "Namespace": (_NAMESPACE_COLUMNS, _namespace),
    "ServiceAccount": (_SERVICE_ACCOUNT_COLUMNS, _service_account),
    "ClusterRole": (_ROLE_COLUMNS, _role),
    "Role": (_ROLE_COLUMNS, _role),
    "ClusterRoleBinding": (_binding_columns("clusterRoleBinding"), _binding),
    "RoleBinding": (_binding_columns("roleBinding"), _binding),
}


def wants_table(accept: str) -> bool:
    """Whether an Accept header asks for a meta.k8s.io Table (v1 or v1beta1) first."""
    for entry in accept.split(","):
        params = {
            k.strip(): v.strip() for k, _, v in (p.partition("=") for p in entry.split(";")[1:])
        }
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io":
            return True
        if entry.strip().split(";")[0] in ("application/json", "*/*"):
            return False
    return False


def table(
    kind: str,
    items: list[Json],
    resource_version: str,
    include_object: str = "PartialObjectMetadata",
    now: datetime | None = None,
    continue_token: str | None = None,
) -> Json:
    """The meta.k8s.io/v1 Table of `items` (all of one kind)."""
    moment = now or datetime.now(UTC)
    columns, printer = _PRINTERS.get(kind, (_ROLE_COLUMNS, _role))
    rows = []
    for item in items:
        row: Json = {"cells": printer(item, moment)}
        status = status_of(item).get("phase")
        if kind == "Pod" and status in ("Succeeded", "Failed"):
            row["conditions"] = [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": status,
                    "message": "The pod has completed successfully."
                    if status == "Succeeded"
                    else "The pod failed.",
                }
            ]
        if include_object == "Object":
            row["object"] = item
        elif include_object != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta(item),
            }
        rows.append(row)
    metadata: Json = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns,
        "rows": rows,
    }
