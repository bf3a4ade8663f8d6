"""Kubernetes watches -> Signals.

Two halves: pure functions that compare an object before and after a change and say which
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
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from bot.clock import Clock, utcnow
from bot.errors import GpubotError, TemporaryError, WatchExpired
from bot.evidence.pods import component_of
from bot.kube.objects import Obj, labels_of, meta, name_of, namespace_of, spec_of, status_of
from bot.model import Signal
from bot.ports import Cluster, Kind

log = logging.getLogger(__name__)
Handler = Callable[[Obj | None, Obj | None], None]

_MIG_STATE = "nvidia.com/mig.config.state"
_DRIVER = "nvidia.com/cuda.driver-version.full"
_UPGRADE = "nvidia.com/gpu-driver-upgrade-state"
_WATCHED_LABELS = {
    _MIG_STATE: "MIGConfigStateChanged",
    _DRIVER: "DriverVersionChanged",
    _UPGRADE: "DriverUpgradeStateChanged",
}


def _signal(
    name: str,
    node: str | None,
    obj: Obj,
    now: datetime,
    labels: dict[str, str],
    status: str = "firing",
) -> Signal:
    meta = obj.get("metadata") or {}
    # One change, one fingerprint: the same transition seen again after a relist dedups.
    identity = f"{name}/{node}/{meta.get('uid', '')}/{meta.get('resourceVersion', '')}"
    return Signal(
        source="kube",
        name=name,
        status="resolved" if status == "resolved" else "firing",
        node=node,
        labels={"alertname": name, **({"node": node} if node else {}), **labels},
        starts_at=now,
        fingerprint=hashlib.sha256(identity.encode()).hexdigest()[:16],
    )


def _ready(node: Obj | None) -> str:
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status"))
    return "Unknown" if node else ""


MIG_PREFIX = "nvidia.com/mig-"


def _gpus(node: Obj | None, resource: str) -> dict[str, int]:
    """The node's allocatable GPUs: whole ones (`resource`) and MIG instances (each
    nvidia.com/mig-* profile), which is all a MIG node offers."""
    allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
    return {
        key: int(str(value) or 0)
        for key, value in allocatable.items()
        if key == resource or str(key).startswith(MIG_PREFIX)
    }


def node_signals(
    old: Obj | None, new: Obj | None, now: datetime, gpu_resource: str = "nvidia.com/gpu"
) -> list[Signal]:
    if new is None:
        return []
    name = name_of(new)
    signals: list[Signal] = []
    before, after = _ready(old), _ready(new)
    if after != "True" and before != after:
        signals.append(
            _signal("NodeNotReady", name, new, now, {"from": before or "none", "to": after})
        )
    elif after == "True" and before not in ("", "True"):
        signals.append(_signal("NodeReady", name, new, now, {"from": before}, "resolved"))
    if old is None:
        return signals
    was, now_gpus = _gpus(old, gpu_resource), _gpus(new, gpu_resource)
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
    boot_before = (status_of(old).get("nodeInfo") or {}).get("bootID")
    boot_after = (status_of(new).get("nodeInfo") or {}).get("bootID")
    if boot_before and boot_after and boot_before != boot_after:
        signals.append(
            _signal("NodeRebooted", name, new, now, {"from": boot_before, "to": boot_after})
        )
    old_labels, new_labels = labels_of(old), labels_of(new)
    for label, signal_name in _WATCHED_LABELS.items():
        if old_labels.get(label) != new_labels.get(label):
            signals.append(
                _signal(
                    signal_name,
                    name,
                    new,
                    now,
                    {"from": old_labels.get(label, ""), "to": new_labels.get(label, "")},
                )
            )
    was_cordoned = bool(spec_of(old).get("unschedulable"))
    is_cordoned = bool(spec_of(new).get("unschedulable"))
    if was_cordoned != is_cordoned:
        signals.append(
            _signal("NodeCordoned" if is_cordoned else "NodeUncordoned", name, new, now, {})
        )
    return signals


def _statuses(pod: Obj | None) -> dict[str, Obj]:
    status = (pod or {}).get("status") or {}
    return {
        str(s.get("name")): s
        for s in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]
    }


def pod_signals(old: Obj | None, new: Obj | None, now: datetime) -> list[Signal]:
    if new is None:
        return []
    node = spec_of(new).get("nodeName")
    base = {"pod": name_of(new), "namespace": namespace_of(new)}
    app = labels_of(new).get("app")
    if app:
        base["app"] = app
    signals = []
    before = _statuses(old)
    for container, status in _statuses(new).items():
        reason = ((status.get("state") or {}).get("waiting") or {}).get("reason")
        old_status = before.get(container) or {}
        old_reason = ((old_status.get("state") or {}).get("waiting") or {}).get("reason")
        if reason == "CrashLoopBackOff" and old_reason != "CrashLoopBackOff":
            signals.append(
                _signal(
                    "PodCrashLoopBackOff",
                    node,
                    new,
                    now,
                    {
                        **base,
                        "container": container,
                        "restarts": str(status.get("restartCount", 0)),
                    },
                )
            )
        elif old is not None and int(status.get("restartCount") or 0) > int(
            old_status.get("restartCount") or 0
        ):
            signals.append(
                _signal(
                    "PodRestarted",
                    node,
                    new,
                    now,
                    {
                        **base,
                        "container": container,
                        "restarts": str(status.get("restartCount", 0)),
                    },
                )
            )
    return signals


def event_signals(event: Obj, now: datetime, gpu_pods: set[tuple[str, str]]) -> list[Signal]:
    """A scheduler's FailedScheduling for a pod that asks for GPUs."""
    involved = event.get("involvedObject") or {}
    key = (str(involved.get("namespace", "")), str(involved.get("name", "")))
    if event.get("reason") != "FailedScheduling" or key not in gpu_pods:
        return []
    labels = {"pod": key[1], "namespace": key[0], "message": str(event.get("message", ""))[:500]}
    return [_signal("GPUPodUnschedulable", None, event, now, labels)]


