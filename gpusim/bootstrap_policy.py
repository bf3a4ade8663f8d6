"""The RBAC objects and namespaces every kube-apiserver creates when it starts.

kube-apiserver's `rbac/bootstrap-roles` post-start hook writes the default ClusterRoles and
ClusterRoleBindings (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go), labelled
`kubernetes.io/bootstrapping: rbac-defaults` and annotated for auto-update; kubeadm adds the
`kubeadm:cluster-admins` binding its admin.conf identity relies on
(cmd/kubeadm/app/phases/kubeconfig); the namespace controller and the system namespaces
controller keep `default`, `kube-system`, `kube-public` and `kube-node-lease`. This module holds
the ones a kubectl user and gpubot meet:

- `cluster-admin` (everything, bound to the group `system:masters`),
- `system:discovery` and `system:public-info-viewer` (the discovery, OpenAPI and version
  paths: without them no kubectl command of a ServiceAccount gets past discovery),
- `system:basic-user` (SelfSubjectAccessReview, SelfSubjectRulesReview and
  SelfSubjectReview for every authenticated user: what `kubectl auth can-i` and
  `kubectl auth whoami` need),
- the aggregated `view` ClusterRole and `system:aggregate-to-view`, whose rules are those of
  the real one for the kinds this simulator serves (its other kinds are left out).

Builders of plain data: they must never write to a cluster.
"""

from __future__ import annotations

from gpusim.objects import Json

_RBAC = "rbac.authorization.k8s.io/v1"
_DEFAULTS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
SYSTEM_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")

_READ = ["get", "list", "watch"]


def _cluster_role(name: str, rules: list[Json], labels: dict[str, str] | None = None) -> Json:
    return {
        "apiVersion": _RBAC,
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {**_DEFAULTS, **(labels or {})},
            "annotations": dict(_AUTOUPDATE),
        },
        "rules": rules,
    }


def _binding(name: str, role: str, groups: list[str], *, bootstrap: bool = True) -> Json:
    metadata: Json = {"name": name}
    if bootstrap:
        metadata.update(labels=dict(_DEFAULTS), annotations=dict(_AUTOUPDATE))
    return {
        "apiVersion": _RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}
            for group in groups
        ],
    }


def bootstrap_objects() -> list[Json]:
    """The default RBAC objects, without timestamps or uids (the store adds those)."""
    view = _cluster_role("view", [], {"rbac.authorization.k8s.io/aggregate-to-edit": "true"})
    view["aggregationRule"] = {
        "clusterRoleSelectors": [
            {"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}
        ]
    }
    return [
        _cluster_role(
            "cluster-admin",
            [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        ),
        _cluster_role(
            "system:discovery",
            [
                {
                    "nonResourceURLs": [
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                        "/healthz",
                        "/livez",
                        "/openapi",
                        "/openapi/*",
                        "/readyz",
                        "/version",
                        "/version/",
                    ],
                    "verbs": ["get"],
                }
            ],
        ),
        _cluster_role(
            "system:public-info-viewer",
            [
                {
                    "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"],
                }
            ],
        ),
        _cluster_role(
            "system:basic-user",
            [
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                },
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                },
            ],
        ),
        view,
        _cluster_role(
            "system:aggregate-to-view",
            [
                {
                    "apiGroups": [""],
                    "resources": [
                        "events",
                        "namespaces/status",
                        "pods",
                        "pods/log",
                        "pods/status",
                    ],
                    "verbs": _READ,
                },
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": _READ},
                {
                    "apiGroups": ["apps"],
                    "resources": [
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/status",
                        "replicasets",
                        "replicasets/status",
                    ],
                    "verbs": _READ,
                },
                {"apiGroups": ["batch"], "resources": ["jobs", "jobs/status"], "verbs": _READ},
                {
                    "apiGroups": ["policy"],
                    "resources": ["poddisruptionbudgets", "poddisruptionbudgets/status"],
                    "verbs": _READ,
                },
            ],
            {"rbac.authorization.k8s.io/aggregate-to-view": "true"},
        ),
        _binding("cluster-admin", "cluster-admin", ["system:masters"]),
        _binding("system:discovery", "system:discovery", ["system:authenticated"]),
        _binding("system:basic-user", "system:basic-user", ["system:authenticated"]),
        _binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            ["system:authenticated", "system:unauthenticated"],
        ),
        _binding(
            "kubeadm:cluster-admins", "cluster-admin", ["kubeadm:cluster-admins"], bootstrap=False
        ),
    ]


def system_namespaces() -> list[Json]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        }
        for name in SYSTEM_NAMESPACES
    ]
