"""What gpubot asks of the Kubernetes API, listed once, and the start-up check that the
credentials it runs with allow all of it.

`gpubot serve` calls `check_permissions` before it starts anything: one
SelfSubjectAccessReview per permission (what `kubectl auth can-i` sends), and when any is
refused it stops with one line naming each missing permission as `kubectl auth can-i` would
take it, instead of starting and failing every watch, list and patch with 403 over and over.
The list must follow the code: a call gpubot starts making needs its line here, and the Helm
chart's RBAC (helm/gpubot/templates/rbac.yaml) must grant it (a test renders the chart, loads
its RBAC into the simulator and runs this check as the chart's ServiceAccount).

It only asks; it never changes anything, and it talks to the API only through the
`AccessReviewer` it is given (bot.kube.cluster.KubeCluster).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from bot.config import Settings
from bot.errors import PermanentError


@dataclass(frozen=True)
class Permission:
    """One verb on one resource (and subresource), in one namespace ("" for every namespace
    or a cluster-scoped resource), on one name ("" for any): why gpubot needs it in `why`."""

    verb: str
    group: str
    resource: str
    why: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        """As `kubectl auth can-i` takes it: `patch nodes`, `create pods/eviction`,
        `update leases.coordination.k8s.io/gpubot-leader -n gpubot`."""
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            resource += f"/{self.subresource}"
        elif self.name:
            resource += f"/{self.name}"
        scope = f" -n {self.namespace}" if self.namespace else " (all namespaces)"
        if not self.namespace and self.resource in _CLUSTER_SCOPED:
            scope = ""
        return f"{self.verb} {resource}{scope}"


_CLUSTER_SCOPED = {"nodes"}


class AccessReviewer(Protocol):
    def can_i(
        self,
        verb: str,
        group: str,
        resource: str,
        *,
        subresource: str = "",
        namespace: str = "",
        name: str = "",
    ) -> bool: ...


class MissingPermissions(PermanentError):
    """The credentials gpubot runs with lack permissions it needs: nothing would work."""

    def __init__(self, user: str, missing: list[Permission]) -> None:
        listed = "; ".join(str(p) for p in missing)
        super().__init__(
            f"the Kubernetes credentials{f' ({user})' if user else ''} lack "
            f"{len(missing)} permission(s) gpubot needs: {listed} "
            "(grant them, e.g. with the Helm chart's RBAC)",
            403,
        )
        self.missing = missing


def required(settings: Settings) -> list[Permission]:
    """Every permission `gpubot serve` uses with these settings: the leader Lease where
    `serve` puts it, and the smoke-test pods where `remediation.smoke_test` runs them (only
    when it is on)."""
    lease_namespace, lease_name = settings.serve.lease_namespace, settings.serve.lease_name
    permissions = [
        Permission(verb, "", "nodes", "diagnose nodes; cordon, uncordon, annotate them")
        for verb in ("get", "list", "watch", "patch")
    ]
    permissions += [
        Permission(verb, "", "pods", "the pods on a node, what blocks a drain")
        for verb in ("get", "list", "watch")
    ]
    permissions.append(
        Permission("create", "", "pods", "drain: the Eviction API", subresource="eviction")
    )
    permissions += [
        Permission(verb, "", "events", "node and scheduling events") for verb in ("list", "watch")
    ]
    permissions.append(
        Permission("list", "policy", "poddisruptionbudgets", "what a drain may evict")
    )
    permissions += [
        Permission(verb, "apps", "daemonsets", "DaemonSet pods stay on a drained node")
        for verb in ("get", "list")
    ]
    permissions.append(
        Permission(
            "create", "coordination.k8s.io", "leases", "leader election", namespace=lease_namespace
        )
    )
    permissions += [
        Permission(
            verb,
            "coordination.k8s.io",
            "leases",
            "leader election",
            namespace=lease_namespace,
            name=lease_name,
        )
        for verb in ("get", "update")
    ]
    smoke = settings.remediation.smoke_test
    if smoke.enabled:
        # Reading the pod back is `get pods`, granted everywhere above.
        permissions += [
            Permission(
                verb, "", "pods", "the health gate's smoke-test pod", namespace=smoke.namespace
            )
            for verb in ("create", "delete")
        ]
        permissions.append(
            Permission(
                "get",
                "",
                "pods",
                "what nvidia-smi -L printed in the smoke-test pod",
                subresource="log",
                namespace=smoke.namespace,
            )
        )
    return permissions


def check_permissions(
    cluster: AccessReviewer,
    settings: Settings,
    user: str = "",
    permissions: Iterable[Permission] | None = None,
) -> None:
    """Raise MissingPermissions naming every permission the API server refuses."""
    wanted = list(permissions) if permissions is not None else required(settings)
    missing = [
        p
        for p in wanted
        if not cluster.can_i(
            p.verb,
            p.group,
            p.resource,
            subresource=p.subresource,
            namespace=p.namespace,
            name=p.name,
        )
    ]
    if missing:
        raise MissingPermissions(user, missing)