def requests_gpu(pod: Obj) -> bool:
    for container in spec_of(pod).get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        if any(k.startswith("nvidia.com/") for k in wanted):
            return True
    return False


def _pick(obj: Obj, *paths: tuple[str, ...]) -> Obj:
    out: Obj = {}
    for path in paths:
        source: Any = obj
        for key in path:
            source = source.get(key) if isinstance(source, dict) else None
        if source is None:
            continue
        target = out
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = source
    return out


_META = (
    ("kind",),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "uid"),
    ("metadata", "resourceVersion"),
    ("metadata", "labels"),
)


def slim_node(node: Obj) -> Obj:
    """What node_signals reads, and nothing else: the cache holds 5,000 of these."""
    return _pick(
        node,
        *_META,
        ("spec", "unschedulable"),
        ("status", "conditions"),
        ("status", "allocatable"),
        ("status", "nodeInfo", "bootID"),
    )


def slim_pod(pod: Obj) -> Obj:
    """What pod_signals and requests_gpu read; statuses keep only name, restarts and state."""
    slim = _pick(
        pod, *_META, ("metadata", "ownerReferences"), ("spec", "nodeName"), ("status", "phase")
    )
    containers = []
    for container in spec_of(pod).get("containers") or []:
        resources = container.get("resources") or {}
        wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        gpu = {k: v for k, v in wanted.items() if k.startswith("nvidia.com/")}
        containers.append({"name": container.get("name"), "resources": {"requests": gpu}})
    slim.setdefault("spec", {})["containers"] = containers
    for field in ("initContainerStatuses", "containerStatuses"):
        statuses = (status_of(pod).get(field)) or []
        if statuses:
            slim.setdefault("status", {})[field] = [
                {
                    "name": s.get("name"),
                    "restartCount": s.get("restartCount", 0),
                    "state": {"waiting": (s.get("state") or {}).get("waiting")}
                    if (s.get("state") or {}).get("waiting")
                    else {},
                }
                for s in statuses
            ]
    return slim


def slim_event(event: Obj) -> Obj:
    return _pick(event, *_META, ("involvedObject",), ("reason",), ("message",))


