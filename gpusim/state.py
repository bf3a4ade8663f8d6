"""The simulated API server's registry: the rules every read and write of an object follows.

It behaves as kube-apiserver's registry does over etcd for the calls kubectl and client-go
make: a create gets a uid, a creationTimestamp and, from `generateName`, a name; an update or
a patch naming a resourceVersion is a precondition; reads honour label and field selectors;
deletes respect grace periods and finalizers; evictions check PodDisruptionBudgets
(`gpusim.disruptions`); a budget's and a Job's status are recomputed on read. Errors are
`ApiError`s carrying the Status body the real server sends, so the HTTP layer only
serialises them. What is stored, its versions, watch window and indexes are
`gpusim.storage`'s; `ClusterState` is the one door to them that every part of the simulator
and every test uses.

It must never act as a controller (nothing here schedules, starts or replaces a pod: that is
`gpusim.controllers`) and never hold what no Kubernetes object records (GPU health, DCGM
counters: `gpusim.hardware`); it only applies the API's rules and answers.
"""

from __future__ import annotations

import builtins
import copy
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from bot.kube_objects import meta, namespace_of, spec_of
from gpusim import loaded_objects
from gpusim.disruptions import Disruptions
from gpusim.field_selectors import FieldSelector, parse_field_selector
from gpusim.job_counts import job_status
from gpusim.label_selectors import LabelSelector, SelectorError, parse_label_selector
from gpusim.objects import NAME_ALPHABET, Json
from gpusim.patching import PatchError, apply_patch
from gpusim.resources import BY_KIND, ApiError, ResourceType, conflict, not_found
from gpusim.storage import ObjectStore, now_stamp
from gpusim.watch_history import HISTORY, WatchEvent

SHUTDOWN_ANNOTATION = "sim.gpubot.io/shutdown-seconds"
"""Seconds a pod's containers take to stop after SIGTERM (capped by its grace period): what
keeps a deleted pod Terminating, as a slow workload does on a real kubelet."""


