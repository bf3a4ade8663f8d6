"""The simulated cluster's control loop: the Job, ReplicaSet and DaemonSet controllers, run
together with the scheduler (`gpusim.scheduling`), the kubelet (`gpusim.kubelet`) and the node
lifecycle controller's taints and the kubelets' node Leases (`gpusim.node_lifecycle`: taints in
every round, Leases on the kubelet's own 10 s clock in `start()` only).

Opt-in: nothing here runs unless someone builds `Controllers(store)` and calls `reconcile()`
(one deterministic round, for tests) or `start()` (background threads that follow the
store's watch history of pods, nodes, DaemonSets and ReplicaSets and reconcile after each
burst of changes) and later `stop()`. Every change goes through `ClusterState.create` /
`replace` / `delete`, so watchers and kubectl see the same sequence a real cluster shows.

What the controllers do, and where they stop short of the real ones:

- Job and ReplicaSet controllers. A pod whose controller (ownerReference `controller: true`)
  is a Job or a ReplicaSet and that is lost (deleted, evicted, Terminating, or Failed) gets one
  replacement: the old pod's labels, annotations, ownerReferences and spec without `nodeName`,
  `generateName` = owner name + "-", phase Pending, no container statuses. Jobs never replace
  a Succeeded pod. The store has no Job kind, so a Job is implicit: one replacement per lost
  pod (no backoffLimit, no completions). ReplicaSets: when the store holds the ReplicaSet
  object, it is reconciled level-based on `spec.replicas` (create from `spec.template`, delete
  the surplus, keep `status` current) and lost pods are not replaced one by one; once seen and
  then deleted, its pods are never replaced (the garbage collector's business, not simulated).
  When the store never held it (the scenarios create pods owned by ReplicaSets without the
  objects), it is implicit, like a Job: one replacement per lost pod.
- DaemonSet controller. One pod per node where the template's nodeSelector and required
  node affinity match and no NoSchedule/NoExecute taint is untolerated (with the default
  DaemonSet tolerations added, among them `node.kubernetes.io/unschedulable`): created with
  the controller's `metadata.name` node affinity and bound by the scheduler above; deleted
  when the node stops matching, when it gains an untolerated NoExecute taint, or when it
  disappears; a Failed pod is deleted and replaced; `status` kept current. The GPU Operator
  sets each DaemonSet's nodeSelector to `nvidia.com/gpu.deploy.<component>=true`, which is
  how mig-manager makes pods vanish by setting those labels to false.

Cost: every round lists pods, nodes and the workload objects; the controllers keep one
reference to each listed pod between rounds. Fine for the test and demo clusters; on the
5,000-node scenario a round takes seconds.

It creates, deletes and keeps status; it must never bind or start a pod itself.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime

from bot.kube_objects import (
    meta,
    name_of,
    namespace_of,
    pod_finished,
    pod_ready,
    spec_of,
    status_of,
)
from gpusim.defaulting import pod_on_create
from gpusim.kubelet import Kubelet, RecentUids, forget_logs
from gpusim.node_lifecycle import RENEW_INTERVAL_S, renew_leases, taint_nodes
from gpusim.objects import (
    Json,
)
from gpusim.reading import (
    controller_ref,
    list_all,
    owned_by,
    phase_of,
    terminating,
    uid_of,
)
from gpusim.recording import EventRecorder
from gpusim.resources import BY_KIND, ApiError, ResourceType
from gpusim.scheduling import Scheduler
from gpusim.state import ClusterState
from gpusim.templates import (
    daemon_fits,
    daemon_pod,
    daemon_target,
    from_template,
    keep_order,
    owner_ref,
    replacement,
)

log = logging.getLogger(__name__)

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


_NODES = BY_KIND["Node"]


_DAEMONSETS = BY_KIND["DaemonSet"]


_REPLICASETS = BY_KIND["ReplicaSet"]


_FOLLOWED = (_PODS, _NODES, _DAEMONSETS, _REPLICASETS)


class Controllers:
    """kubelet, kube-scheduler and the Job / ReplicaSet / DaemonSet controllers over a
    ClusterState. It owns what the loop remembers between rounds: the pods it last listed (to
    notice deletions), the pods already replaced, the ReplicaSets it has seen, its threads."""

    def __init__(
        self,
        store: ClusterState,
        now_fn: Callable[[], datetime] | None = None,
        *,
        hide_taint_values: bool = False,
        scheduler_instance: str = "default-scheduler-control-plane",
        settle_s: float = 0.05,
        resync_s: float = 30.0,
    ) -> None:
        self.store = store
        self._now = now_fn or (lambda: datetime.now(UTC))
        self._events = EventRecorder(store, scheduler_instance)
        self._scheduler = Scheduler(store, self._events, hide_taint_values=hide_taint_values)
        self._kubelet = Kubelet(store, self._events)
        self._settle_s = settle_s
        self._resync_s = resync_s
        self._lock = threading.RLock()
        self._pods: dict[str, Json] = {}
        """uid -> the pod as last listed: what lets a deletion be noticed."""
        self._replaced = RecentUids()
        self._replicasets_seen: set[tuple[str, str]] = set()
        self._deleted: list[Json] = []
        self._deleted_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pods = {uid_of(p): p for p in list_all(self.store, _PODS)}

    # ---- running ------------------------------------------------------------------------

    def __enter__(self) -> Controllers:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def start(self) -> None:
        """Follow the watch history in background threads; reconcile after each burst."""
        if self.running:
            return
        self._stop.clear()
        since = self.store.resource_version
        self._threads = [
            threading.Thread(
                target=self._follow,
                args=(resource, since),
                name=f"sim-controllers-{resource.plural}",
                daemon=True,
            )
            for resource in _FOLLOWED
        ]
        self._threads.append(
            threading.Thread(target=self._loop, name="sim-controllers", daemon=True)
        )
        self._threads.append(
            threading.Thread(target=self._heartbeat, name="sim-kubelet-leases", daemon=True)
        )
        for thread in self._threads:
            thread.start()
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def _follow(self, resource: ResourceType, since: int) -> None:
        cursor = since
        while not self._stop.is_set():
            try:
                for event in self.store.watch(resource, "", cursor, stop=self._stop):
                    cursor = event.resource_version
                    if resource is _PODS and event.type == "DELETED":
                        with self._deleted_lock:
                            self._deleted.append(event.object)
                    self._wake.set()
            except ApiError as exc:  # 410 Gone: the level-based round catches up
                log.debug("sim controllers: %s watch restarts: %s", resource.plural, exc.message)
                cursor = self.store.resource_version
                self._wake.set()
            except Exception:
                log.exception("sim controllers: %s watch failed", resource.plural)
                self._stop.wait(1.0)
                cursor = self.store.resource_version
                self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._wake.wait(self._resync_s):
                self._wake.clear()
                # Let a burst (a fault's several writes, a drain) land before acting on it.
                settle_until = time.monotonic() + 20 * self._settle_s
                while time.monotonic() < settle_until and self._wake.wait(self._settle_s):
                    self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.reconcile()
            except Exception:
                log.exception("sim controllers: reconcile failed")

    def _heartbeat(self) -> None:
        """Every kubelet's node Lease, renewed on the kubelet's interval (not part of a
        reconcile round: a lease moves with time, not with the cluster's changes)."""
        while not self._stop.is_set():
            try:
                with self._lock:
                    renew_leases(self.store, list_all(self.store, BY_KIND["Node"]), self._now())
            except Exception:
                log.exception("sim controllers: lease renewal failed")
            self._stop.wait(RENEW_INTERVAL_S)

    def _taints(self, _pods: list[Json], now: datetime) -> list[str]:
        return taint_nodes(self.store, list_all(self.store, BY_KIND["Node"]), now)

    def reconcile(self, max_passes: int = 10) -> list[str]:
        """Run every controller until nothing changes (at most `max_passes` passes).

        Returns what changed, one line per change, for people and tests."""
        with self._lock:
            changes: list[str] = []
            for _ in range(max_passes):
                done = self._pass()
                if not done:
                    break
                changes += done
            return changes

    def _pass(self) -> list[str]:
        now = self._now()
        changes: list[str] = []
        stages: tuple[Callable[[list[Json], datetime], list[str]], ...] = (
            self._taints,
            self._lost_pods,
            self._replicasets,
            self._daemonsets,
            self._scheduler.schedule,
            self._kubelet.start_pods,
        )
        pods = list_all(self.store, _PODS)
        for stage in stages:
            done = stage(pods, now)
            if done:
                changes += done
                pods = list_all(self.store, _PODS)
        return changes

    def _lost_pods(self, pods: list[Json], now: datetime) -> list[str]:
        current = {uid_of(p): p for p in pods}
        self._replicasets_seen |= {
            (namespace_of(rs), name_of(rs)) for rs in list_all(self.store, _REPLICASETS)
        }
        with self._deleted_lock:
            deleted, self._deleted = self._deleted, []
        # A deleted pod as the watch last showed it, else as the previous round listed it.
        last_seen = {uid: p for uid, p in self._pods.items() if uid not in current}
        last_seen.update({uid_of(p): p for p in deleted if uid_of(p) not in current})
        gone = list(last_seen.values())
        self._pods = current
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
        created = self._create_pod(namespace_of(pod), replacement(pod, owner), ref, now)
        return [
            f"{namespace_of(pod)}/{name_of(pod)} lost: {kind} {owner} created {name_of(created)}"
        ]

    def _create_pod(self, namespace: str, body: Json, owner: Json, now: datetime) -> Json:
        # Through the API, as the real controllers create pods: the server's defaults apply.
        created = self.store.create(_PODS, namespace, pod_on_create(body))
        self._pods[uid_of(created)] = created
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

    def _replicasets(self, pods: list[Json], now: datetime) -> list[str]:
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
                created = self._create_pod(namespace_of(rs), body, ref, now)
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
                    self._delete_pod(pod, rs, now)
                    active.remove(pod)
                    changes.append(f"ReplicaSet {name_of(rs)} deleted {name_of(pod)}")
            status = {
                "replicas": len(active),
                "fullyLabeledReplicas": len(active),
                "readyReplicas": sum(1 for p in active if pod_ready(p)),
                "availableReplicas": sum(1 for p in active if pod_ready(p)),
                "observedGeneration": meta(rs).get("generation", 1),
            }
            if self._update_status(_REPLICASETS, rs, status):
                changes.append(f"ReplicaSet {name_of(rs)} status {status}")
        return changes

    def _delete_pod(self, pod: Json, owner: Json, now: datetime) -> None:
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

    def _update_status(self, resource: ResourceType, obj: Json, wanted: Json) -> bool:
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

    def _daemonsets(self, pods: list[Json], now: datetime) -> list[str]:
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
                    self._delete_pod(pod, ds, now)
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
                    created = self._create_pod(namespace_of(ds), body, owner_ref(ds), now)
                    changes.append(
                        f"DaemonSet {name_of(ds)} created {name_of(created)} for {node_name}"
                    )
                    live = [created]
                elif live and not keep:
                    for pod in live:
                        self._delete_pod(pod, ds, now)
                        changes.append(
                            f"DaemonSet {name_of(ds)} deleted {name_of(pod)} from {node_name}"
                        )
                    live = []
                for pod in live[1:]:
                    self._delete_pod(pod, ds, now)
                    changes.append(f"DaemonSet {name_of(ds)} deleted duplicate {name_of(pod)}")
                if live:
                    scheduled += should_run
                    misscheduled += not should_run
                    ready += should_run and pod_ready(live[0])
            for node_name, orphans in by_node.items():
                for pod in orphans:
                    self._delete_pod(pod, ds, now)
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
            if self._update_status(_DAEMONSETS, ds, status):
                changes.append(f"DaemonSet {name_of(ds)} status {desired} desired, {ready} ready")
        return changes
