"""The simulated API server's state: objects, resourceVersions, watch history, evictions.

It behaves as etcd plus the API server's registry does for the calls kubectl and client-go
make: every write bumps one cluster-wide resourceVersion and records a watch event; reads
honour label and field selectors; deletes respect grace periods and finalizers; evictions
check PodDisruptionBudgets. Errors are `ApiError`s carrying the Status body the real server
sends, so the HTTP layer only serialises them.

It must never act as a controller (nothing here schedules, starts or replaces a pod: that is
`gpusim.controllers`) and never hold what no Kubernetes object records (GPU health, DCGM
counters: `gpusim.hardware`); it only stores, versions, selects and answers.

Over 600 lines because storing, versioning, selecting, paging and watching share one lock
and one resourceVersion counter: split, every part would need the other's lock.
"""

from __future__ import annotations

import bisect
import builtins
import copy
import itertools
import json
import random
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bot.kube_objects import (
    labels_of,
    meta,
    name_of,
    namespace_of,
    selector_matches,
    spec_of,
    status_of,
)
from gpusim.budgets import budget_status, counted, owner_key, violation
from gpusim.field_selectors import FieldSelector, parse_field_selector
from gpusim.label_selectors import LabelSelector, SelectorError, parse_label_selector
from gpusim.objects import Json
from gpusim.patching import PatchError, apply_patch
from gpusim.resources import BY_KIND, RESOURCES, ApiError, ResourceType, conflict, not_found

_HISTORY = 20_000


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class WatchEvent:
    """One entry of the watch history: the object as it was written at that version."""

    resource_version: int
    type: str
    resource: ResourceType
    object: Json


