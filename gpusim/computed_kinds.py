"""The kinds the simulated API server answers on the spot instead of storing: the access
reviews (`kubectl auth can-i`, `whoami`: `gpusim.reviews`) and the Metrics API
(`kubectl top`: `gpusim.usage`).

Like kube-apiserver's, these never reach storage: a review is evaluated against the current
RBAC policy and returned; node and pod metrics are computed from the pods at the moment of
the request, as metrics-server serves them. They must never write to the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from bot.kube_objects import name_of
from gpusim.api_requests import ApiRequest, method_not_allowed
from gpusim.authorization import Policy
from gpusim.objects import Json
from gpusim.resources import BY_KIND, ApiError, ResourceType
from gpusim.reviews import access_review, rules_review, self_subject_review
from gpusim.state import ClusterState
from gpusim.usage import node_metrics, pod_metrics


def serve_computed(
    store: ClusterState,
    policy: Callable[[], Policy],
    request: ApiRequest,
    method: str,
    resource: ResourceType,
    namespace: str,
    name: str,
) -> tuple[int, Json]:
    """The kinds answered on the spot: the reviews (create), against the policy `policy()`
    compiles, and the Metrics API (read)."""
    if method == "POST" and "create" in resource.verbs and not name:
        user = request.user
        if resource.kind == "SelfSubjectRulesReview":
            return 201, rules_review(request.body(), user, policy())
        if resource.kind == "SelfSubjectReview":
            return 201, self_subject_review(user)
        return 201, access_review(resource.kind, request.body(), user, policy(), namespace)
    if method == "GET" and resource.group == "metrics.k8s.io":
        return 200, _metrics(store, resource, namespace, name)
    raise method_not_allowed()


def _metrics(store: ClusterState, resource: ResourceType, namespace: str, name: str) -> Json:
    now = datetime.now(UTC)
    found: list[Json] = []
    if resource.kind == "NodeMetrics":
        nodes = (
            [store.get(BY_KIND["Node"], "", name)] if name else store.list(BY_KIND["Node"], "")[0]
        )
        for node in nodes:
            pods, _ = store.list(
                BY_KIND["Pod"], "", field_selector=f"spec.nodeName={name_of(node)}"
            )
            usage = node_metrics(node, pods, now)
            if usage is not None:
                found.append(usage)
    else:
        pods = (
            [store.get(BY_KIND["Pod"], namespace, name)]
            if name
            else store.list(BY_KIND["Pod"], namespace)[0]
        )
        found = [m for m in (pod_metrics(p, now) for p in pods) if m is not None]
    if name:
        if not found:
            raise ApiError(
                404,
                "NotFound",
                f'{resource.plural}.metrics.k8s.io "{name}" not found',
                {"name": name, "group": "metrics.k8s.io", "kind": resource.plural},
            )
        return found[0]
    return {
        "kind": f"{resource.kind}List",
        "apiVersion": "metrics.k8s.io/v1beta1",
        "metadata": {},
        "items": found,
    }
