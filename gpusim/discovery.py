"""The simulated API server's discovery: `/version`, `/api`, `/apis`, each group version's
resource list, and the OpenAPI v3 kubectl reads before it writes (`gpusim.openapi`).

kubectl and client-go find every kind, its verbs, short names and subresources here before
they send anything, so these documents are derived from `RESOURCES`, the one list of what the
server serves: a kind is discoverable exactly when it is served. Pure data: it must never read
the cluster, nor describe a kind or subresource the server does not serve.
"""

from __future__ import annotations

from gpusim.api_requests import NOT_FOUND
from gpusim.objects import Json
from gpusim.openapi import openapi_v3
from gpusim.resources import RESOURCES, ApiError

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-gpubot-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-11-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def discovery(parts: list[str], port: int) -> Json | None:
    """The discovery document a GET of this path answers, None when the path is not one
    (`port`: the server's, which `/api` names as its address)."""
    if parts[:2] == ["openapi", "v3"]:
        return openapi_v3(parts)
    if parts in (["version"], ["version", ""]):
        return KUBERNETES_VERSION
    if parts == ["api"]:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{port}"}
            ],
        }
    if parts == ["api", "v1"]:
        return _resource_list("", "v1")
    if parts == ["apis"]:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": _groups()}
    if len(parts) == 2 and parts[0] == "apis":
        group = next((g for g in _groups() if g["name"] == parts[1]), None)
        if group is None:
            raise ApiError(404, "NotFound", NOT_FOUND)
        return {"kind": "APIGroup", "apiVersion": "v1", **group}
    if len(parts) == 3 and parts[0] == "apis":
        listing = _resource_list(parts[1], parts[2])
        if not listing["resources"]:
            raise ApiError(404, "NotFound", NOT_FOUND)
        return listing
    return None


def _resource_list(group: str, version: str) -> Json:
    resources: list[Json] = []
    for r in RESOURCES:
        if (r.group, r.version) != (group, version):
            continue
        resources.append(
            {
                "name": r.plural,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": list(r.verbs),
                **({"shortNames": list(r.short_names)} if r.short_names else {}),
            }
        )
        for sub in r.subresources:
            entry: Json = {
                "name": f"{r.plural}/{sub}",
                "singularName": "",
                "namespaced": r.namespaced,
            }
            if sub == "eviction":
                entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
            elif sub == "log":
                entry.update(kind="Pod", verbs=["get"])
            else:
                entry.update(kind=r.kind, verbs=["get", "patch", "update"])
            resources.append(entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _groups() -> list[Json]:
    seen: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group:
            seen.setdefault(r.group, [])
            if r.version not in seen[r.group]:
                seen[r.group].append(r.version)
    return [
        {
            "name": group,
            "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
            "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]},
        }
        for group, versions in seen.items()
    ]