class ClusterState:
    """Every object of one simulated cluster, its resourceVersion and its watch history: what
    etcd and kube-apiserver's registry hold together. It owns the API's state and its rules
    (versions, selectors, finalizers, grace periods, budgets) and nothing else: what no
    Kubernetes object records (GPU health, DCGM counters) lives beside it, keyed by it."""

    def __init__(self, history: int = _HISTORY) -> None:
        self._lock = threading.Condition(threading.RLock())
        # An empty store is at 1000; the first write is 1001, so a watch from 1000 sees it.
        self._rv = itertools.count(1001)
        self.resource_version = 1000
        self._objects: dict[ResourceType, dict[tuple[str, str], Json]] = {r: {} for r in RESOURCES}
        self._history: deque[WatchEvent] = deque(maxlen=history)
        self._key_index: dict[ResourceType, list[tuple[str, str]]] = {}
        """Sorted keys per resource for paging, dropped whenever one is added or removed."""
        self._pods_by_node: dict[str, list[tuple[str, str]]] | None = None
        """Sorted pod keys per `spec.nodeName` ("" for unbound), dropped on any pod write:
        kube-apiserver indexes pods by node name for the same field selector (kubelets and
        drains ask it constantly), so a list by node costs what the node holds."""
        self._encodings: dict[tuple[str, str, str], tuple[tuple[int, str, int], bytes]] = {}
        """Per object, its JSON at one version (the dict's identity and resourceVersion, and
        for a PDB the pods' version)."""
        self._pods_version = 0
        self.kind_versions: dict[str, int] = {}
        """Per kind, the resourceVersion of its last write: what the API server's compiled
        RBAC policy and token table are keyed by."""
        self.evictions: list[tuple[str, str]] = []
        """(namespace, name) of every pod evicted, in order: what tests and benchmarks count."""
        self.direct_deletes: list[tuple[str, str]] = []
        self._disrupted: dict[tuple[str, str], list[str]] = {}
        """Per PDB, the owners of pods it let go that no replacement has stood in for yet:
        as the real budget's disruptedPods, they keep counting as expected pods."""
        """Pods deleted with DELETE, bypassing the Eviction API (and so every PDB)."""

    # ---- writes -------------------------------------------------------------------------

    def _bump(self, event_type: str, resource: ResourceType, obj: Json) -> None:
        if event_type != "MODIFIED":
            self._key_index.pop(resource, None)
        if event_type == "DELETED":
            metadata = meta(obj)
            self._encodings.pop(
                (resource.kind, str(metadata.get("namespace", "")), str(metadata.get("name", ""))),
                None,
            )
        if resource.kind == "Pod":
            self._pods_by_node = None
            self._pods_version += 1
        self.resource_version = next(self._rv)
        self.kind_versions[resource.kind] = self.resource_version
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
        self._history.append(
            WatchEvent(self.resource_version, event_type, resource, copy.deepcopy(obj))
        )
        self._lock.notify_all()

    def _ensure_namespace(self, namespace: str, created: str | None = None) -> None:
        namespaces = self._objects[BY_KIND["Namespace"]]
        if namespace and ("", namespace) not in namespaces:
            ns = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": namespace,
                    "uid": str(uuid.uuid4()),
                    "creationTimestamp": created or _now(),
                    "labels": {"kubernetes.io/metadata.name": namespace},
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"},
            }
            namespaces[("", namespace)] = ns
            self._bump("ADDED", BY_KIND["Namespace"], ns)

    def birth(self) -> str:
        """When the cluster was made: the oldest creationTimestamp it holds (now if empty)."""
        with self._lock:
            stamps = [
                str(meta(obj).get("creationTimestamp"))
                for kind in ("Namespace", "Node")
                for obj in self._objects[BY_KIND[kind]].values()
                if meta(obj).get("creationTimestamp")
            ]
        return min(stamps) if stamps else _now()

    def load(self, items: list[Json], *, missing_only: bool = False) -> None:
        """Objects as a snapshot holds them (kind on each item), kept as they are.

        A snapshot's objects without a creationTimestamp (kubectl's builders leave it out of
        PDBs and DaemonSets) are dated coherently, not "now": an Event at its first
        occurrence, anything else (and the namespaces it needs) at the cluster's birth, the
        oldest timestamp among what is loaded and already held. An Event whose
        involvedObject names a held object by kind and name but with another uid gets that
        object's uid (a recorder takes it from the object), so `kubectl describe`, which
        selects events by uid, finds it. With `missing_only`, objects already held are left
        as they are (what kube-apiserver's bootstrap hooks do)."""
        with self._lock:
            stamps = [
                str(meta(i).get("creationTimestamp"))
                for i in items
                if meta(i).get("creationTimestamp")
            ]
            birth = min([*stamps, self.birth()])
            for item in items:
                resource = BY_KIND.get(str(item.get("kind")))
                if resource is None or not resource.stored:
                    continue
                obj = copy.deepcopy(item)
                obj.setdefault("apiVersion", resource.api_version)
                metadata = obj.setdefault("metadata", {})
                metadata.setdefault("uid", str(uuid.uuid4()))
                if resource.kind == "Event":
                    first = obj.get("firstTimestamp") or obj.get("eventTime") or birth
                    metadata.setdefault("creationTimestamp", str(first)[:19] + "Z")
                metadata.setdefault("creationTimestamp", birth)
                namespace = metadata.get("namespace", "") if resource.namespaced else ""
                if resource.namespaced:
                    metadata["namespace"] = namespace or "default"
                    self._ensure_namespace(metadata["namespace"], birth)
                key = (metadata.get("namespace", ""), metadata["name"])
                if missing_only and key in self._objects[resource]:
                    continue
                if resource.kind == "Event":
                    self._fix_involved_uid(obj, items)
                self._objects[resource][key] = obj
                self._bump("ADDED", resource, obj)

    def _fix_involved_uid(self, event: Json, items: builtins.list[Json]) -> None:
        involved = event.get("involvedObject") or {}
        resource = BY_KIND.get(str(involved.get("kind")))
        if resource is None or not resource.stored:
            return
        namespace = str(involved.get("namespace", "")) if resource.namespaced else ""
        named = self._objects[resource].get((namespace, str(involved.get("name", ""))))
        if named is None:
            named = next(
                (
                    i
                    for i in items
                    if i.get("kind") == resource.kind
                    and meta(i).get("name") == involved.get("name")
                    and str(meta(i).get("namespace", "") if resource.namespaced else "")
                    == namespace
                ),
                None,
            )
        uid = meta(named).get("uid") if named is not None else None
        if uid:
            involved["uid"] = uid

    def create(self, resource: ResourceType, namespace: str, body: Json) -> Json:
        with self._lock:
            obj = copy.deepcopy(body)
            metadata = obj.setdefault("metadata", {})
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = _generated_name(str(metadata["generateName"]))
            name = metadata.get("name")
            if not name:
                raise ApiError(
                    422,
                    "Invalid",
                    f'{resource.kind} "" is invalid: metadata.name: Required value: '
                    "name or generateName is required",
                    {"kind": resource.kind},
                )
            key = (namespace if resource.namespaced else "", str(name))
            if key in self._objects[resource]:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{resource.plural} "{name}" already exists',
                    {"name": name, "kind": resource.plural},
                )
            obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = _now()
            if resource.namespaced:
                metadata["namespace"] = namespace
                self._ensure_namespace(namespace)
            else:
                metadata.pop("namespace", None)
            self._objects[resource][key] = obj
            if resource.kind == "Pod":
                # A replacement stands in for a pod a budget let go.
                for pdb in self._covering_pdbs(obj):
                    owners = self._disrupted.get((namespace_of(pdb), name_of(pdb)), [])
                    if owner_key(obj) in owners:
                        owners.remove(owner_key(obj))
            self._bump("ADDED", resource, obj)
            return copy.deepcopy(obj)

    def _current(self, resource: ResourceType, namespace: str, name: str) -> Json:
        obj = self._objects[resource].get((namespace if resource.namespaced else "", name))
        if obj is None:
            raise not_found(resource, name)
        return obj

    def replace(self, resource: ResourceType, namespace: str, name: str, body: Json) -> Json:
        with self._lock:
            current = self._current(resource, namespace, name)
            wanted = str(meta(body).get("resourceVersion") or "")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise conflict(resource, name)
            return self._store_update(resource, current, copy.deepcopy(body))

    def _store_update(self, resource: ResourceType, current: Json, obj: Json) -> Json:
        metadata = obj.setdefault("metadata", {})
        for kept in ("uid", "creationTimestamp", "name", "namespace", "deletionTimestamp"):
            if kept in current["metadata"]:
                metadata[kept] = current["metadata"][kept]
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        key = (metadata.get("namespace", ""), metadata["name"])
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            del self._objects[resource][key]
            self._bump("DELETED", resource, obj)
            return copy.deepcopy(obj)
        self._objects[resource][key] = obj
        self._bump("MODIFIED", resource, obj)
        return copy.deepcopy(obj)

    def patch(
        self, resource: ResourceType, namespace: str, name: str, content_type: str, body: Any
    ) -> Json:
        with self._lock:
            current = self._current(resource, namespace, name)
            wanted = meta(body).get("resourceVersion") if isinstance(body, dict) else None
            if wanted and str(wanted) != current["metadata"]["resourceVersion"]:
                # A patch that names a resourceVersion is a precondition, as on the real server.
                raise conflict(resource, name)
            try:
                patched = apply_patch(content_type, current, body)
            except LookupError as exc:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/strategic-merge-patch+json",
                ) from exc
            except PatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from exc
            return self._store_update(resource, current, patched)

    def delete(
        self, resource: ResourceType, namespace: str, name: str, grace: int | None = None
    ) -> Json:
        """Delete as the registry and the simulated kubelet do.

        Gone at once, unless finalizers hold the object (Terminating until they are removed)
        or a pod's containers take time to stop: the annotation SHUTDOWN_ANNOTATION says
        how many seconds after SIGTERM, capped by the grace period, as a kubelet would."""
        with self._lock:
            current = self._current(resource, namespace, name)
            metadata = current["metadata"]
            shutdown = _shutdown_seconds(current, grace) if resource.kind == "Pod" else 0.0
            if shutdown > 0 and not metadata.get("finalizers"):
                if not metadata.get("deletionTimestamp"):
                    metadata["deletionTimestamp"] = _now()
                    metadata["deletionGracePeriodSeconds"] = int(shutdown)
                    self._bump("MODIFIED", resource, current)
                    timer = threading.Timer(
                        shutdown, self._kubelet_done, (resource, namespace, name, metadata["uid"])
                    )
                    timer.daemon = True
                    timer.start()
                return copy.deepcopy(current)
            if metadata.get("finalizers"):
                if not metadata.get("deletionTimestamp"):
                    metadata["deletionTimestamp"] = _now()
                    metadata["deletionGracePeriodSeconds"] = 0 if grace is None else grace
                    self._bump("MODIFIED", resource, current)
                return copy.deepcopy(current)
            del self._objects[resource][(metadata.get("namespace", ""), name)]
            self._bump("DELETED", resource, current)
            return copy.deepcopy(current)

    def _kubelet_done(self, resource: ResourceType, namespace: str, name: str, uid: str) -> None:
        """The containers have stopped: the kubelet removes the pod (if finalizers allow)."""
        with self._lock:
            current = self._objects[resource].get((namespace, name))
            if current is None or meta(current).get("uid") != uid:
                return
            if meta(current).get("finalizers"):
                return
            del self._objects[resource][(namespace, name)]
            self._bump("DELETED", resource, current)

    # ---- reads --------------------------------------------------------------------------

    def get(self, resource: ResourceType, namespace: str, name: str) -> Json:
        with self._lock:
            obj = copy.deepcopy(self._current(resource, namespace, name))
        if resource.kind == "PodDisruptionBudget":
            obj["status"] = self.pdb_status(obj)
        if resource.kind == "Job":
            obj["status"] = self.job_status(obj)
        return obj

    def list(
        self,
        resource: ResourceType,
        namespace: str,
        label_selector: str = "",
        field_selector: str = "",
    ) -> tuple[list[Json], int]:
        items, rv, _ = self.list_page(resource, namespace, label_selector, field_selector)
        return items, rv

    def _pod_keys_on(self, node: str) -> builtins.list[tuple[str, str]]:
        if self._pods_by_node is None:
            index: dict[str, builtins.list[tuple[str, str]]] = {}
            pods = self._objects[BY_KIND["Pod"]]
            for key in self._sorted_keys(BY_KIND["Pod"]):
                bound = str(spec_of(pods[key]).get("nodeName") or "")
                index.setdefault(bound, []).append(key)
            self._pods_by_node = index
        return self._pods_by_node.get(node, [])

    def _sorted_keys(self, resource: ResourceType) -> builtins.list[tuple[str, str]]:
        keys = self._key_index.get(resource)
        if keys is None:
            keys = self._key_index[resource] = sorted(self._objects[resource])
        return keys

    def list_page(
        self,
        resource: ResourceType,
        namespace: str,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        after: tuple[str, str] | None = None,
    ) -> tuple[builtins.list[Json], int, tuple[str, str] | None]:
        """Items in (namespace, name) order after `after`, at most `limit` (0: all), and the
        key to continue after when more remain: paging costs what the page holds."""
        with self._lock:
            found, rv, following = self._select(
                resource, namespace, label_selector, field_selector, limit, after
            )
            items = [copy.deepcopy(obj) for obj in found]
        if resource.kind == "PodDisruptionBudget":
            for item in items:
                item["status"] = self.pdb_status(item)
        if resource.kind == "Job":
            for item in items:
                item["status"] = self.job_status(item)
        return items, rv, following

    def list_page_encoded(
        self,
        resource: ResourceType,
        namespace: str,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        after: tuple[str, str] | None = None,
    ) -> tuple[builtins.list[bytes], int, tuple[str, str] | None]:
        """`list_page` as JSON, each object encoded once per version: kube-apiserver also
        answers lists from its cache of serialized objects rather than encoding every object
        of every list again."""
        with self._lock:
            found, rv, following = self._select(
                resource, namespace, label_selector, field_selector, limit, after
            )
            return [self._encoded(resource, obj) for obj in found], rv, following

    def _encoded(self, resource: ResourceType, obj: Json) -> bytes:
        metadata = meta(obj)
        key = (resource.kind, str(metadata.get("namespace", "")), str(metadata.get("name", "")))
        # A budget's or a Job's status follows its pods: any pod write makes it a new version.
        pods = self._pods_version if resource.kind in ("PodDisruptionBudget", "Job") else 0
        version = (id(obj), str(metadata.get("resourceVersion", "")), pods)
        cached = self._encodings.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        if resource.kind == "PodDisruptionBudget":
            obj = {**obj, "status": self.pdb_status(obj)}
        if resource.kind == "Job":
            obj = {**obj, "status": self.job_status(obj)}
        encoded = json.dumps(obj).encode()
        self._encodings[key] = (version, encoded)
        return encoded

    def _select(
        self,
        resource: ResourceType,
        namespace: str,
        label_selector: str,
        field_selector: str,
        limit: int,
        after: tuple[str, str] | None,
    ) -> tuple[builtins.list[Json], int, tuple[str, str] | None]:
        """The stored objects a list page holds (not copies: the caller holds the lock)."""
        try:
            labels = parse_label_selector(label_selector)
            fields = parse_field_selector(field_selector, resource.plural)
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        items: builtins.list[Json] = []
        following: tuple[str, str] | None = None
        keys = self._sorted_keys(resource)
        node = _node_name_wanted(fields) if resource.kind == "Pod" else None
        if node is not None:
            keys = self._pod_keys_on(node)
        start = bisect.bisect_right(keys, after) if after else 0
        objects = self._objects[resource]
        for key in itertools.islice(keys, start, None):
            obj = objects[key]
            if namespace and key[0] != namespace:
                continue
            if not (labels.matches(labels_of(obj)) and fields.matches(obj)):
                continue
            if limit and len(items) == limit:
                following = (
                    items[-1]["metadata"].get("namespace", ""),
                    items[-1]["metadata"]["name"],
                )
                break
            items.append(obj)
        return items, self.resource_version, following

    def watch(
        self,
        resource: ResourceType,
        namespace: str,
        since: int,
        label_selector: str = "",
        field_selector: str = "",
        stop: threading.Event | None = None,
        timeout_s: float = 300.0,
    ) -> Iterator[WatchEvent]:
        """Events after `since`; 410 Gone when the history no longer reaches back that far.

        Checks happen here, before the first event, so a server can still answer 4xx."""
        try:
            labels = parse_label_selector(label_selector)
            fields = parse_field_selector(field_selector, resource.plural)
        except SelectorError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc
        with self._lock:
            oldest = self._history[0].resource_version if self._history else self.resource_version
            if since and since < oldest - 1:
                raise ApiError(410, "Expired", f"too old resource version: {since} ({oldest - 1})")
        return self._events(resource, namespace, since, labels, fields, stop, timeout_s)

    def _events(
        self,
        resource: ResourceType,
        namespace: str,
        since: int,
        labels: LabelSelector,
        fields: FieldSelector,
        stop: threading.Event | None,
        timeout_s: float,
    ) -> Iterator[WatchEvent]:
        deadline = datetime.now(UTC).timestamp() + timeout_s
        cursor = since
        while not (stop and stop.is_set()) and datetime.now(UTC).timestamp() < deadline:
            with self._lock:
                if self._history and self._history[0].resource_version > cursor + 1:
                    # The watcher fell behind the history: tell it to relist, as etcd would.
                    oldest = self._history[0].resource_version - 1
                    expired = ApiError(
                        410, "Expired", f"too old resource version: {cursor} ({oldest})"
                    )
                    yield WatchEvent(cursor, "ERROR", resource, expired.status())
                    return
                start = bisect.bisect_right(self._history, cursor, key=lambda e: e.resource_version)
                pending = list(itertools.islice(self._history, start, None))
                if not pending:
                    self._lock.wait(timeout=0.2)
                    continue
            for event in pending:
                cursor = event.resource_version
                obj = event.object
                if event.resource is not resource:
                    continue
                if namespace and namespace_of(obj) != namespace:
                    continue
                if labels.matches(labels_of(obj)) and fields.matches(obj):
                    yield event

    # ---- the policy subresource ---------------------------------------------------------

    def pdb_status(self, pdb: Json) -> Json:
        """Recomputed on read, as the disruption controller keeps it current."""
        namespace = namespace_of(pdb)
        with self._lock:
            # Only the budget's namespace: a slice of the sorted pod keys, not every pod.
            keys = self._sorted_keys(BY_KIND["Pod"])
            start = bisect.bisect_left(keys, (namespace, ""))
            end = bisect.bisect_left(keys, (namespace + "\x00", ""))
            objects = self._objects[BY_KIND["Pod"]]
            selector = spec_of(pdb).get("selector")
            pods = counted(
                p
                for p in (objects[k] for k in keys[start:end])
                if selector_matches(selector, labels_of(p))
            )
            disrupted = len(self._disrupted.get((namespace, name_of(pdb)), []))
        return budget_status(pdb, pods, disrupted)

    def job_status(self, job: Json) -> Json:
        """A Job's pod counts, recomputed on read as the Job controller keeps them current
        (`active`: not finished and not terminating, `ready`, `succeeded`, `failed`); the rest
        of its status (startTime, conditions) as stored."""
        namespace, uid = namespace_of(job), str(meta(job).get("uid", ""))
        status = dict(status_of(job))
        counts = {"active": 0, "ready": 0, "succeeded": 0, "failed": 0}
        with self._lock:
            keys = self._sorted_keys(BY_KIND["Pod"])
            start = bisect.bisect_left(keys, (namespace, ""))
            end = bisect.bisect_left(keys, (namespace + "\x00", ""))
            objects = self._objects[BY_KIND["Pod"]]
            for key in keys[start:end]:
                pod = objects[key]
                refs = meta(pod).get("ownerReferences") or []
                if not any(r.get("uid") == uid and r.get("controller") for r in refs):
                    continue
                phase = status_of(pod).get("phase")
                if phase == "Succeeded":
                    counts["succeeded"] += 1
                elif phase == "Failed":
                    counts["failed"] += 1
                elif not meta(pod).get("deletionTimestamp"):
                    counts["active"] += 1
                    conditions = status_of(pod).get("conditions") or []
                    if any(
                        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
                    ):
                        counts["ready"] += 1
        for counted_as, value in counts.items():
            if value or counted_as == "ready":
                status[counted_as] = value
            else:
                status.pop(counted_as, None)
        return status

    def _covering_pdbs(self, pod: Json) -> builtins.list[Json]:
        return [
            pdb
            for pdb in self._objects[BY_KIND["PodDisruptionBudget"]].values()
            if namespace_of(pdb) == namespace_of(pod)
            and selector_matches(spec_of(pdb).get("selector"), labels_of(pod))
        ]

    def evict(self, namespace: str, name: str, body: Json) -> Json:
        """POST pods/NAME/eviction: PDBs checked for Running pods, then a graceful delete."""
        pods = BY_KIND["Pod"]
        with self._lock:
            pod = self._current(pods, namespace, name)
            if status_of(pod).get("phase") == "Running" and not meta(pod).get("deletionTimestamp"):
                covering = self._covering_pdbs(pod)
                for pdb in covering:
                    status = self.pdb_status(pdb)
                    if status["disruptionsAllowed"] <= 0:
                        raise violation(pdb, status)
                for pdb in covering:
                    key = (namespace_of(pdb), name_of(pdb))
                    self._disrupted.setdefault(key, []).append(owner_key(pod))
            options = body.get("deleteOptions") or {}
            grace = options.get("gracePeriodSeconds")
            self.delete(pods, namespace, name, grace)
            self.evictions.append((namespace, name))
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 201,
        }


SHUTDOWN_ANNOTATION = "sim.gpubot.io/shutdown-seconds"


def _shutdown_seconds(pod: Json, grace: int | None) -> float:
    declared = (meta(pod).get("annotations") or {}).get(SHUTDOWN_ANNOTATION)
    if not declared:
        return 0.0
    limit = grace if grace is not None else spec_of(pod).get("terminationGracePeriodSeconds", 30)
    return max(0.0, min(float(declared), float(limit)))


_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _generated_name(base: str) -> str:
    """names.SimpleNameGenerator: the base cut to 58 characters, then 5 random ones from the
    alphabet that spells no words."""
    return base[:58] + "".join(random.choices(_NAME_ALPHABET, k=5))


def _node_name_wanted(fields: FieldSelector) -> str | None:
    """The node a pod field selector pins with `spec.nodeName=X` (X may be ""), if any: the
    other requirements are still checked on each pod of that node."""
    for requirement in fields.requirements:
        if requirement.field == "spec.nodeName" and requirement.operator == "=":
            return requirement.value
    return None