class Informer:
    """A cache of one kind kept current by list + watch; calls `handler(old, new)` per change.

    `project` trims each object before it is cached and handed on (the cache of a large
    cluster is the bot's biggest memory cost); `keep` leaves objects of no interest out of
    the cache altogether (they are still handed on once, as `(None, obj)`)."""

    def __init__(
        self,
        cluster: Cluster,
        kind: Kind,
        handler: Handler,
        *,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        watch_timeout_s: int = 300,
        retry_delay_s: float = 1.0,
        project: Callable[[Obj], Obj] = lambda obj: obj,
        keep: Callable[[Obj], bool] = lambda obj: True,
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
        self.cache: dict[tuple[str, str], Obj] = {}
        self.resource_version = ""
        self.relists = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _key(obj: Obj) -> tuple[str, str]:
        return namespace_of(obj), name_of(obj)

    def sync(self) -> None:
        """List, and report every difference from the cache (all objects, the first time)."""
        items, version = self.cluster.list_versioned(
            self.kind, self.namespace, self.label_selector, self.field_selector, self.project
        )
        fresh: dict[tuple[str, str], Obj] = {}
        for item in items:
            key = self._key(item)
            old = self.cache.get(key)
            old_rv = (old or {}).get("metadata", {}).get("resourceVersion")
            if old is None or old_rv != item.get("metadata", {}).get("resourceVersion"):
                self.handler(old, item)
            if self.keep(item):
                fresh[key] = item
        for key, old in self.cache.items():
            if key not in fresh:
                self.handler(old, None)
        self.cache = fresh
        del items
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
                    obj = self.project(obj)
                    key = self._key(obj)
                    old = self.cache.get(key)
                    if event_type == "DELETED":
                        self.cache.pop(key, None)
                        self.handler(old, None)
                    else:
                        if self.keep(obj):
                            self.cache[key] = obj
                        else:
                            self.cache.pop(key, None)
                        self.handler(old, obj)
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

    def start(self) -> Informer:
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
        self.informers = [
            Informer(
                cluster, "Node", self._on_node, watch_timeout_s=watch_timeout_s, project=slim_node
            ),
            Informer(
                cluster,
                "Pod",
                self._on_pod,
                watch_timeout_s=watch_timeout_s,
                project=slim_pod,
                keep=self._relevant,
            ),
            # Events only ever matter when new: cache none of them (a relist re-reads them).
            Informer(
                cluster,
                "Event",
                self._on_event,
                watch_timeout_s=watch_timeout_s,
                project=slim_event,
                keep=lambda event: False,
            ),
        ]

    def _send(self, signals: list[Signal]) -> None:
        for signal in signals:
            self.emit(signal)

    def _on_node(self, old: Obj | None, new: Obj | None) -> None:
        self._send(node_signals(old, new, self.clock(), self.gpu_resource))

    def _relevant(self, pod: Obj) -> bool:
        """GPU components (recognised by what they are, in any namespace), anything in the
        usual GPU namespaces, and pods requesting GPUs."""
        return (
            component_of(pod) is not None
            or namespace_of(pod) in self.operator_namespaces
            or requests_gpu(pod)
        )

    def _on_pod(self, old: Obj | None, new: Obj | None) -> None:
        pod = new or old or {}
        key = (namespace_of(pod), name_of(pod))
        if new is None or not self._relevant(pod):
            self.gpu_pods.discard(key)
            return
        if requests_gpu(new):
            self.gpu_pods.add(key)
        self._send(pod_signals(old, new, self.clock()))

    def _on_event(self, old: Obj | None, new: Obj | None) -> None:
        if new is None:
            return
        involved = new.get("involvedObject") or {}
        key = (str(involved.get("namespace", "")), str(involved.get("name", "")))
        if new.get("reason") == "FailedScheduling" and key not in self.gpu_pods:
            # The event may outrun the pod's own watch event: ask for the pod.
            try:
                pod = self.cluster.get("Pod", key[0], key[1])
            except GpubotError:
                pod = {}
            if pod and requests_gpu(pod):
                self.gpu_pods.add(key)
        self._send(event_signals(new, self.clock(), self.gpu_pods))

    def start(self) -> KubeSignals:
        nodes, pods, events = self.informers
        nodes.start()
        pods.start()
        # Events name pods: know which pods ask for GPUs before reading any event.
        deadline = time.monotonic() + 30
        while not pods.relists and time.monotonic() < deadline:
            time.sleep(0.02)
        events.start()
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
