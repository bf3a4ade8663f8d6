"""A Job's pod counts, as the Job controller keeps them in its status.

No simulated controller writes these counts: the store recomputes them whenever a Job is
read, from the pods the Job controls, so `kubectl get jobs` and the bot see them move as pods
start and finish without a write per pod. A pure function of the Job and its namespace's
pods: it must never read the cluster, write, or read a clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.kube_objects import meta, status_of
from gpusim.objects import Json


def job_status(job: Json, pods: Iterable[Json]) -> Json:
    """The Job's status with its pod counts (`active`: not finished and not terminating,
    `ready`, `succeeded`, `failed`) from `pods`, the pods of its namespace; the rest of its
    status (startTime, conditions) as stored. A count of 0 is left out, as the API's
    `omitempty` does, except `ready`, which the Job controller always writes."""
    uid = str(meta(job).get("uid", ""))
    status = dict(status_of(job))
    counts = {"active": 0, "ready": 0, "succeeded": 0, "failed": 0}
    for pod in pods:
        refs = meta(pod).get("ownerReferences") or []
        if not any(r.get("uid") == uid and r.get("controller") for r in refs):
            continue
        phase = status_of(pod).get("phase")
        if phase == "Succeeded":
            counts["succeeded"] += 1
        elif phase == "Failed":
            counts["failed"] += 1
        elif not meta(pod).get("deletionTimestamp"):
            counts["active"] += 1
            conditions = status_of(pod).get("conditions") or []
            if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                counts["ready"] += 1
    for counted_as, value in counts.items():
        if value or counted_as == "ready":
            status[counted_as] = value
        else:
            status.pop(counted_as, None)
    return status
