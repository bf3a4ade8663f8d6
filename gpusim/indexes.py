"""What the simulated store keeps to answer reads cheaply: sorted keys for paging, pods by node,
and each object's JSON at its current version.

kubectl, client-go informers and the bot list the same kinds over and over (kubelets and
drains ask for a node's pods constantly; a fleet has 100,000 pods), so, as kube-apiserver
indexes pods by `spec.nodeName` and answers lists from its cache of serialized objects, the
simulator keeps the same three caches. All are derived from the objects and dropped on the
writes that change them, so a read never sees a stale answer.

They must never write an object, decide what a read returns beyond the selection (statuses
recomputed on read are `gpusim.state`'s), or be touched without the store's lock.
"""

from __future__ import annotations

import bisect
import builtins
import itertools
import json
from collections.abc import Callable

from bot.kube_objects import labels_of, meta, spec_of
from gpusim.field_selectors import FieldSelector
from gpusim.label_selectors import LabelSelector
from gpusim.objects import Json
from gpusim.resources import BY_KIND, ResourceType

Key = tuple[str, str]
"""(namespace, name); the namespace is "" for a cluster-scoped object."""

_PODS = BY_KIND["Pod"]


class KeyIndex:
    """Per resource, its keys sorted; for pods, their keys per `spec.nodeName` ("" for
    unbound). It owns those two lists, rebuilt on demand and dropped by `written`; it must never
    change the objects it indexes, which it reads from the store's own dict."""

    def __init__(self, objects: dict[ResourceType, dict[Key, Json]]) -> None:
        self._objects = objects
        self._sorted: dict[ResourceType, list[Key]] = {}
        """Sorted keys per resource for paging, dropped whenever one is added or removed."""
        self._pods_by_node: dict[str, list[Key]] | None = None
        """Sorted pod keys per node, dropped on any pod write: a list by node costs what the
        node holds."""

    def written(self, event_type: str, resource: ResourceType) -> None:
        """Forget what a write made stale: the key order when an object came or went, the
        pods by node on any pod write (a MODIFIED pod may have been bound)."""
        if event_type != "MODIFIED":
            self._sorted.pop(resource, None)
        if resource.kind == "Pod":
            self._pods_by_node = None

    def sorted_keys(self, resource: ResourceType) -> list[Key]:
        keys = self._sorted.get(resource)
        if keys is None:
            keys = self._sorted[resource] = sorted(self._objects[resource])
        return keys

    def pod_keys_on(self, node: str) -> list[Key]:
        if self._pods_by_node is None:
            index: dict[str, list[Key]] = {}
            pods = self._objects[_PODS]
            for key in self.sorted_keys(_PODS):
                bound = str(spec_of(pods[key]).get("nodeName") or "")
                index.setdefault(bound, []).append(key)
            self._pods_by_node = index
        return self._pods_by_node.get(node, [])

    def in_namespace(self, resource: ResourceType, namespace: str) -> list[Json]:
        """The stored objects of one namespace: a slice of the sorted keys, not every object."""
        keys = self.sorted_keys(resource)
        start = bisect.bisect_left(keys, (namespace, ""))
        end = bisect.bisect_left(keys, (namespace + "\x00", ""))
        objects = self._objects[resource]
        return [objects[k] for k in keys[start:end]]

    def select(
        self,
        resource: ResourceType,
        namespace: str,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: int,
        after: Key | None,
    ) -> tuple[builtins.list[Json], Key | None]:
        """The stored objects a list page holds (not copies: the caller holds the lock), in
        key order after `after`, at most `limit` (0: all), and the key to continue after when
        more remain: paging costs what the page holds."""
        items: builtins.list[Json] = []
        following: Key | None = None
        keys = self.sorted_keys(resource)
        node = _node_name_wanted(fields) if resource.kind == "Pod" else None
        if node is not None:
            keys = self.pod_keys_on(node)
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
        return items, following


class EncodedObjects:
    """Per object, its JSON at one version. It owns that cache and the count of pod writes
    that dates the statuses recomputed from pods; it must never answer with an encoding older
    than the object or, for a status recomputed on read, older than the pods it counts."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, str], tuple[tuple[int, str, int], bytes]] = {}
        """(kind, namespace, name) -> (the dict's identity, its resourceVersion and, for a
        status recomputed from pods, the pods' version; the JSON)."""
        self._pods_version = 0

    def written(self, event_type: str, resource: ResourceType, obj: Json) -> None:
        if event_type == "DELETED":
            metadata = meta(obj)
            self._cache.pop(
                (resource.kind, str(metadata.get("namespace", "")), str(metadata.get("name", ""))),
                None,
            )
        if resource.kind == "Pod":
            self._pods_version += 1

    def encoded(
        self, resource: ResourceType, obj: Json, status: Callable[[Json], Json] | None
    ) -> bytes:
        """`obj` as JSON, encoded once per version; `status`, when given, recomputes its status
        from its pods, so any pod write makes it a new version."""
        metadata = meta(obj)
        key = (resource.kind, str(metadata.get("namespace", "")), str(metadata.get("name", "")))
        pods = self._pods_version if status is not None else 0
        version = (id(obj), str(metadata.get("resourceVersion", "")), pods)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        if status is not None:
            obj = {**obj, "status": status(obj)}
        encoded = json.dumps(obj).encode()
        self._cache[key] = (version, encoded)
        return encoded


def _node_name_wanted(fields: FieldSelector) -> str | None:
    """The node a pod field selector pins with `spec.nodeName=X` (X may be ""), if any: the
    other requirements are still checked on each pod of that node."""
    for requirement in fields.requirements:
        if requirement.field == "spec.nodeName" and requirement.operator == "=":
            return requirement.value
    return None
