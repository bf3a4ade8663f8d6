"""Kubernetes watches -> Signals.

Two halves: pure functions that compare what the caches keep of an object
(`bot.sources.trimmed`) before and after a change and say which
lifecycle signal that is (Ready transitions, GPU allocatable, reboots by bootID, MIG / driver
/ upgrade labels, cordons, crash loops and restarts, FailedScheduling of GPU pods), and an
informer that keeps a cache through the Cluster port: list, watch from the list's version,
resume from the last seen version when a stream ends, relist and diff on 410 Gone. A change
is never dropped: after a gap the diff against the cache still reports it.

It never acts; it only reports what it saw.
"""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Generic, TypeVar

from bot.clock import Clock, utcnow
from bot.errors import GpubotError, TemporaryError, WatchExpired
from bot.kube_objects import Obj, meta, name_of, namespace_of
from bot.model import Signal
from bot.ports import Cluster, Kind
from bot.sources.trimmed import (
    EventState,
    NodeState,
    PodState,
    event_state,
    node_state,
    pod_state,
    requests_gpu,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_WATCHED_SIGNALS = ("MIGConfigStateChanged", "DriverVersionChanged", "DriverUpgradeStateChanged")
"""The signal each of `bot.sources.trimmed.WATCHED_LABELS` changing is, in its order."""


def _signal(
    name: str,
    node: str | None,
    of: NodeState | PodState | EventState,
    now: datetime,
    labels: dict[str, str],
    status: str = "firing",
) -> Signal:
    # One change, one fingerprint: the same transition seen again after a relist dedups.
    identity = f"{name}/{node}/{of.uid}/{of.resource_version}"
    return Signal(
        source="kube",
        name=name,
        status="resolved" if status == "resolved" else "firing",
        node=node,
        labels={"alertname": name, **({"node": node} if node else {}), **labels},
        starts_at=now,
        fingerprint=hashlib.sha256(identity.encode()).hexdigest()[:16],
    )


def _gpus(node: NodeState) -> dict[str, int]:
    """The node's allocatable GPUs: whole ones and MIG instances (each nvidia.com/mig-*
    profile), which is all a MIG node offers."""
    return {key: int(value or 0) for key, value in node.gpus}


def node_signals(old: NodeState | None, new: NodeState | None, now: datetime) -> list[Signal]:
    if new is None:
        return []
    name = new.name
    signals: list[Signal] = []
    before, after = old.ready if old else "", new.ready
    if after != "True" and before != after:
        signals.append(
            _signal("NodeNotReady", name, new, now, {"from": before or "none", "to": after})
        )
    elif after == "True" and before not in ("", "True"):
        signals.append(_signal("NodeReady", name, new, now, {"from": before}, "resolved"))
    if old is None:
        return signals
    was, now_gpus = _gpus(old), _gpus(new)
    changed = sorted(k for k in {*was, *now_gpus} if was.get(k) != now_gpus.get(k))
    if changed:
        fewer = any(now_gpus.get(k, 0) < was.get(k, 0) for k in changed)
        signals.append(
            _signal(
                "GPUAllocatableChanged",
                name,
                new,
                now,
                {
                    "resource": ",".join(changed),
                    "from": ",".join(str(was.get(k)) for k in changed),
                    "to": ",".join(str(now_gpus.get(k)) for k in changed),
                },
                "firing" if fewer else "resolved",
            )
        )
    boot_before, boot_after = old.boot_id, new.boot_id
    if boot_before and boot_after and boot_before != boot_after:
        signals.append(
            _signal("NodeRebooted", name, new, now, {"from": boot_before, "to": boot_after})
        )
    for signal_name, was_set, is_set in zip(_WATCHED_SIGNALS, old.labels, new.labels, strict=True):
        if was_set != is_set:
            signals.append(
                _signal(signal_name, name, new, now, {"from": was_set or "", "to": is_set or ""})
            )
    if old.cordoned != new.cordoned:
        signals.append(
            _signal("NodeCordoned" if new.cordoned else "NodeUncordoned", name, new, now, {})
        )
    return signals


def pod_signals(old: PodState | None, new: PodState | None, now: datetime) -> list[Signal]:
    if new is None:
        return []
    base = {"pod": new.name, "namespace": new.namespace}
    if new.app:
        base["app"] = new.app
    signals = []
    before = {c.name: c for c in old.containers} if old else {}
    for container, status in {c.name: c for c in new.containers}.items():
        old_status = before.get(container)
        old_reason = old_status.waiting if old_status else None
        old_restarts = old_status.restarts if old_status else 0
        if status.waiting == "CrashLoopBackOff" and old_reason != "CrashLoopBackOff":
            name = "PodCrashLoopBackOff"
        elif old is not None and status.restarts > old_restarts:
            name = "PodRestarted"
        else:
            continue
        labels = {**base, "container": container, "restarts": str(status.restarts)}
        signals.append(_signal(name, new.node, new, now, labels))
    return signals


def event_signals(event: EventState, now: datetime, gpu_pods: set[tuple[str, str]]) -> list[Signal]:
    """A scheduler's FailedScheduling for a pod that asks for GPUs."""
    if event.reason != "FailedScheduling" or event.involved not in gpu_pods:
        return []
    namespace, pod = event.involved
    labels = {"pod": pod, "namespace": namespace, "message": event.message}
    return [_signal("GPUPodUnschedulable", None, event, now, labels)]


class Informer(Generic[T]):
    """A cache of one kind kept current by list + watch; calls `handler(old, new)` per change.

    `project` turns each object, as its list page or watch event arrives, into what is cached
    and handed on (the cache of a large cluster is the bot's biggest memory cost; whole
    objects are never held past their page); `keep` leaves objects of no interest out of the
    cache altogether (they are still handed on once, as `(None, obj)`)."""

    def __init__(
        self,
        cluster: Cluster,
        kind: Kind,
        handler: Callable[[T | None, T | None], None],
        *,
        project: Callable[[Obj], T],
        keep: Callable[[T], bool] = lambda obj: True,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        watch_timeout_s: int = 300,
        retry_delay_s: float = 1.0,
    ) -> None:
        self.project = project
        self.keep = keep
        self.cluster = cluster
        self.kind = kind
        self.handler = handler
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.watch_timeout_s = watch_timeout_s
        self.retry_delay_s = retry_delay_s
        self.cache: dict[tuple[str, str], T] = {}
        self.resource_version = ""
        self.relists = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _key(obj: Obj) -> tuple[str, str]:
        return sys.intern(namespace_of(obj)), name_of(obj)

    def sync(self) -> None:
        """List, and report every difference from the cache (all objects, the first time).

        Only once the whole list is read: one that fails halfway reports nothing and leaves
        the cache as it was, so the next one does not report a change twice."""
        fresh: dict[tuple[str, str], T] = {}
        changed: list[tuple[T | None, T]] = []

        def each(obj: Obj) -> None:
            key = self._key(obj)
            item = self.project(obj)
            old = self.cache.get(key)
            # Equal after projection means the same resourceVersion: nothing changed.
            if old is None or old != item:
                changed.append((old, item))
            if self.keep(item):
                fresh[key] = item

        _, version = self.cluster.list_versioned(
            self.kind, self.namespace, self.label_selector, self.field_selector, each
        )
        for old, item in changed:
            self.handler(old, item)
        changed.clear()
        for key, gone in self.cache.items():
            if key not in fresh:
                self.handler(gone, None)
        self.cache = fresh
        self.resource_version = version
        self.relists += 1

    def watch_once(self) -> None:
        """One watch stream, to its end; a 410 relists instead."""
        try:
            for event_type, obj in self.cluster.watch(
                self.kind,
                self.resource_version,
                self.namespace,
                self.label_selector,
                self.field_selector,
                self.watch_timeout_s,
            ):
                version = meta(obj).get("resourceVersion")
                if event_type != "BOOKMARK":
                    key = self._key(obj)
                    item = self.project(obj)
                    old = self.cache.get(key)
                    if event_type == "DELETED":
                        self.cache.pop(key, None)
                        self.handler(old, None)
                    else:
                        if self.keep(item):
                            self.cache[key] = item
                        else:
                            self.cache.pop(key, None)
                        self.handler(old, item)
                if version:
                    self.resource_version = str(version)
                if self._stop.is_set():
                    return
        except WatchExpired:
            self.sync()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self.relists:
                    self.sync()
                started = time.monotonic()
                self.watch_once()
                if time.monotonic() - started < 0.05:
                    # A stream that ends at once (a server shutting down): do not spin.
                    self._stop.wait(self.retry_delay_s)
            except TemporaryError:
                # The API server is away: wait, then resume from the last version seen.
                self._stop.wait(self.retry_delay_s)
            except Exception:  # a bad object or a handler bug must not end the watch for good
                log.exception("informer %s failed; it will list again", self.kind)
                self._stop.wait(self.retry_delay_s)
                self.resource_version = ""
                self.relists = 0

    def start(self) -> Informer[T]:
        self._thread = threading.Thread(target=self.run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 1.0) -> None:
        """Ask the thread to end; it does at the next event or stream end (it is a daemon)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)


class KubeSignals:
    """Watches nodes, GPU pods and events, and hands every derived Signal to `emit`."""

    def __init__(
        self,
        cluster: Cluster,
        emit: Callable[[Signal], None],
        *,
        clock: Clock = utcnow,
        gpu_resource: str = "nvidia.com/gpu",
        operator_namespaces: tuple[str, ...] = ("gpu-operator",),
        watch_timeout_s: int = 300,
    ) -> None:
        self.emit = emit
        self.cluster = cluster
        self.clock = clock
        self.gpu_resource = gpu_resource
        self.operator_namespaces = operator_namespaces
        self.gpu_pods: set[tuple[str, str]] = set()
        self.nodes = Informer(
            cluster,
            "Node",
            self._on_node,
            watch_timeout_s=watch_timeout_s,
            project=lambda node: node_state(node, gpu_resource),
        )
        self.pods = Informer(
            cluster,
            "Pod",
            self._on_pod,
            watch_timeout_s=watch_timeout_s,
            project=lambda pod: pod_state(pod, operator_namespaces),
            keep=lambda pod: pod.relevant,
        )
        # Events only ever matter when new: cache none of them (a relist re-reads them).
        self.events = Informer(
            cluster,
            "Event",
            self._on_event,
            watch_timeout_s=watch_timeout_s,
            project=event_state,
            keep=lambda event: False,
        )

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return self.nodes, self.pods, self.events

    def _send(self, signals: list[Signal]) -> None:
        for signal in signals:
            self.emit(signal)

    def _on_node(self, old: NodeState | None, new: NodeState | None) -> None:
        self._send(node_signals(old, new, self.clock()))

    def _on_pod(self, old: PodState | None, new: PodState | None) -> None:
        pod = new or old
        if pod is None:
            return
        key = (pod.namespace, pod.name)
        if new is None or not pod.relevant:
            self.gpu_pods.discard(key)
            return
        if new.requests_gpu:
            self.gpu_pods.add(key)
        self._send(pod_signals(old, new, self.clock()))

    def _on_event(self, old: EventState | None, new: EventState | None) -> None:
        if new is None:
            return
        key = new.involved
        if new.reason == "FailedScheduling" and key not in self.gpu_pods:
            # The event may outrun the pod's own watch event: ask for the pod.
            try:
                pod = self.cluster.get("Pod", key[0], key[1])
            except GpubotError:
                pod = {}
            if pod and requests_gpu(pod):
                self.gpu_pods.add(key)
        self._send(event_signals(new, self.clock(), self.gpu_pods))

    def start(self) -> KubeSignals:
        self.nodes.start()
        self.pods.start()
        # Events name pods: know which pods ask for GPUs before reading any event.
        deadline = time.monotonic() + 30
        while not self.pods.relists and time.monotonic() < deadline:
            time.sleep(0.02)
        self.events.start()
        return self

    def stop(self) -> None:
        for informer in self.informers:
            informer.stop(timeout_s=0)
        for informer in self.informers:
            informer.stop(timeout_s=0.5)

    def wait_synced(self, timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(i.relists for i in self.informers):
                return True
            time.sleep(0.05)
        return False
