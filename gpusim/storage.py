"""The simulated cluster's storage: what etcd holds for kube-apiserver, and nothing of its rules.

Every object by kind and (namespace, name), the one cluster-wide resourceVersion every write
bumps, the watch window each write is recorded in (`gpusim.watch_history`) and the caches
derived from the objects (`gpusim.indexes`), all under one lock: a write and its version,
its watch event and the caches it makes stale are one step, so no reader sees one without
the others. That is why they live together here and the API's rules live in
`gpusim.state`, which takes this lock around a check and the write it allows.

It must never apply the API's rules (names, uids, preconditions, finalizers, grace periods,
budgets: `gpusim.state`) and never act on what it stores; it stores, versions and selects.
"""

from __future__ import annotations

import builtins
import itertools
import threading
import uuid
from collections.abc import Callable, Collection, Iterator
from datetime import UTC, datetime

from gpusim.field_selectors import FieldSelector
from gpusim.indexes import EncodedObjects, Key, KeyIndex
from gpusim.label_selectors import LabelSelector
from gpusim.objects import Json, ts
from gpusim.resources import BY_KIND, RESOURCES, ResourceType
from gpusim.watch_history import HISTORY, WatchEvent, WatchHistory


def now_stamp() -> str:
    """The server's clock as a Kubernetes timestamp (whole seconds, as metav1.Time marshals)."""
    return ts(datetime.now(UTC))


class ObjectStore:
    """Every object of one simulated cluster with its resourceVersion and watch window: what
    etcd holds. It owns the objects, the version counter, the per-kind versions, the lock, the
    window and the caches; it must never refuse or shape a write (that is the registry's,
    `ClusterState`) nor hand out a stored object to a caller that does not hold the lock."""

    def __init__(self, history: int = HISTORY) -> None:
        self.lock = threading.Condition(threading.RLock())
        """Taken by every read and write here, and by the registry around a check and the
        write it allows."""
        # An empty store is at 1000; the first write is 1001, so a watch from 1000 sees it.
        self._rv = itertools.count(1001)
        self.resource_version = 1000
        self.kind_versions: dict[str, int] = {}
        """Per kind, the resourceVersion of its last write: what the API server's compiled
        RBAC policy and token table are keyed by."""
        self._objects: dict[ResourceType, dict[Key, Json]] = {r: {} for r in RESOURCES}
        self._history = WatchHistory(self.lock, history)
        self._keys = KeyIndex(self._objects)
        self._encodings = EncodedObjects()

    # ---- writes (the caller holds the lock) ----------------------------------------------

    def put(self, event_type: str, resource: ResourceType, key: Key, obj: Json) -> None:
        """Hold `obj` under `key` (ADDED or MODIFIED) and record the write."""
        self._objects[resource][key] = obj
        self._bump(event_type, resource, obj)

    def modified(self, resource: ResourceType, obj: Json) -> None:
        """Record a write to an object changed where it is held (a deletionTimestamp set)."""
        self._bump("MODIFIED", resource, obj)

    def remove(self, resource: ResourceType, key: Key, obj: Json) -> None:
        del self._objects[resource][key]
        self._bump("DELETED", resource, obj)

    def _bump(self, event_type: str, resource: ResourceType, obj: Json) -> None:
        self._keys.written(event_type, resource)
        self._encodings.written(event_type, resource, obj)
        self.resource_version = next(self._rv)
        self.kind_versions[resource.kind] = self.resource_version
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
        self._history.record(self.resource_version, event_type, resource, obj)

    def ensure_namespace(self, namespace: str, created: str | None = None) -> None:
        """Make the namespace an object is written to, if none holds it yet: the scenarios
        and tests write into namespaces nobody created, which a real server would refuse."""
        namespaces = self._objects[BY_KIND["Namespace"]]
        if namespace and ("", namespace) not in namespaces:
            ns = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": namespace,
                    "uid": str(uuid.uuid4()),
                    "creationTimestamp": created or now_stamp(),
                    "labels": {"kubernetes.io/metadata.name": namespace},
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
            self.put("ADDED", BY_KIND["Namespace"], ("", namespace), ns)

    # ---- reads (the caller holds the lock; what they return is the stored object) ---------

    def held(self, resource: ResourceType, key: Key) -> Json | None:
        return self._objects[resource].get(key)

    def objects(self, resource: ResourceType) -> Collection[Json]:
        return self._objects[resource].values()

    def in_namespace(self, resource: ResourceType, namespace: str) -> builtins.list[Json]:
        return self._keys.in_namespace(resource, namespace)

    def select(
        self,
        resource: ResourceType,
        namespace: str,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int,
        after: Key | None,
    ) -> tuple[builtins.list[Json], int, Key | None]:
        """A list page's stored objects (see `KeyIndex.select`) and the version it was read at."""
        items, following = self._keys.select(resource, namespace, labels, fields, limit, after)
        return items, self.resource_version, following

    def encoded(
        self, resource: ResourceType, obj: Json, status: Callable[[Json], Json] | None
    ) -> bytes:
        return self._encodings.encoded(resource, obj, status)

    # ---- the watch window ---------------------------------------------------------------

    def watch(
        self,
        resource: ResourceType,
        namespace: str,
        since: int,
        labels: LabelSelector,
        fields: FieldSelector,
        stop: threading.Event | None,
        timeout_s: float,
    ) -> Iterator[WatchEvent]:
        """Events after `since`; 410 Gone, raised now, when the window no longer reaches back
        that far."""
        with self.lock:
            self._history.check(since, self.resource_version)
        return self._history.events(resource, namespace, since, labels, fields, stop, timeout_s)
