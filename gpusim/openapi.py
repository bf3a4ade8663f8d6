"""The little of kube-apiserver's OpenAPI v3 that kubectl reads before it writes.

`kubectl create -f` (and apply, replace) validates strictly by default: it asks the server's
`/openapi/v3` whether the group version's PATCH operations take the `fieldValidation` query
parameter (k8s.io/cli-runtime `queryParamVerifierV3`, keyed by the operation's
`x-kubernetes-group-version-kind`); when they do it leaves validation to the server and sends
`?fieldValidation=Strict`, and when the document is missing it refuses to send anything
("failed to download openapi"). So the simulator serves the discovery root and, per group
version, the PATCH operations of the kinds it serves with that parameter, and nothing else:
no schemas. The server takes the parameter without enforcing it (with no schemas it cannot
tell an unknown field); a misspelt field is stored as sent instead of refused.

Pure data built from `RESOURCES`: it must never describe a kind the server does not serve.
"""

from __future__ import annotations

import hashlib
import json

from gpusim.objects import Json
from gpusim.resources import RESOURCES, ApiError, ResourceType

_FIELD_VALIDATION = {
    "name": "fieldValidation",
    "in": "query",
    "description": "fieldValidation instructs the server on how to handle objects in the "
    "request containing unknown or duplicate fields.",
    "schema": {"type": "string", "uniqueItems": True},
}


def _group_path(resource: ResourceType) -> str:
    return f"apis/{resource.group}/{resource.version}" if resource.group else "api/v1"


def _paths(group_path: str) -> Json:
    paths: Json = {}
    for resource in RESOURCES:
        if _group_path(resource) != group_path or "patch" not in resource.verbs:
            continue
        scope = "/namespaces/{namespace}" if resource.namespaced else ""
        path = f"/{group_path}{scope}/{resource.plural}/{{name}}"
        paths[path] = {
            "patch": {
                "operationId": f"patch{resource.kind}",
                "parameters": [_FIELD_VALIDATION],
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {
                    "group": resource.group,
                    "version": resource.version,
                    "kind": resource.kind,
                },
            }
        }
    return paths


def _document(group_path: str) -> Json:
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": _paths(group_path),
        "components": {},
    }


def _hash(group_path: str) -> str:
    encoded = json.dumps(_document(group_path), sort_keys=True).encode()
    return hashlib.sha512(encoded).hexdigest()[:128].upper()


def openapi_v3(parts: list[str]) -> Json:
    """`GET /openapi/v3` (the root: one entry per group version) or
    `GET /openapi/v3/<group version path>`."""
    groups = sorted({_group_path(r) for r in RESOURCES})
    if len(parts) == 2:
        return {
            "paths": {g: {"serverRelativeURL": f"/openapi/v3/{g}?hash={_hash(g)}"} for g in groups}
        }
    wanted = "/".join(parts[2:])
    if wanted not in groups:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    return _document(wanted)
