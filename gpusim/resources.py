"""The kinds the simulated API server serves, and the failures it answers with.

One table (`RESOURCES`) says which kinds exist, under which group, version and plural, with
which short names, subresources and verbs: discovery, routing, authorization and storage all
read it. A kind that is not `stored` is answered on the spot and never kept (the access
reviews of authorization.k8s.io, the Metrics API's usage, which metrics-server computes on
the fly). `ApiError` is a failed request carrying the `Status` body kube-apiserver sends for
it, so the layers below raise and the HTTP layer only serialises. This module must never hold
state or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpusim.objects import Json

VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
"""What discovery lists for an ordinary stored kind (and what RBAC's `*` stands for there)."""
_CREATE_ONLY = ("create",)
_READ_ONLY = ("get", "list")


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
    verbs: tuple[str, ...] = VERBS
    stored: bool = True

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
    ResourceType("apps", "v1", "Deployment", "deployments", True, ("deploy",), ("status",)),
    ResourceType("batch", "v1", "Job", "jobs", True, (), ("status",)),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, ("sa",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    ResourceType(
        "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False
    ),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        False,
        verbs=_CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        False,
        verbs=_CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        False,
        verbs=_CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        True,
        verbs=_CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        False,
        verbs=_CREATE_ONLY,
        stored=False,
    ),
    ResourceType(
        "metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes", False, verbs=_READ_ONLY, stored=False
    ),
    ResourceType(
        "metrics.k8s.io", "v1beta1", "PodMetrics", "pods", True, verbs=_READ_ONLY, stored=False
    ),
)
STORED = tuple(r for r in RESOURCES if r.stored)
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
