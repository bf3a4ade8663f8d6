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

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_delay,
    wait_exponential,
)

from bot.acting.cordoning import cordon
from bot.errors import NotFound, PermanentError, TemporaryError
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


def _remove(
    cluster: Cluster,
    pod: PodPlan,
    deadline: float,
    disable_eviction: bool,
    tracker: _Tracker,
    result: DrainResult,
    lock: threading.Lock,
    keep_going: Callable[[], bool] = lambda: True,
) -> None:
    last_refusal: list[str] = []
    if pod.action == "wait":
        _wait_gone(cluster, pod, deadline, tracker, result, lock)
        return

    def attempt() -> None:
        if not keep_going():
            raise _Stopped(STOPPED)
        try:
            if disable_eviction:
                cluster.delete_pod(pod.namespace, pod.name, pod.grace_period_s)
            else:
                cluster.evict(pod.namespace, pod.name, pod.grace_period_s)
        except NotFound:
            return
        except TemporaryError as exc:
            if not last_refusal or last_refusal[-1] != str(exc):
                tracker.report(pod, "blocked", str(exc))
            last_refusal.append(str(exc))
            raise

    remaining = max(0.0, deadline - time.monotonic())
    try:
        # kubectl waits a fixed 5 s after a 429; backing off from 0.2 s frees a pod as soon
        # as its budget allows, without hammering the API server.
        Retrying(
            retry=retry_if_exception_type(TemporaryError),
            wait=_until(deadline, wait_exponential(multiplier=0.2, max=2)),
            stop=stop_after_delay(remaining),
            reraise=True,
        )(attempt)
    except TemporaryError:
        with lock:
            result.stalled.append(
                Stall(pod.namespace, pod.name, last_refusal[-1] if last_refusal else "timed out")
            )
        tracker.report(pod, "stalled", last_refusal[-1] if last_refusal else "")
        return
    except (PermanentError, _Stopped) as exc:
        with lock:
            result.stalled.append(Stall(pod.namespace, pod.name, str(exc)))
        tracker.report(pod, "stalled", str(exc))
        return
    with lock:
        (result.deleted if disable_eviction else result.evicted).append((pod.namespace, pod.name))
    tracker.report(pod, "evicted")
    _wait_gone(cluster, pod, deadline, tracker, result, lock)


STOPPED = "not evicted: this gpubot no longer owns the drain (another one took it over)"


class _Stopped(Exception):
    """The caller said stop (`keep_going`): no further eviction is sent."""


def _until(deadline: float, wait: Any) -> Callable[[Any], float]:
    """A tenacity wait that never sleeps past the drain's deadline."""

    def capped(state: Any) -> float:
        return float(max(0.0, min(wait(state), deadline - time.monotonic())))

    return capped


def _still_there(cluster: Cluster, pod: PodPlan) -> Obj | None:
    try:
        current = cluster.get("Pod", pod.namespace, pod.name)
    except NotFound:
        return None
    # A StatefulSet may recreate a pod under the same name: a new uid means ours is gone.
    if str(meta(current).get("uid", "")) != pod.uid:
        return None
    return current


def _wait_gone(
    cluster: Cluster,
    pod: PodPlan,
    deadline: float,
    tracker: _Tracker,
    result: DrainResult,
    lock: threading.Lock,
) -> None:
    try:
        Retrying(
            # A flaky API while waiting is no verdict on the pod: look again.
            retry=retry_if_result(lambda present: present is not None)
            | retry_if_exception_type(TemporaryError),
            wait=_until(deadline, wait_exponential(multiplier=0.05, max=1)),
            stop=stop_after_delay(max(0.0, deadline - time.monotonic())),
        )(_still_there, cluster, pod)
    except PermanentError as exc:
        with lock:
            result.stalled.append(Stall(pod.namespace, pod.name, str(exc)))
        tracker.report(pod, "stalled", str(exc))
        return
    except RetryError as exc:
        last = exc.last_attempt
        reason = (
            f"unknown: {last.exception()}" if last.failed else _terminating_reason(last.result())
        )
        with lock:
            result.stalled.append(Stall(pod.namespace, pod.name, reason))
        tracker.report(pod, "stalled", reason)
        return
    tracker.report(pod, "gone")


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
    concurrency: int = 32,
    on_progress: ProgressCallback | None = None,
    keep_going: Callable[[], bool] = lambda: True,
) -> DrainResult:
    """Cordon, then remove every pod the plan allows. A refused plan changes nothing, not even
    the cordon. The plan is made again after the cordon, so a pod that was bound in between is
    not left behind. Once `keep_going()` is false no further eviction is sent: the pods not
    yet asked are stalled with `STOPPED`."""
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
    deadline = started + timeout_s
    lock = threading.Lock()
    if pods:
        with ThreadPoolExecutor(max_workers=min(concurrency, len(pods))) as pool:
            futures = [
                pool.submit(
                    _remove,
                    cluster,
                    p,
                    deadline,
                    disable_eviction,
                    tracker,
                    result,
                    lock,
                    keep_going,
                )
                for p in pods
            ]
            for future in futures:
                future.result()
    result.duration_s = time.monotonic() - started
    return result
