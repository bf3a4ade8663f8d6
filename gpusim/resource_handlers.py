"""The stored kinds' REST verbs, as kube-apiserver's generic registry handlers serve them:
list (paged with continue tokens, or as a Table), create, get, update, patch and delete of
an object and its `status`, and a pod's `eviction` and `log` subresources.

Each verb reads its request (`gpusim.api_requests`) and calls the registry
(`ClusterState`), whose rules and errors are the server's; what is left here is what the
HTTP layer adds: which call a path and method mean, the namespace a create falls back to,
the server's pod defaults on create, the list envelope and its continue token, and the
Table when the client asks for one. A DELETE of a pod is recorded apart from evictions
(`direct_deletes`), since it bypasses every budget.

It must never apply a rule of its own to an object (that is the registry's), nor serve a
kind that is not stored (`gpusim.computed_kinds` answers those).
"""

from __future__ import annotations

import base64
import json

from bot.kube_objects import meta
from gpusim.api_requests import NOT_FOUND, ApiRequest, method_not_allowed, object_body
from gpusim.defaulting import pod_on_create
from gpusim.objects import Json
from gpusim.pod_logs import pod_log
from gpusim.printing import table, wants_table
from gpusim.resources import ApiError, ResourceType
from gpusim.state import ClusterState

Answer = tuple[int, Json | str | bytes]
"""A status code and its body: an object, a log's text, or a list already encoded as JSON."""


def serve_stored(
    store: ClusterState,
    request: ApiRequest,
    method: str,
    resource: ResourceType,
    namespace: str,
    name: str,
    sub: str,
) -> Answer:
    """What `method` on this path of a stored kind answers."""
    if sub == "eviction" and method == "POST" and resource.kind == "Pod":
        return 201, store.evict(namespace, name, request.body())
    if sub == "log" and method == "GET" and resource.kind == "Pod":
        return 200, pod_log(store, store.get(resource, namespace, name), request.query)
    if sub and sub != "status":
        raise ApiError(404, "NotFound", NOT_FOUND)
    if not name:
        return _collection(store, request, method, resource, namespace)
    return _one(store, request, method, resource, namespace, name)


def _collection(
    store: ClusterState, request: ApiRequest, method: str, resource: ResourceType, namespace: str
) -> Answer:
    if method == "GET":
        return 200, _list(store, request, resource, namespace)
    if method == "POST":
        if resource.namespaced and not namespace:
            namespace = str(meta(request.body()).get("namespace") or "default")
        body = object_body(request.body(), resource)
        if resource.kind == "Pod":
            body = pod_on_create(body)
        return 201, store.create(resource, namespace, body)
    raise method_not_allowed()


def _one(
    store: ClusterState,
    request: ApiRequest,
    method: str,
    resource: ResourceType,
    namespace: str,
    name: str,
) -> Answer:
    if method == "GET":
        found = store.get(resource, namespace, name)
        if wants_table(request.accept):
            return 200, table(
                resource.kind,
                [found],
                str(meta(found).get("resourceVersion", "")),
                request.query.get("includeObject") or "PartialObjectMetadata",
            )
        return 200, found
    if method == "PUT":
        return 200, store.replace(resource, namespace, name, object_body(request.body(), resource))
    if method == "PATCH":
        return 200, store.patch(resource, namespace, name, request.content_type, request.body())
    if method == "DELETE":
        body = request.body()
        grace = body.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
        deleted = store.delete(
            resource,
            namespace,
            name,
            None if grace is None else int(grace),
            body.get("preconditions"),
        )
        if resource.kind == "Pod":
            store.direct_deletes.append((namespace, name))
        return 200, deleted
    raise method_not_allowed()


def _list(
    store: ClusterState, request: ApiRequest, resource: ResourceType, namespace: str
) -> bytes | Json:
    token = request.query.get("continue") or ""
    try:
        # [namespace, name, resourceVersion of the first page]
        decoded = json.loads(base64.urlsafe_b64decode(token)) if token else None
        after = (str(decoded[0]), str(decoded[1])) if decoded else None
        first_rv = int(decoded[2]) if decoded else None
        limit = int(request.query.get("limit") or 0)
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ApiError(400, "BadRequest", f"invalid continue token or limit: {exc}") from exc
    selectors = (request.query.get("labelSelector", ""), request.query.get("fieldSelector", ""))
    as_table = wants_table(request.accept)
    if as_table:
        objects, rv, following = store.list_page(resource, namespace, *selectors, limit, after)
    else:
        items, rv, following = store.list_page_encoded(
            resource, namespace, *selectors, limit, after
        )
    # Every page reports the first page's version: a watch from it replays whatever
    # changed while the later pages were read, as the real server's snapshot list does.
    rv = first_rv if first_rv is not None else rv
    metadata: Json = {"resourceVersion": str(rv)}
    if following is not None:
        position = json.dumps([following[0], following[1], rv]).encode()
        metadata["continue"] = base64.urlsafe_b64encode(position).decode()
    if as_table:
        return table(
            resource.kind,
            objects,
            str(rv),
            request.query.get("includeObject") or "PartialObjectMetadata",
            continue_token=metadata.get("continue"),
        )
    head = json.dumps(
        {
            "kind": f"{resource.kind}List",
            "apiVersion": resource.api_version,
            "metadata": metadata,
        }
    ).encode()
    return head[:-1] + b', "items": [' + b", ".join(items) + b"]}"
