"""The simulated cluster's control loop: the Job, ReplicaSet and DaemonSet controllers, run
together with the scheduler (`gpusim.scheduling`), the kubelet (`gpusim.kubelet`) and the node
lifecycle controller's taints and the kubelets' node Leases (`gpusim.node_lifecycle`: taints in
every round, Leases on the kubelet's own 10 s clock in `start()` only).

Opt-in: nothing here runs unless someone builds `Controllers(store)` and calls `reconcile()`
(one deterministic round, for tests) or `start()` (background threads that follow the
store's watch history of pods, nodes, DaemonSets and ReplicaSets and reconcile after each
burst of changes) and later `stop()`. Every change goes through `ClusterState.create` /
`replace` / `delete`, so watchers and kubectl see the same sequence a real cluster shows.

A round runs its stages in the order a real cluster's components would act on one change:
the node lifecycle taints, the replacements of lost pods (`gpusim.lost_pods`: Jobs and the
ReplicaSets the store never held), the ReplicaSets the store holds (`gpusim.replicasets`),
the DaemonSets (`gpusim.daemonsets`), then the scheduler binds and the kubelets start what
those created; they write through `gpusim.pod_writes`. Where each controller stops short of
the real one is in its module.

Cost: every round lists pods, nodes and the workload objects; the controllers keep one
reference to each listed pod between rounds. Fine for the test and demo clusters; on the
5,000-node scenario a round takes seconds.

It drives the controllers and owns their threads; it must never create, delete, bind or
start a pod itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from gpusim.daemonsets import DaemonSetController
from gpusim.known_pods import KnownPods
from gpusim.kubelet import Kubelet
from gpusim.lost_pods import LostPods
from gpusim.node_lifecycle import RENEW_INTERVAL_S, renew_leases, taint_nodes
from gpusim.objects import Json
from gpusim.pod_writes import PodWrites
from gpusim.reading import list_all
from gpusim.recording import EventRecorder
from gpusim.replicasets import ReplicaSetController
from gpusim.resources import BY_KIND, ApiError, ResourceType
from gpusim.scheduling import Scheduler
from gpusim.state import ClusterState

log = logging.getLogger(__name__)

_PODS = BY_KIND["Pod"]
_FOLLOWED = (_PODS, BY_KIND["Node"], BY_KIND["DaemonSet"], BY_KIND["ReplicaSet"])


class Controllers:
    """kubelet, kube-scheduler and the Job / ReplicaSet / DaemonSet controllers over a
    ClusterState, run as one loop. It owns the components it drives, their threads and the
    lock that keeps two rounds from overlapping; what each controller remembers between
    rounds is that controller's (`KnownPods`, `LostPods`). It must never write to the cluster
    itself."""

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
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._known = KnownPods(list_all(self.store, _PODS))
        writes = PodWrites(store, self._events, self._known)
        self._lost = LostPods(store, self._kubelet, writes, self._known)
        self._replicasets = ReplicaSetController(store, writes)
        self._daemonsets = DaemonSetController(store, writes)

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
                        self._known.deleted(event.object)
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
            self._lost.reconcile,
            self._replicasets.reconcile,
            self._daemonsets.reconcile,
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
