"""The DaemonSet controller: one pod per node that should run it, as kube-controller-manager's.

A node should run a DaemonSet's pod when the template's nodeSelector and required node
affinity match and no NoSchedule/NoExecute taint is untolerated (with the default DaemonSet
tolerations added, among them `node.kubernetes.io/unschedulable`, so a cordon keeps them).
The pod is created with the controller's `metadata.name` node affinity and bound by the
scheduler; it is deleted when the node stops matching, when it gains an untolerated
NoExecute taint, or when it disappears; a Failed pod is deleted and replaced; `status` is
kept current. The GPU Operator sets each DaemonSet's nodeSelector to
`nvidia.com/gpu.deploy.<component>=true`, which is how mig-manager makes pods vanish by
setting those labels to false.

It must never bind or start a pod (the scheduler and the kubelet do), nor touch a pod whose
controller is not one of the DaemonSets it lists.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from bot.kube_objects import meta, name_of, namespace_of, pod_ready, spec_of
from gpusim.objects import Json
from gpusim.pod_writes import PodWrites
from gpusim.reading import list_all, owned_by, phase_of, terminating
from gpusim.resources import BY_KIND
from gpusim.state import ClusterState
from gpusim.templates import daemon_fits, daemon_pod, daemon_target, keep_order, owner_ref

_NODES = BY_KIND["Node"]
_DAEMONSETS = BY_KIND["DaemonSet"]


class DaemonSetController:
    """One round over every DaemonSet and node. It owns nothing between rounds (each round reads
    the cluster afresh); it must never write but through `PodWrites`."""

    def __init__(self, store: ClusterState, writes: PodWrites) -> None:
        self.store = store
        self._writes = writes

    def reconcile(self, pods: list[Json], now: datetime) -> list[str]:
        nodes = list_all(self.store, _NODES)
        changes: list[str] = []
        for ds in list_all(self.store, _DAEMONSETS):
            if terminating(ds):
                continue
            owned = [p for p in pods if owned_by(p, "DaemonSet", ds)]
            by_node: dict[str, list[Json]] = defaultdict(list)
            for pod in owned:
                if terminating(pod):
                    continue
                if phase_of(pod) == "Failed":
                    self._writes.delete_pod(pod, ds, now)
                    changes.append(f"DaemonSet {name_of(ds)} deleted failed {name_of(pod)}")
                    continue
                by_node[daemon_target(pod)].append(pod)
            template = spec_of(spec_of(ds).get("template") or {})
            desired = scheduled = misscheduled = ready = 0
            for node in nodes:
                node_name = name_of(node)
                should_run, keep = daemon_fits(template, node)
                live = sorted(by_node.pop(node_name, []), key=keep_order)
                desired += should_run
                if should_run and not live:
                    body = daemon_pod(ds, node_name, owned, now)
                    created = self._writes.create_pod(namespace_of(ds), body, owner_ref(ds), now)
                    changes.append(
                        f"DaemonSet {name_of(ds)} created {name_of(created)} for {node_name}"
                    )
                    live = [created]
                elif live and not keep:
                    for pod in live:
                        self._writes.delete_pod(pod, ds, now)
                        changes.append(
                            f"DaemonSet {name_of(ds)} deleted {name_of(pod)} from {node_name}"
                        )
                    live = []
                for pod in live[1:]:
                    self._writes.delete_pod(pod, ds, now)
                    changes.append(f"DaemonSet {name_of(ds)} deleted duplicate {name_of(pod)}")
                if live:
                    scheduled += should_run
                    misscheduled += not should_run
                    ready += should_run and pod_ready(live[0])
            for node_name, orphans in by_node.items():
                for pod in orphans:
                    self._writes.delete_pod(pod, ds, now)
                    changes.append(
                        f"DaemonSet {name_of(ds)} deleted {name_of(pod)} (node {node_name} gone)"
                    )
            status = {
                "desiredNumberScheduled": desired,
                "currentNumberScheduled": scheduled,
                "updatedNumberScheduled": scheduled,
                "numberMisscheduled": misscheduled,
                "numberReady": ready,
                "numberAvailable": ready,
                "numberUnavailable": desired - ready,
                "observedGeneration": meta(ds).get("generation", 1),
            }
            if self._writes.update_status(_DAEMONSETS, ds, status):
                changes.append(f"DaemonSet {name_of(ds)} status {desired} desired, {ready} ready")
        return changes
