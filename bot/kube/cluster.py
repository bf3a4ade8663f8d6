"""The Cluster port on the official `kubernetes` client.

Objects travel as the API server's JSON (`_preload_content=False`), the same shape the
snapshot parser reads, so live facts and offline snapshots go through one code path. Every
`ApiException` and transport failure becomes one of gpubot's own errors, once
(`bot.kube.translating`); the client is built from a URL, a kubeconfig or the ServiceAccount
in `bot.kube.connecting`, lists are walked in `bot.kube.paging`, watch lines read in
`bot.kube.watching`, and which call serves a kind is `bot.kube.kinds`'.

Why it exists: the rest of gpubot sees Kubernetes only as the `Cluster` port, in plain JSON
objects and gpubot's errors. Every request has a timeout (`request_timeout_s`; a watch reads
for its own length plus it), and urllib3's own retries are off. The callers retry, each on
its own schedule (informers, leader election, the next pass). An outage is told once instead:
one warning when the API server stops answering, one line when it is back (`Outage`), and
`unreachable` answers `/readyz` with a reason that names no URL.

What it must never do: retry a request, let a client exception or model object out, or make
a request without a timeout.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from bot.errors import GpubotError
from bot.kube.connecting import client_for_url, client_from_kubeconfig, client_in_cluster
from bot.kube.kinds import KindCalls
from bot.kube.paging import read_pages
from bot.kube.translating import converted, unreachable_reason
from bot.kube.watching import watch_events
from bot.kube_objects import Obj, meta
from bot.ports import Kind
from bot.process.health import Outage

log = logging.getLogger("gpubot.kube")

STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class KubeCluster:
    """Talks to one API server: in-cluster, a kubeconfig, or a URL (the simulator).

    Owns the client, the request timeout and whether the API server is in an outage (told
    once, `Outage`). Never retries a request itself: its callers do, on their schedules."""

    def __init__(self, api_client: client.ApiClient, request_timeout_s: float = 10.0) -> None:
        self._api = api_client
        self._calls = KindCalls(api_client)
        self._timeout = request_timeout_s
        self.outage = Outage("kubernetes api", log, down_as="unreachable")

    @classmethod
    def for_url(cls, url: str, request_timeout_s: float = 10.0) -> KubeCluster:
        """An API server by connection URL (`bot.kube.connecting.client_for_url`)."""
        return cls(client_for_url(url), request_timeout_s)

    @classmethod
    def from_kubeconfig(
        cls, path: Path | None = None, context: str | None = None, request_timeout_s: float = 10.0
    ) -> KubeCluster:
        return cls(client_from_kubeconfig(path, context), request_timeout_s)

    @classmethod
    def in_cluster(cls, request_timeout_s: float = 10.0) -> KubeCluster:
        """The pod's ServiceAccount (`bot.kube.connecting.client_in_cluster`)."""
        return cls(client_in_cluster(), request_timeout_s)

    def unreachable(self, timeout_s: float = 2.0) -> str | None:
        """None when the API server answers `GET /version` (open to every client, the
        cheapest request there is) within `timeout_s`; else why not, as `/readyz` says it:
        "kubernetes api unreachable: connection refused", no URL."""
        try:
            with converted("GET /version", self.outage):
                response: Any = self._calls.version.get_code(
                    _preload_content=False, _request_timeout=timeout_s
                )
                response.read()  # a few bytes; read, so the connection can be used again
                response.release_conn()
        except GpubotError as exc:
            return unreachable_reason(exc)
        return None

    def close(self) -> None:
        self._api.close()  # type: ignore[no-untyped-call]

    def can_i(
        self,
        verb: str,
        group: str,
        resource: str,
        *,
        subresource: str = "",
        namespace: str = "",
        name: str = "",
    ) -> bool:
        """A SelfSubjectAccessReview (what `kubectl auth can-i` asks): may these credentials
        do `verb` on the resource? (bot.kube.permissions lists what gpubot needs.)"""
        attributes = {
            "verb": verb,
            "group": group,
            "resource": resource,
            "subresource": subresource,
            "namespace": namespace,
            "name": name,
        }
        body: dict[str, Any] = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {k: v for k, v in attributes.items() if v}},
        }
        with converted(f"access review: {verb} {resource}"):
            response = self._calls.reviews.create_self_subject_access_review(
                body, _preload_content=False, _request_timeout=self._timeout
            )
            review: Obj = json.loads(response.data)
        return bool((review.get("status") or {}).get("allowed"))

    # ---- reads --------------------------------------------------------------------------

    def list(
        self, kind: Kind, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> list[Obj]:
        return self.list_versioned(kind, namespace, label_selector, field_selector)[0]

    def list_versioned(
        self,
        kind: Kind,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        each: Callable[[Obj], None] | None = None,
    ) -> tuple[builtins.list[Obj], str]:
        lister = self._calls.lister(kind, namespace)
        with converted(f"list {kind}", self.outage):
            return read_pages(lister, kind, label_selector, field_selector, self._timeout, each)

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        timeout_s: int = 300,
    ) -> Iterator[tuple[str, Obj]]:
        lister = self._calls.lister(kind, namespace)
        with converted(f"watch {kind}", self.outage):
            response = lister(
                watch=True,
                resource_version=resource_version or None,
                allow_watch_bookmarks=True,
                label_selector=label_selector or None,
                field_selector=field_selector or None,
                timeout_seconds=timeout_s,
                _preload_content=False,
                _request_timeout=(self._timeout, timeout_s + self._timeout),
            )
        try:
            with converted(f"watch {kind}", self.outage):
                lines = iter_resp_lines(response)  # type: ignore[no-untyped-call]
                yield from watch_events(lines, kind)
        finally:
            response.close()
            response.release_conn()

    def get(self, kind: Kind, namespace: str, name: str) -> Obj:
        reader = self._calls.reader(kind, namespace, name)
        with converted(f"get {kind} {namespace + '/' if namespace else ''}{name}", self.outage):
            response = reader(_preload_content=False, _request_timeout=self._timeout)
            obj: Obj = json.loads(response.data)
            return obj

    # ---- writes -------------------------------------------------------------------------

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        with converted(f"patch node {name}", self.outage):
            response: Any = self._calls.core.patch_node(
                name,
                dict(patch),
                _content_type=STRATEGIC_MERGE,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
            obj: Obj = json.loads(response.data)
            return obj

    def evict(
        self, namespace: str, name: str, grace_period_s: int | None = None, uid: str = ""
    ) -> None:
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=_delete_options(grace_period_s, uid),
        )
        with converted(f"eviction of pod {namespace}/{name}", self.outage):
            self._calls.core.create_namespaced_pod_eviction(
                name, namespace, body, _preload_content=False, _request_timeout=self._timeout
            )

    def delete_pod(
        self, namespace: str, name: str, grace_period_s: int | None = None, uid: str = ""
    ) -> None:
        with converted(f"delete pod {namespace}/{name}", self.outage):
            self._calls.core.delete_namespaced_pod(
                name,
                namespace,
                body=_delete_options(grace_period_s, uid),
                _preload_content=False,
                _request_timeout=self._timeout,
            )

    def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> Obj:
        name = str(meta(body).get("name", ""))
        with converted(f"create {kind} {namespace}/{name}", self.outage):
            response = self._calls.creator(kind)(
                namespace, dict(body), _preload_content=False, _request_timeout=self._timeout
            )
            obj: Obj = json.loads(response.data)
            return obj

    def replace(self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]) -> Obj:
        with converted(f"replace {kind} {namespace}/{name}", self.outage):
            response = self._calls.replacer(kind)(
                name, namespace, dict(body), _preload_content=False, _request_timeout=self._timeout
            )
            obj: Obj = json.loads(response.data)
            return obj

    def pod_log(self, namespace: str, name: str, container: str | None = None) -> str:
        with converted(f"log of pod {namespace}/{name}", self.outage):
            response: Any = self._calls.core.read_namespaced_pod_log(
                name,
                namespace,
                container=container,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
            return bytes(response.data).decode(errors="replace")


def _delete_options(grace_period_s: int | None, uid: str) -> client.V1DeleteOptions | None:
    """A delete's or an eviction's options: its grace period, and the uid it is for (a
    precondition: the server refuses with 409 when another object has the name now)."""
    if grace_period_s is None and not uid:
        return None
    return client.V1DeleteOptions(
        grace_period_seconds=grace_period_s,
        preconditions=client.V1Preconditions(uid=uid) if uid else None,
    )
