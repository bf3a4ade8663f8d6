"""The ReplicaSet controller, for the ReplicaSets the store holds: level-based on
`spec.replicas`, as kube-controller-manager's is.

Each round it creates pods from `spec.template` up to the wanted count, deletes the surplus
(unscheduled first, then pending, then not ready, newest first, as the real controller
ranks them) and keeps `status` current, so `kubectl scale` and `kubectl get rs` behave as on
a real cluster. ReplicaSets the store never held are implicit and handled with the Jobs
(`gpusim.lost_pods`).

It must never bind or start a pod (the scheduler and the kubelet do), nor touch a pod whose
controller is not one of the ReplicaSets it lists.
"""

from __future__ import annotations

from datetime import datetime

from bot.kube_objects import meta, name_of, namespace_of, pod_finished, pod_ready, spec_of
from gpusim.objects import Json
from gpusim.pod_writes import PodWrites
from gpusim.reading import list_all, owned_by, phase_of, terminating
from gpusim.resources import BY_KIND
from gpusim.state import ClusterState
from gpusim.templates import from_template, owner_ref

_REPLICASETS = BY_KIND["ReplicaSet"]


class ReplicaSetController:
    """One round over every ReplicaSet the store holds. It owns nothing between rounds (each
    round reads the cluster afresh); it must never write but through `PodWrites`."""

    def __init__(self, store: ClusterState, writes: PodWrites) -> None:
        self.store = store
        self._writes = writes

    def reconcile(self, pods: list[Json], now: datetime) -> list[str]:
        changes: list[str] = []
        for rs in list_all(self.store, _REPLICASETS):
            if terminating(rs):
                continue
            owned = [p for p in pods if owned_by(p, "ReplicaSet", rs)]
            active = [p for p in owned if not terminating(p) and not pod_finished(p)]
            wanted = int(spec_of(rs).get("replicas", 1))
            ref = owner_ref(rs)
            for _ in range(wanted - len(active)):
                body = from_template(rs, owned)
                created = self._writes.create_pod(namespace_of(rs), body, ref, now)
                changes.append(f"ReplicaSet {name_of(rs)} created {name_of(created)}")
                active.append(created)
            if len(active) > wanted:
                # The controller deletes unscheduled, then pending, then not ready, newest first.
                surplus = sorted(
                    active,
                    key=lambda p: (
                        bool(spec_of(p).get("nodeName")),
                        phase_of(p) == "Running",
                        pod_ready(p),
                        "~" + str(meta(p).get("creationTimestamp", "")),
                    ),
                )[: len(active) - wanted]
                for pod in surplus:
                    self._writes.delete_pod(pod, rs, now)
                    active.remove(pod)
                    changes.append(f"ReplicaSet {name_of(rs)} deleted {name_of(pod)}")
            status = {
                "replicas": len(active),
                "fullyLabeledReplicas": len(active),
                "readyReplicas": sum(1 for p in active if pod_ready(p)),
                "availableReplicas": sum(1 for p in active if pod_ready(p)),
                "observedGeneration": meta(rs).get("generation", 1),
            }
            if self._writes.update_status(_REPLICASETS, rs, status):
                changes.append(f"ReplicaSet {name_of(rs)} status {status}")
        return changes
