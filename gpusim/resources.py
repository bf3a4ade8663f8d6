"""The kinds the simulated API server serves, and the failures it answers with.

One table (`RESOURCES`) says which kinds exist, under which group, version and plural, with
which short names and subresources: discovery, routing and storage all read it. `ApiError` is
a failed request carrying the `Status` body kube-apiserver sends for it, so the layers below
raise and the HTTP layer only serialises. This module must never hold state or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpusim.objects import Json


@dataclass(frozen=True)
class ResourceType:
    """One served kind: group, version, plural, scope, short names and subresources."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES = (
    ResourceType("", "v1", "Namespace", "namespaces", False, ("ns",), ("status",)),
    ResourceType("", "v1", "Node", "nodes", False, ("no",), ("status",)),
    ResourceType("", "v1", "Pod", "pods", True, ("po",), ("status", "eviction", "log")),
    ResourceType("", "v1", "Event", "events", True, ("ev",)),
    ResourceType(
        "policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("pdb",), ("status",)
    ),
    ResourceType("apps", "v1", "DaemonSet", "daemonsets", True, ("ds",), ("status",)),
    ResourceType("apps", "v1", "ReplicaSet", "replicasets", True, ("rs",), ("status",)),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
)
BY_KIND = {r.kind: r for r in RESOURCES}
BY_PLURAL = {(r.group, r.plural): r for r in RESOURCES}


class ApiError(Exception):
    """A failed request, with the `Status` the real API server would answer."""

    def __init__(
        self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})

    def status(self) -> Json:
        body: Json = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def not_found(resource: ResourceType, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{resource.plural}{"." + resource.group if resource.group else ""} "{name}" not found',
        {"name": name, "group": resource.group, "kind": resource.plural}
        if resource.group
        else {"name": name, "kind": resource.plural},
    )


def conflict(resource: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {resource.plural} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        {"name": name, "kind": resource.plural},
    )
