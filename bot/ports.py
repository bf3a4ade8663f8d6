"""The edges of the pipeline as `typing.Protocol`s. The pipeline depends on these; adapters
(the official kubernetes client, later Prometheus, Slack, SQLAlchemy) implement them, and
tests swap in the simulator behind the real adapter rather than patching anything."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, Literal, Protocol

Kind = Literal["Node", "Pod", "Event", "PodDisruptionBudget", "DaemonSet", "ReplicaSet", "Lease"]
Obj = dict[str, Any]


class Cluster(Protocol):
    """The Kubernetes API, in plain JSON objects as the API server returns them.

    Errors: `NotFound`, `PermanentError` (other 4xx), `EvictionBlocked` (429 on eviction),
    `TemporaryError` (5xx, timeouts, connection failures).
    """

    def list(
        self, kind: Kind, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> list[Obj]: ...

    def list_versioned(
        self,
        kind: Kind,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        transform: Callable[[Obj], Obj] | None = None,
    ) -> tuple[builtins.list[Obj], str]:
        """The items (each through `transform` as its page arrives, so a large list is never
        held whole) and the list's resourceVersion, to watch from."""
        ...

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        timeout_s: int = 300,
    ) -> Iterator[tuple[str, Obj]]:
        """(type, object) after `resource_version`, BOOKMARKs included, until the server ends
        the stream; `WatchExpired` when the version is too old, `TemporaryError` when the
        connection breaks."""
        ...

    def get(self, kind: Kind, namespace: str, name: str) -> Obj: ...

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        """A strategic merge patch, as kubectl cordon/label/taint send."""
        ...

    def evict(self, namespace: str, name: str, grace_period_s: int | None = None) -> None:
        """POST pods/NAME/eviction (policy/v1); PDBs are the server's to enforce."""
        ...

    def delete_pod(self, namespace: str, name: str, grace_period_s: int | None = None) -> None:
        """A direct delete: only ever for a drain a person approved with `force`."""
        ...

    def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> Obj:
        """POST a new object (the health gate's smoke-test pod, the leader Lease);
        `PermanentError` with reason AlreadyExists when the name is taken."""
        ...

    def replace(self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]) -> Obj:
        """PUT with the body's resourceVersion as precondition: `Conflict` when someone
        wrote in between (Lease renewals depend on it)."""
        ...

    def pod_log(self, namespace: str, name: str, container: str | None = None) -> str: ...


Sample = tuple[dict[str, str], float]
"""One series of an instant vector: its labels and its value."""


class Metrics(Protocol):
    """Prometheus' HTTP query API. Errors: `TemporaryError` when Prometheus is down, slow
    (past `timeout_s`) or answers 5xx; `PermanentError` for a query it rejects (4xx)."""

    def query(
        self, promql: str, at: datetime | None = None, timeout_s: float = 5.0
    ) -> list[Sample]:
        """An instant query; a scalar answer comes back as one sample without labels."""
        ...
