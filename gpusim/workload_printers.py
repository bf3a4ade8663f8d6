"""Server-side printers of the workload kinds: PodDisruptionBudget, DaemonSet, ReplicaSet,
Deployment and Job, each a transcription of its `print*` function in
pkg/printers/internalversion/printers.go.

They read the status the simulated controllers keep (`gpusim.controllers`) and the Job and
budget status the store recomputes on read (`gpusim.state`), so `kubectl get ds,rs,pdb,job`
shows what a real cluster would. Pure functions of the object and the time: they must never
read the cluster.
"""

from __future__ import annotations

from datetime import datetime

from bot.kube_objects import meta, name_of, spec_of, status_of
from gpusim.objects import Json
from gpusim.table_cells import (
    AGE,
    CONTAINERS,
    IMAGES,
    NAME,
    SELECTOR,
    Cell,
    Printer,
    column,
    condition_true,
    container_cells,
    format_labels,
    format_selector,
    human_duration,
    parse_time,
    since,
    template_spec,
)

_PDB_COLUMNS = [
    NAME,
    column("Min Available", "The minimum number of pods that must be available."),
    column("Max Unavailable", "The maximum number of pods that may be unavailable."),
    column(
        "Allowed Disruptions",
        "Calculated number of pods that may be disrupted at this time.",
        "integer",
    ),
    AGE,
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
    NAME,
    column(
        "Desired", "The total number of nodes that should be running the daemon pod.", "integer"
    ),
    column("Current", "The number of nodes that are running at least 1 daemon pod.", "integer"),
    column(
        "Ready",
        "The number of nodes that should be running the daemon pod and have one "
        "or more of the daemon pod running and ready.",
        "integer",
    ),
    column(
        "Up-to-date", "The total number of nodes that are running updated daemon pod", "integer"
    ),
    column(
        "Available",
        "The number of nodes that should be running the daemon pod and have "
        "one or more of the daemon pod running and available.",
        "integer",
    ),
    column(
        "Node Selector",
        "NodeSelector is a selector which must be true for the pod to fit on a node.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
]


def _daemonset(ds: Json, now: datetime) -> list[Cell]:
    status = status_of(ds)
    names, images = container_cells(template_spec(ds))
    return [
        name_of(ds),
        int(status.get("desiredNumberScheduled") or 0),
        int(status.get("currentNumberScheduled") or 0),
        int(status.get("numberReady") or 0),
        int(status.get("updatedNumberScheduled") or 0),
        int(status.get("numberAvailable") or 0),
        format_labels(template_spec(ds).get("nodeSelector")),
        since(meta(ds).get("creationTimestamp"), now),
        names,
        images,
        format_selector(spec_of(ds).get("selector")),
    ]


_REPLICASET_COLUMNS = [
    NAME,
    column("Desired", "Replicas is the number of desired pods.", "integer"),
    column("Current", "Replicas is the most recently observed number of replicas.", "integer"),
    column("Ready", "The number of ready replicas for this replica set.", "integer"),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
]


def _replicaset(rs: Json, now: datetime) -> list[Cell]:
    status = status_of(rs)
    names, images = container_cells(template_spec(rs))
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
    NAME,
    column("Ready", "Number of the pod with ready state"),
    column(
        "Up-to-date",
        "Total number of non-terminated pods targeted by this deployment "
        "that have the desired template spec.",
    ),
    column(
        "Available",
        "Total number of available pods (ready for at least minReadySeconds) "
        "targeted by this deployment.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
]


def _deployment(deployment: Json, now: datetime) -> list[Cell]:
    status = status_of(deployment)
    names, images = container_cells(template_spec(deployment))
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
    NAME,
    column("Status", "Status of the job."),
    column("Completions", "The number of pods which reached phase Succeeded."),
    column("Duration", "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
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
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = ""
    if start is not None:
        duration = human_duration(((end or now) - start).total_seconds())
    conditions = status.get("conditions") or []
    if condition_true(conditions, "Complete"):
        state = "Complete"
    elif condition_true(conditions, "Failed"):
        state = "Failed"
    elif meta(job).get("deletionTimestamp"):
        state = "Terminating"
    elif condition_true(conditions, "Suspended"):
        state = "Suspended"
    elif condition_true(conditions, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    names, images = container_cells(template_spec(job))
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


PRINTERS: dict[str, Printer] = {
    "PodDisruptionBudget": (_PDB_COLUMNS, _pdb),
    "DaemonSet": (_DAEMONSET_COLUMNS, _daemonset),
    "ReplicaSet": (_REPLICASET_COLUMNS, _replicaset),
    "Deployment": (_DEPLOYMENT_COLUMNS, _deployment),
    "Job": (_JOB_COLUMNS, _job),
}
