"""How a snapshot's objects enter the simulated store: kept as they are, made whole where a
snapshot leaves them short.

A cluster is seeded from what `kubectl get -o json` prints (the scenarios, a must-gather,
the bootstrap policy), not created through the API: uids and timestamps are the snapshot's
own. Where a snapshot leaves something out, it is filled in so the cluster reads coherently
(`kubectl get` ages, `kubectl describe`'s events by uid) rather than as made "now".

It must never apply the API's create rules (generated names, new uids, a fresh
creationTimestamp: `gpusim.state`), nor change an object the store already holds.
"""

from __future__ import annotations

import copy
import uuid

from bot.kube_objects import meta
from gpusim.objects import Json
from gpusim.resources import BY_KIND
from gpusim.storage import ObjectStore, now_stamp


def birth(store: ObjectStore) -> str:
    """When the cluster was made: the oldest creationTimestamp it holds (now if empty)."""
    with store.lock:
        stamps = [
            str(meta(obj).get("creationTimestamp"))
            for kind in ("Namespace", "Node")
            for obj in store.objects(BY_KIND[kind])
            if meta(obj).get("creationTimestamp")
        ]
    return min(stamps) if stamps else now_stamp()


def load(store: ObjectStore, items: list[Json], *, missing_only: bool = False) -> None:
    """Objects as a snapshot holds them (kind on each item), kept as they are.

    A snapshot's objects without a creationTimestamp (kubectl's builders leave it out of
    PDBs and DaemonSets) are dated coherently, not "now": an Event at its first
    occurrence, anything else (and the namespaces it needs) at the cluster's birth, the
    oldest timestamp among what is loaded and already held. An Event whose
    involvedObject names a held object by kind and name but with another uid gets that
    object's uid (a recorder takes it from the object), so `kubectl describe`, which
    selects events by uid, finds it. With `missing_only`, objects already held are left
    as they are (what kube-apiserver's bootstrap hooks do)."""
    with store.lock:
        stamps = [
            str(meta(i).get("creationTimestamp")) for i in items if meta(i).get("creationTimestamp")
        ]
        born = min([*stamps, birth(store)])
        for item in items:
            resource = BY_KIND.get(str(item.get("kind")))
            if resource is None or not resource.stored:
                continue
            obj = copy.deepcopy(item)
            obj.setdefault("apiVersion", resource.api_version)
            metadata = obj.setdefault("metadata", {})
            metadata.setdefault("uid", str(uuid.uuid4()))
            if resource.kind == "Event":
                first = obj.get("firstTimestamp") or obj.get("eventTime") or born
                metadata.setdefault("creationTimestamp", str(first)[:19] + "Z")
            metadata.setdefault("creationTimestamp", born)
            namespace = metadata.get("namespace", "") if resource.namespaced else ""
            if resource.namespaced:
                metadata["namespace"] = namespace or "default"
                store.ensure_namespace(metadata["namespace"], born)
            key = (metadata.get("namespace", ""), metadata["name"])
            if missing_only and store.held(resource, key) is not None:
                continue
            if resource.kind == "Event":
                _fix_involved_uid(store, obj, items)
            store.put("ADDED", resource, key, obj)


def _fix_involved_uid(store: ObjectStore, event: Json, items: list[Json]) -> None:
    involved = event.get("involvedObject") or {}
    resource = BY_KIND.get(str(involved.get("kind")))
    if resource is None or not resource.stored:
        return
    namespace = str(involved.get("namespace", "")) if resource.namespaced else ""
    named = store.held(resource, (namespace, str(involved.get("name", ""))))
    if named is None:
        named = next(
            (
                i
                for i in items
                if i.get("kind") == resource.kind
                and meta(i).get("name") == involved.get("name")
                and str(meta(i).get("namespace", "") if resource.namespaced else "") == namespace
            ),
            None,
        )
    uid = meta(named).get("uid") if named is not None else None
    if uid:
        involved["uid"] = uid
