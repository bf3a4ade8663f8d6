"""Drain with `kubectl drain`'s semantics, done better.

The planner classifies every pod on the node as kubectl's drain filters do (DaemonSet,
mirror, emptyDir, unmanaged, finished, evictable: `bot.facts.drain_filters`, which the drain
proposal's blockers are read with too) and refuses the same cases unless the same flags are
given. The executor cordons, evicts through the Eviction API concurrently,
retries 429 (a PodDisruptionBudget) with backoff instead of kubectl's fixed 5 s, waits for
each pod to be gone, reports progress, and on a stall returns every blocker by name and
reason.

Two flags, as kubectl has two: `allow_unmanaged` is kubectl's `--force` (pods without a
controller, or whose DaemonSet is gone, may go too, still through the Eviction API);
`disable_eviction` is kubectl's `--disable-eviction` (DELETE instead of evict, bypassing every
PodDisruptionBudget). Only the second ever deletes a pod directly.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.acting.cordoning import cordon
from bot.acting.pacing import Overdue, Pacing, Stopped
from bot.config import DRAIN_CONCURRENCY
from bot.errors import Conflict, EvictionBlocked, NotFound, PermanentError, TemporaryError
from bot.facts.drain_filters import DrainFlags, PodAction, RefusalKind, disposition
from bot.kube_objects import Obj, meta, name_of, namespace_of
from bot.ports import Cluster


@dataclass(frozen=True)
class PodPlan:
    namespace: str
    name: str
    uid: str
    action: PodAction
    reason: str
    grace_period_s: int | None


@dataclass(frozen=True)
class Refusal:
    """Why kubectl would refuse to start this drain, and the flag that would let it."""

    namespace: str
    name: str
    kind: RefusalKind
    message: str
    flag: str


@dataclass
class DrainPlan:
    node: str
    pods: list[PodPlan] = field(default_factory=list)
    refusals: list[Refusal] = field(default_factory=list)

    @property
    def to_evict(self) -> list[PodPlan]:
        return [p for p in self.pods if p.action == "evict"]

    @property
    def to_remove(self) -> list[PodPlan]:
        """Pods the drain must see gone: those it evicts and those already terminating."""
        return [p for p in self.pods if p.action in ("evict", "wait")]


@dataclass(frozen=True)
class Stall:
    namespace: str
    name: str
    reason: str


@dataclass
class DrainResult:
    node: str
    plan: DrainPlan
    evicted: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    stalled: list[Stall] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def refused(self) -> bool:
        return bool(self.plan.refusals)

    @property
    def completed(self) -> bool:
        return not self.refused and not self.stalled


@dataclass(frozen=True)
class DrainProgress:
    done: int
    total: int
    pod: str
    event: Literal["evicted", "gone", "blocked", "stalled"]
    detail: str = ""


ProgressCallback = Callable[[DrainProgress], None]


def plan_drain(
    cluster: Cluster,
    node: str,
    *,
    ignore_daemonsets: bool = True,
    delete_emptydir_data: bool = False,
    allow_unmanaged: bool = False,
    grace_period_s: int | None = None,
) -> DrainPlan:
    """Every pod on the node through kubectl's filters (`bot.facts.drain_filters`, the same
    ones the drain proposal shows its blockers with)."""
    flags = DrainFlags(ignore_daemonsets, delete_emptydir_data, allow_unmanaged)

    def daemonset_exists(namespace: str, name: str) -> bool:
        try:
            cluster.get("DaemonSet", namespace, name)
        except NotFound:
            return False
        return True

    plan = DrainPlan(node)
    for pod in cluster.list("Pod", field_selector=f"spec.nodeName={node}"):
        ns, name = namespace_of(pod), name_of(pod)
        found = disposition(pod, flags, daemonset_exists)
        if found.action is None:
            plan.refusals += [Refusal(ns, name, r.kind, r.message, r.flag) for r in found.refusals]
        else:
            uid = str(meta(pod).get("uid", ""))
            plan.pods.append(PodPlan(ns, name, uid, found.action, found.reason, grace_period_s))
    return plan


class _Tracker:
    """Owns how many of a drain's pods are gone, counted across its eviction threads, and
    tells each step to the progress callback. Never: counts a pod twice."""

    def __init__(self, total: int, on_progress: ProgressCallback | None) -> None:
        self._lock = threading.Lock()
        self.done = 0
        self.total = total
        self._on_progress = on_progress

    def report(
        self,
        pod: PodPlan,
        event: Literal["evicted", "gone", "blocked", "stalled"],
        detail: str = "",
    ) -> None:
        with self._lock:
            if event == "gone":
                self.done += 1
            progress = DrainProgress(
                self.done, self.total, f"{pod.namespace}/{pod.name}", event, detail
            )
        if self._on_progress is not None:
            self._on_progress(progress)


class _Removal:
    """One drain's removal of its pods, shared by its threads: the cluster, the deadline, how
    fast it may ask (`pacing`), whether it may still write (`keep_going`, the owner's fence),
    and what came of each pod. Never: sends an eviction once `keep_going` says no, or evicts a
    pod other than the one planned (every eviction and delete carries the planned uid)."""

    def __init__(
        self,
        cluster: Cluster,
        deadline: float,
        disable_eviction: bool,
        tracker: _Tracker,
        result: DrainResult,
        pacing: Pacing,
        keep_going: Callable[[], bool],
    ) -> None:
        self.cluster = cluster
        self.deadline = deadline
        self.disable_eviction = disable_eviction
        self.tracker = tracker
        self.result = result
        self.pacing = pacing
        self.keep_going = keep_going
        self._lock = threading.Lock()

    def _stall(self, pod: PodPlan, reason: str) -> None:
        with self._lock:
            self.result.stalled.append(Stall(pod.namespace, pod.name, reason))
        self.tracker.report(pod, "stalled", reason)

    def remove(self, pod: PodPlan) -> None:
        if pod.action == "wait":
            self._wait_gone(pod)
            return
        refusals: list[str] = []
        try:
            self._until_taken(pod, refusals)
        except Stopped:
            self._stall(pod, STOPPED)
            return
        except TemporaryError:
            self._stall(pod, refusals[-1] if refusals else "timed out")
            return
        except PermanentError as exc:
            self._stall(pod, str(exc))
            return
        with self._lock:
            done = self.result.deleted if self.disable_eviction else self.result.evicted
            done.append((pod.namespace, pod.name))
        self.tracker.report(pod, "evicted")
        self._wait_gone(pod)

    def _until_taken(self, pod: PodPlan, refusals: list[str]) -> None:
        """Asks until the server takes the eviction (or the delete), the pod is gone, or the
        deadline passes; kubectl waits a fixed 5 s after a budget's 429, this backs off from
        0.2 s with jitter, so a pod goes as soon as its budget allows."""
        pause = 0.2
        while True:
            try:
                self._ask(pod)
                return
            except Overdue:
                raise
            except TemporaryError as exc:
                if not refusals or refusals[-1] != str(exc):
                    self.tracker.report(pod, "blocked", str(exc))
                refusals.append(str(exc))
                self.pacing.refused(exc)
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise
                if isinstance(exc, EvictionBlocked) and exc.retry_after is None:
                    self.pacing.sleep(min(pause * random.uniform(0.5, 1.0), left))
                    pause = min(pause * 2, 2.0)

    def _ask(self, pod: PodPlan) -> None:
        with self.pacing.turn(self.deadline):
            # The fence, right before the write: an owner that lost the execution (paused
            # past its heartbeat, taken over) sends nothing more.
            if not self.keep_going():
                raise Stopped
            try:
                if self.disable_eviction:
                    self.cluster.delete_pod(
                        pod.namespace, pod.name, pod.grace_period_s, uid=pod.uid
                    )
                else:
                    self.cluster.evict(pod.namespace, pod.name, pod.grace_period_s, uid=pod.uid)
            except NotFound:
                self.pacing.answered()
                return
            except Conflict:
                # The planned pod's uid is not the one by that name now: ours is gone and a
                # replacement stands in its place, which this drain never evicts.
                if _still_there(self.cluster, pod) is None:
                    self.pacing.answered()
                    return
                raise
            self.pacing.answered()

    def _wait_gone(self, pod: PodPlan) -> None:
        while True:
            last_error: TemporaryError | None = None
            try:
                current = _still_there(self.cluster, pod)
            except PermanentError as exc:
                self._stall(pod, str(exc))
                return
            except TemporaryError as exc:
                current, last_error = {}, exc  # a flaky API is no verdict on the pod
            if current is None:
                self.tracker.report(pod, "gone")
                return
            left = self.deadline - time.monotonic()
            if left <= 0:
                reason = (
                    f"unknown: {last_error}"
                    if last_error is not None
                    else _terminating_reason(current)
                )
                self._stall(pod, reason)
                return
            try:
                self.pacing.sleep(min(0.5, left))
            except Stopped:
                self._stall(pod, STOPPED)
                return


STOPPED = "not evicted: this gpubot no longer owns the drain (another one took it over)"


def _still_there(cluster: Cluster, pod: PodPlan) -> Obj | None:
    try:
        current = cluster.get("Pod", pod.namespace, pod.name)
    except NotFound:
        return None
    # A StatefulSet may recreate a pod under the same name: a new uid means ours is gone.
    if str(meta(current).get("uid", "")) != pod.uid:
        return None
    return current


def _terminating_reason(pod: Obj | None) -> str:
    meta: dict[str, Any] = (pod or {}).get("metadata") or {}
    finalizers = meta.get("finalizers") or []
    if finalizers:
        return f"Terminating, held by finalizers {', '.join(finalizers)}"
    grace = meta.get("deletionGracePeriodSeconds")
    return (
        f"still Terminating (grace period {grace}s)" if grace is not None else "still Terminating"
    )


def drain(
    cluster: Cluster,
    node: str,
    *,
    timeout_s: float = 300.0,
    ignore_daemonsets: bool = True,
    delete_emptydir_data: bool = False,
    allow_unmanaged: bool = False,
    disable_eviction: bool = False,
    grace_period_s: int | None = None,
    concurrency: int = DRAIN_CONCURRENCY,
    on_progress: ProgressCallback | None = None,
    keep_going: Callable[[], bool] = lambda: True,
    stop: threading.Event | None = None,
) -> DrainResult:
    """Cordon, then remove every pod the plan allows. A refused plan changes nothing, not even
    the cordon. The plan is made again after the cordon, so a pod that was bound in between is
    not left behind. `keep_going()` is asked right before every eviction: once it is false no
    further eviction is sent, and the pods not yet asked are stalled with `STOPPED`; `stop`,
    once set, ends every wait of the drain at once (the process is shutting down)."""
    started = time.monotonic()

    def make_plan() -> DrainPlan:
        return plan_drain(
            cluster,
            node,
            ignore_daemonsets=ignore_daemonsets,
            delete_emptydir_data=delete_emptydir_data,
            allow_unmanaged=allow_unmanaged,
            grace_period_s=grace_period_s,
        )

    plan = make_plan()
    if plan.refusals:
        return DrainResult(node, plan)
    cordon(cluster, node)
    plan = make_plan()
    result = DrainResult(node, plan)
    if plan.refusals:
        return result
    pods = plan.to_remove
    tracker = _Tracker(len(pods), on_progress)
    removal = _Removal(
        cluster,
        started + timeout_s,
        disable_eviction,
        tracker,
        result,
        Pacing(stop or threading.Event()),
        keep_going,
    )
    if pods:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(pods))) as pool:
            for future in [pool.submit(removal.remove, p) for p in pods]:
                future.result()
    result.duration_s = time.monotonic() - started
    return result
