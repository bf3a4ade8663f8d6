"""Which of the kubernetes client's calls lists, reads, creates or replaces each kind gpubot
uses.

Why a module of its own: the client has one generated method per kind, verb and scope
(`list_namespaced_pod`, `list_pod_for_all_namespaces`, ...), and the Cluster port takes the
kind as a word. The table from the one to the other is kept here, once, so the cluster's
reads and writes each say only what they do with the call.

What it must never do: make a request (the cluster calls what it is given, with its timeout
and its error translation), or hold anything but the typed APIs of one `ApiClient`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from bot.ports import Kind


class KindCalls:
    """The typed APIs of one `ApiClient`, and the call each kind takes.

    Owns: those API objects (each holds only the `ApiClient`). Never: calls one, or answers
    for a kind the port does not name (a `KeyError` is a bug upstream)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.policy = client.PolicyV1Api(api_client)
        self.coordination = client.CoordinationV1Api(api_client)
        self.version = client.VersionApi(api_client)
        self.reviews: Any = client.AuthorizationV1Api(api_client)

    def lister(self, kind: Kind, namespace: str) -> Callable[..., Any]:
        """The list (and watch) call of `kind`: in `namespace`, or across all ("")."""
        core, apps, policy = self.core, self.apps, self.policy
        if kind == "Node":
            return core.list_node
        table: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
            "Pod": (core.list_pod_for_all_namespaces, core.list_namespaced_pod),
            "Event": (core.list_event_for_all_namespaces, core.list_namespaced_event),
            "PodDisruptionBudget": (
                policy.list_pod_disruption_budget_for_all_namespaces,
                policy.list_namespaced_pod_disruption_budget,
            ),
            "DaemonSet": (apps.list_daemon_set_for_all_namespaces, apps.list_namespaced_daemon_set),
            "ReplicaSet": (
                apps.list_replica_set_for_all_namespaces,
                apps.list_namespaced_replica_set,
            ),
            "Lease": (
                self.coordination.list_lease_for_all_namespaces,
                self.coordination.list_namespaced_lease,
            ),
        }
        everywhere, scoped = table[kind]
        if namespace:
            return lambda **kw: scoped(namespace, **kw)
        return everywhere

    def reader(self, kind: Kind, namespace: str, name: str) -> Callable[..., Any]:
        """The read call of one object of `kind`, its name and namespace bound."""
        core, apps, policy = self.core, self.apps, self.policy
        readers: dict[str, Callable[..., Any]] = {
            "Node": lambda **kw: core.read_node(name, **kw),
            "Pod": lambda **kw: core.read_namespaced_pod(name, namespace, **kw),
            "Event": lambda **kw: core.read_namespaced_event(name, namespace, **kw),
            "PodDisruptionBudget": lambda **kw: policy.read_namespaced_pod_disruption_budget(
                name, namespace, **kw
            ),
            "DaemonSet": lambda **kw: apps.read_namespaced_daemon_set(name, namespace, **kw),
            "ReplicaSet": lambda **kw: apps.read_namespaced_replica_set(name, namespace, **kw),
            "Lease": lambda **kw: self.coordination.read_namespaced_lease(name, namespace, **kw),
        }
        return readers[kind]

    def creator(self, kind: Kind) -> Callable[..., Any]:
        """The create call of `kind`: only the kinds gpubot creates (the smoke-test pod, the
        leader Lease)."""
        creators: dict[str, Callable[..., Any]] = {
            "Pod": self.core.create_namespaced_pod,
            "Lease": self.coordination.create_namespaced_lease,
        }
        return creators[kind]

    def replacer(self, kind: Kind) -> Callable[..., Any]:
        """The replace call of `kind`: only the Lease, whose renewals need the precondition."""
        replacers: dict[str, Callable[..., Any]] = {
            "Lease": self.coordination.replace_namespaced_lease,
        }
        return replacers[kind]
