"""The Job controller and the implicit ReplicaSets': one replacement for each pod they lose.

A pod whose controller (ownerReference `controller: true`) is a Job or a ReplicaSet and that
is lost (deleted, evicted, Terminating, or Failed) gets one replacement: the old pod's labels,
annotations, ownerReferences and spec without `nodeName`, `generateName` = owner name + "-",
phase Pending, no container statuses. Jobs never replace a Succeeded pod. A Job is implicit
here: one replacement per lost pod (no backoffLimit, no completions). A ReplicaSet the store
has never held is implicit in the same way (the scenarios create pods owned by ReplicaSets
without the objects); once the store has shown one, its own level-based controller
(`gpusim.replicasets`) decides for it, and once it is deleted its pods are never replaced
(the garbage collector's business, not simulated). This is what lets a drain's evicted
training pod come back Pending, as on a real cluster.

A pod's leaving is also when its kubelet tells that it stopped the containers (a `Killing`
Event) and forgets their logs; that happens here, in the same round, before the replacement.

It must never replace a pod twice, nor one owned by anything but a Job or a ReplicaSet.
"""

from __future__ import annotations

from datetime import datetime

from bot.kube_objects import name_of, namespace_of
from gpusim.known_pods import KnownPods
from gpusim.kubelet import Kubelet, RecentUids, forget_logs
from gpusim.objects import Json
from gpusim.pod_writes import PodWrites
from gpusim.reading import controller_ref, list_all, phase_of, terminating, uid_of
from gpusim.resources import BY_KIND
from gpusim.state import ClusterState
from gpusim.templates import replacement

_REPLICASETS = BY_KIND["ReplicaSet"]


class LostPods:
    """The replacements for lost pods of Jobs and implicit ReplicaSets. It owns the uids of the
    pods already replaced and the ReplicaSets the store has shown; it must never write a pod
    but through `PodWrites`."""

    def __init__(
        self, store: ClusterState, kubelet: Kubelet, writes: PodWrites, known: KnownPods
    ) -> None:
        self.store = store
        self._kubelet = kubelet
        self._writes = writes
        self._known = known
        self._replaced = RecentUids()
        self._replicasets_seen: set[tuple[str, str]] = set()

    def reconcile(self, pods: list[Json], now: datetime) -> list[str]:
        self._replicasets_seen |= {
            (namespace_of(rs), name_of(rs)) for rs in list_all(self.store, _REPLICASETS)
        }
        gone = self._known.gone(pods)
        forget_logs(self.store, {uid_of(p) for p in gone})
        changes: list[str] = []
        leaving = gone + [p for p in pods if terminating(p)]
        for pod in leaving:
            changes += self._kubelet.killing(pod, now)
        lost = leaving + [p for p in pods if phase_of(p) == "Failed" and not terminating(p)]
        for pod in lost:
            changes += self._replace(pod, now)
        return changes

    def _replace(self, pod: Json, now: datetime) -> list[str]:
        uid, ref = uid_of(pod), controller_ref(pod)
        if ref is None or uid in self._replaced:
            return []
        kind, owner = str(ref.get("kind", "")), str(ref.get("name", ""))
        if kind == "Job":
            if phase_of(pod) == "Succeeded":
                return []
        elif kind == "ReplicaSet":
            if (namespace_of(pod), owner) in self._replicasets_seen:
                return []  # the ReplicaSet object itself decides, level-based
        else:
            return []
        self._replaced.add(uid)
        created = self._writes.create_pod(namespace_of(pod), replacement(pod, owner), ref, now)
        return [
            f"{namespace_of(pod)}/{name_of(pod)} lost: {kind} {owner} created {name_of(created)}"
        ]