class ClusterState:
    """One simulated cluster as its API shows it: the registry's rules over the stored objects.
    It owns the storage (`ObjectStore`), the budgets' memory (`Disruptions`) and the records
    tests count (`evictions`, `direct_deletes`); it must never hold an object outside the
    storage, nor write one but through its own load, create, replace, patch, delete and
    evict."""

    def __init__(self, history: int = HISTORY) -> None:
        self._store = ObjectStore(history)
        self._lock = self._store.lock
        self._budgets = Disruptions(self._store)
        self.evictions: list[tuple[str, str]] = []
        """(namespace, name) of every pod evicted, in order: what tests and benchmarks count."""
        self.direct_deletes: list[tuple[str, str]] = []
        """Pods deleted with DELETE, bypassing the Eviction API (and so every PDB)."""

    @property
    def resource_version(self) -> int:
        """The version of the last write: what a list answers and a watch may start from."""
        return self._store.resource_version

    @property
    def kind_versions(self) -> dict[str, int]:
        """Per kind, the resourceVersion of its last write: what the API server's compiled
        RBAC policy and token table are keyed by."""
        return self._store.kind_versions

    # ---- writes -------------------------------------------------------------------------

    def load(self, items: list[Json], *, missing_only: bool = False) -> None:
        """Objects as a snapshot holds them, kept as they are (see `loaded_objects.load`)."""
        loaded_objects.load(self._store, items, missing_only=missing_only)

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
            if self._store.held(resource, key) is not None:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'{resource.plural} "{name}" already exists',
                    {"name": name, "kind": resource.plural},
                )
            obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = now_stamp()
            if resource.namespaced:
                metadata["namespace"] = namespace
                self._store.ensure_namespace(namespace)
            else:
                metadata.pop("namespace", None)
            if resource.kind == "Pod":
                self._budgets.stood_in(obj)
            self._store.put("ADDED", resource, key, obj)
            return copy.deepcopy(obj)

    def _current(self, resource: ResourceType, namespace: str, name: str) -> Json:
        obj = self._store.held(resource, (namespace if resource.namespaced else "", name))
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
            # Terminating, and nothing holds it any more: this write is its deletion.
            self._store.remove(resource, key, obj)
            return copy.deepcopy(obj)
        self._store.put("MODIFIED", resource, key, obj)
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
        self,
        resource: ResourceType,
        namespace: str,
        name: str,
        grace: int | None = None,
        preconditions: Json | None = None,
    ) -> Json:
        """Delete as the registry and the simulated kubelet do.

        Gone at once, unless finalizers hold the object (Terminating until they are removed)
        or a pod's containers take time to stop: the annotation SHUTDOWN_ANNOTATION says
        how many seconds after SIGTERM, capped by the grace period, as a kubelet would.
        `preconditions` (DeleteOptions' `uid`, `resourceVersion`) must hold, or it is the
        registry's 409."""
        with self._lock:
            current = self._current(resource, namespace, name)
            _check_preconditions(resource, current, preconditions)
            metadata = current["metadata"]
            shutdown = _shutdown_seconds(current, grace) if resource.kind == "Pod" else 0.0
            if shutdown > 0 and not metadata.get("finalizers"):
                if not metadata.get("deletionTimestamp"):
                    metadata["deletionTimestamp"] = now_stamp()
                    metadata["deletionGracePeriodSeconds"] = int(shutdown)
                    self._store.modified(resource, current)
                    timer = threading.Timer(
                        shutdown, self._kubelet_done, (resource, namespace, name, metadata["uid"])
                    )
                    timer.daemon = True
                    timer.start()
                return copy.deepcopy(current)
            if metadata.get("finalizers"):
                if not metadata.get("deletionTimestamp"):
                    metadata["deletionTimestamp"] = now_stamp()
                    metadata["deletionGracePeriodSeconds"] = 0 if grace is None else grace
                    self._store.modified(resource, current)
                return copy.deepcopy(current)
            self._store.remove(resource, (metadata.get("namespace", ""), name), current)
            return copy.deepcopy(current)

    def _kubelet_done(self, resource: ResourceType, namespace: str, name: str, uid: str) -> None:
        """The containers have stopped: the kubelet removes the pod (if finalizers allow)."""
        with self._lock:
            current = self._store.held(resource, (namespace, name))
            if current is None or meta(current).get("uid") != uid:
                return
            if meta(current).get("finalizers"):
                return
            self._store.remove(resource, (namespace, name), current)

    def evict(self, namespace: str, name: str, body: Json) -> Json:
        """POST pods/NAME/eviction: PDBs checked for Running pods, then a graceful delete."""
        pods = BY_KIND["Pod"]
        with self._lock:
            pod = self._current(pods, namespace, name)
            options = body.get("deleteOptions") or {}
            # The eviction's DeleteOptions reach the registry's delete; its preconditions are
            # checked before the budget, so a replacement pod of the same name is a 409.
            _check_preconditions(pods, pod, options.get("preconditions"))
            self._budgets.admit(pod)
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

    # ---- reads --------------------------------------------------------------------------

    def get(self, resource: ResourceType, namespace: str, name: str) -> Json:
        with self._lock:
            obj = copy.deepcopy(self._current(resource, namespace, name))
        status = self._status_on_read(resource)
        if status is not None:
            obj["status"] = status(obj)
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
        labels, fields = _selectors(resource, label_selector, field_selector)
        with self._lock:
            found, rv, following = self._store.select(
                resource, namespace, labels, fields, limit, after
            )
            items = [copy.deepcopy(obj) for obj in found]
        status = self._status_on_read(resource)
        if status is not None:
            for item in items:
                item["status"] = status(item)
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
        labels, fields = _selectors(resource, label_selector, field_selector)
        status = self._status_on_read(resource)
        with self._lock:
            found, rv, following = self._store.select(
                resource, namespace, labels, fields, limit, after
            )
            return [self._store.encoded(resource, obj, status) for obj in found], rv, following

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
        labels, fields = _selectors(resource, label_selector, field_selector)
        return self._store.watch(resource, namespace, since, labels, fields, stop, timeout_s)

    # ---- statuses recomputed on read ----------------------------------------------------

    def _status_on_read(self, resource: ResourceType) -> Callable[[Json], Json] | None:
        """The status a kind's controller would keep current, for the kinds whose status the
        simulator computes from their pods on each read instead."""
        if resource.kind == "PodDisruptionBudget":
            return self._budgets.status
        if resource.kind == "Job":
            return self._job_status
        return None

    def _job_status(self, job: Json) -> Json:
        with self._lock:
            return job_status(job, self._store.in_namespace(BY_KIND["Pod"], namespace_of(job)))


def _selectors(
    resource: ResourceType, label_selector: str, field_selector: str
) -> tuple[LabelSelector, FieldSelector]:
    """The request's selectors, parsed; the 400 the server answers for one it cannot parse."""
    try:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, resource.plural)
    except SelectorError as exc:
        raise ApiError(400, "BadRequest", str(exc)) from exc
    return labels, fields


def _shutdown_seconds(pod: Json, grace: int | None) -> float:
    declared = (meta(pod).get("annotations") or {}).get(SHUTDOWN_ANNOTATION)
    if not declared:
        return 0.0
    limit = grace if grace is not None else spec_of(pod).get("terminationGracePeriodSeconds", 30)
    return max(0.0, min(float(declared), float(limit)))


def _generated_name(base: str) -> str:
    """names.SimpleNameGenerator: the base cut to 58 characters, then 5 random ones from the
    alphabet that spells no words."""
    return base[:58] + "".join(random.choices(NAME_ALPHABET, k=5))


def _check_preconditions(resource: ResourceType, current: Json, preconditions: Json | None) -> None:
    """DeleteOptions' preconditions, as the registry checks them before a delete
    (k8s.io/apiserver storage `Preconditions.Check`): the 409 names what it wanted and what
    the object has."""
    if not preconditions:
        return
    metadata = current.get("metadata") or {}
    for field, have in (
        ("uid", metadata.get("uid")),
        ("resourceVersion", metadata.get("resourceVersion")),
    ):
        want = preconditions.get(field)
        if want is not None and str(want) != str(have):
            label = "UID" if field == "uid" else "ResourceVersion"
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource.plural} "{metadata.get("name", "")}": '
                f"Precondition failed: {label} in precondition: {want}, "
                f"{label} in object meta: {have}",
            )
