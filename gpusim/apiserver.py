"""The simulated cluster's Kubernetes REST API over HTTP on 127.0.0.1 (JSON only).

Serves what kubectl and the official `kubernetes` client call for the GPU node lifecycle:
legacy discovery, list/get/create/update/patch/delete, watch (with bookmarks and 410 Gone),
and the pods `eviction`, `log` and `status` subresources, plus the simulator's own control
endpoints `POST /_sim/faults` and `/_sim/repairs`. Every failure is the Status body the real
API server sends. It must never be reachable from anything but this machine: it
binds 127.0.0.1 only and has no authentication, like a test apiserver.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from bot.kube.objects import meta, name_of, namespace_of, spec_of, status_of
from gpusim import faults, kubelet
from gpusim.defaulting import pod_on_create
from gpusim.objects import Json
from gpusim.openapi import openapi_v3
from gpusim.resources import BY_PLURAL, RESOURCES, ApiError, ResourceType
from gpusim.serving import LoopbackServer
from gpusim.state import ClusterState, WatchEvent

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
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


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
                "verbs": _VERBS,
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


class _Request:
    """One HTTP request, its body read at once (a kept-alive connection must not keep it)."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        split = urlsplit(handler.path)
        self.parts = [p for p in split.path.split("/") if p]
        self.query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        self.handler = handler
        # Read the body whatever happens next: an error answered before reading it would
        # leave it on a kept-alive connection, to be taken for the next request.
        length = int(handler.headers.get("Content-Length") or 0)
        self._raw = handler.rfile.read(length) if length else b""

    def body(self) -> Any:
        raw = self._raw
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ApiError(
                400, "BadRequest", f"the body of the request could not be decoded: {exc}"
            ) from exc


def _route(parts: list[str]) -> tuple[ResourceType, str, str, str] | None:
    """(resource, namespace, name, subresource) for a resource path, None for discovery."""
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return None
    if not rest:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = BY_PLURAL.get((group, rest[0]))
    if resource is None:
        raise ApiError(404, "NotFound", "the server could not find the requested resource")
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    return resource, namespace, name, sub


_PULL_FAILURES = {
    "ErrImagePull": "image can't be pulled",
    "ImagePullBackOff": "trying and failing to pull image",
}
"""How the kubelet words the common waiting reasons when asked for a container's log."""


def _pod_log(store: ClusterState, pod: Json, query: dict[str, str]) -> str:
    """`GET pods/NAME/log`: what the simulated kubelet kept of a container it ran (the
    `nvidia-smi -L` pods, see `kubelet.container_log`); for a pod on a node whose container
    has not started, the kubelet's 400 (`validateContainerLogStatus`); otherwise one generic
    line, for the pods the simulator only pretends to run."""
    spec, status = spec_of(pod), status_of(pod)
    name = name_of(pod)
    names = [str(c.get("name", "")) for c in spec.get("containers") or []]
    container = query.get("container") or (names[0] if names else "")
    if names and container not in names:
        raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
    kept = kubelet.container_log(store, pod, container)
    if kept is not None:
        return kept
    if spec.get("nodeName"):
        current = next(
            (s for s in status.get("containerStatuses") or [] if s.get("name") == container),
            None,
        )
        if current is None and status.get("phase") in ("Succeeded", "Failed"):
            raise ApiError(
                400, "BadRequest", f'container "{container}" in pod "{name}" is not available'
            )
        state = (current or {}).get("state") or {}
        last = (current or {}).get("lastState") or {}
        if not state.get("running") and not state.get("terminated") and not last.get("terminated"):
            reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
            reason = _PULL_FAILURES.get(reason, reason)
            raise ApiError(
                400,
                "BadRequest",
                f'container "{container}" in pod "{name}" is waiting to start: {reason}',
            )
    return f"{datetime.now(UTC).isoformat()} simulated log of {namespace_of(pod)}/{name}\n"


def _list_kind(resource: ResourceType) -> str:
    return f"{resource.kind}List"


class SimulatedApiServer:
    """The HTTP server; `store` is the state tests and fault injection act on."""

    def __init__(self, store: ClusterState | None = None, port: int = 0) -> None:
        self.store = store or ClusterState()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            """Hands every request to the server; keeps nothing itself."""

            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                server._handle(self, "GET")

            def do_POST(self) -> None:
                server._handle(self, "POST")

            def do_PUT(self) -> None:
                server._handle(self, "PUT")

            def do_PATCH(self) -> None:
                server._handle(self, "PATCH")

            def do_DELETE(self) -> None:
                server._handle(self, "DELETE")

        self._http = LoopbackServer(Handler, port, "sim-apiserver")

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def url(self) -> str:
        return self._http.url

    def start(self) -> SimulatedApiServer:
        self._http.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._http.stop()

    def write_kubeconfig(self, path: Path) -> Path:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "gpubot-sim", "cluster": {"server": self.url}}],
            "users": [{"name": "gpubot-sim", "user": {}}],
            "contexts": [
                {"name": "gpubot-sim", "context": {"cluster": "gpubot-sim", "user": "gpubot-sim"}}
            ],
            "current-context": "gpubot-sim",
        }
        path.write_text(yaml.safe_dump(config))
        return path

    # ---- dispatch -----------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        request = _Request(handler)
        if self._stop.is_set():
            # A stopped server drops its kept-alive connections, as a restarted one would.
            handler.close_connection = True
            stopping = ApiError(503, "ServiceUnavailable", "the simulated API server is stopping")
            self._send(handler, 503, json.dumps(stopping.status()).encode(), "application/json")
            return
        try:
            if method == "GET" and request.query.get("watch") in ("1", "true"):
                self._watch(request)
                return
            code, body = self._dispatch(request, method)
        except ApiError as exc:
            code, body = exc.code, exc.status()
        except Exception as exc:  # the server stays up whatever a request does
            code, body = (
                500,
                ApiError(500, "InternalError", f"Internal error occurred: {exc}").status(),
            )
        if isinstance(body, bytes):  # JSON already
            self._send(handler, code, body, "application/json")
        elif isinstance(body, str):
            self._send(handler, code, body.encode(), "text/plain")
        else:
            self._send(handler, code, json.dumps(body).encode(), "application/json")

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, code: int, payload: bytes, content_type: str
    ) -> None:
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _dispatch(self, request: _Request, method: str) -> tuple[int, Json | str | bytes]:
        parts = request.parts
        if parts == ["_sim", "faults"] and method == "POST":
            return 201, self._inject(request.body())
        if parts == ["_sim", "repairs"] and method == "POST":
            return 201, self._repair(request.body())
        if method == "GET" and parts[:2] == ["openapi", "v3"]:
            return 200, openapi_v3(parts)
        if method == "GET" and parts in (["version"], ["version", ""]):
            return 200, KUBERNETES_VERSION
        if method == "GET" and parts == ["api"]:
            return 200, {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}
                ],
            }
        if method == "GET" and parts == ["api", "v1"]:
            return 200, _resource_list("", "v1")
        if method == "GET" and parts == ["apis"]:
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": _groups()}
        if method == "GET" and len(parts) == 2 and parts[0] == "apis":
            group = next((g for g in _groups() if g["name"] == parts[1]), None)
            if group is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return 200, {"kind": "APIGroup", "apiVersion": "v1", **group}
        if method == "GET" and len(parts) == 3 and parts[0] == "apis":
            listing = _resource_list(parts[1], parts[2])
            if not listing["resources"]:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return 200, listing
        route = _route(parts)
        if route is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        resource, namespace, name, sub = route
        store = self.store
        if sub == "eviction" and method == "POST" and resource.kind == "Pod":
            return 201, store.evict(namespace, name, request.body())
        if sub == "log" and method == "GET" and resource.kind == "Pod":
            return 200, _pod_log(store, store.get(resource, namespace, name), request.query)
        if sub and sub != "status":
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not name:
            if method == "GET":
                return 200, self._list(request, resource, namespace)
            if method == "POST":
                if resource.namespaced and not namespace:
                    namespace = str(meta(request.body()).get("namespace") or "default")
                body = _object(request.body(), resource)
                if resource.kind == "Pod":
                    body = pod_on_create(body)
                return 201, store.create(resource, namespace, body)
            raise ApiError(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        if method == "GET":
            return 200, store.get(resource, namespace, name)
        if method == "PUT":
            return 200, store.replace(resource, namespace, name, _object(request.body(), resource))
        if method == "PATCH":
            content_type = request.handler.headers.get("Content-Type", "")
            return 200, store.patch(resource, namespace, name, content_type, request.body())
        if method == "DELETE":
            body = request.body()
            grace = body.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
            if resource.kind == "Pod":
                store.direct_deletes.append((namespace, name))
            return 200, store.delete(
                resource, namespace, name, None if grace is None else int(grace)
            )
        raise ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )

    def _inject(self, body: Any) -> Json:
        """The simulator's own control endpoint (not Kubernetes): `gpubot sim inject`."""
        result = self._fault_call(faults.inject, body)
        return {
            "fault": result.fault,
            "node": result.node,
            "description": result.description,
            "payload": result.payload(),
        }

    def _repair(self, body: Any) -> Json:
        """`POST /_sim/repairs`, the same body as `/_sim/faults`: `gpubot sim repair`."""
        result = self._fault_call(faults.repair, body)
        return {"fault": result.fault, "node": result.node, "description": result.description}

    def _fault_call(self, call: Callable[..., faults.FaultResult], body: Any) -> faults.FaultResult:
        if not isinstance(body, dict) or not body.get("fault") or not body.get("node"):
            raise ApiError(
                400, "BadRequest", 'expected {"fault": ..., "node": ..., "params": {...}}'
            )
        params = body.get("params") or {}
        if not isinstance(params, dict):
            raise ApiError(400, "BadRequest", "params must be an object")
        try:
            return call(
                self.store, str(body["fault"]), str(body["node"]), datetime.now(UTC), **params
            )
        except faults.FaultError as exc:
            raise ApiError(400, "BadRequest", str(exc)) from exc

    def _list(self, request: _Request, resource: ResourceType, namespace: str) -> bytes:
        token = request.query.get("continue") or ""
        try:
            # [namespace, name, resourceVersion of the first page]
            decoded = json.loads(base64.urlsafe_b64decode(token)) if token else None
            after = (str(decoded[0]), str(decoded[1])) if decoded else None
            first_rv = int(decoded[2]) if decoded else None
            limit = int(request.query.get("limit") or 0)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise ApiError(400, "BadRequest", f"invalid continue token or limit: {exc}") from exc
        items, rv, following = self.store.list_page_encoded(
            resource,
            namespace,
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
            limit,
            after,
        )
        # Every page reports the first page's version: a watch from it replays whatever
        # changed while the later pages were read, as the real server's snapshot list does.
        rv = first_rv if first_rv is not None else rv
        metadata: Json = {"resourceVersion": str(rv)}
        if following is not None:
            position = json.dumps([following[0], following[1], rv]).encode()
            metadata["continue"] = base64.urlsafe_b64encode(position).decode()
        head = json.dumps(
            {
                "kind": _list_kind(resource),
                "apiVersion": resource.api_version,
                "metadata": metadata,
            }
        ).encode()
        return head[:-1] + b', "items": [' + b", ".join(items) + b"]}"

    def _watch(self, request: _Request) -> None:
        route = _route(request.parts)
        if route is None or route[2]:
            raise ApiError(405, "MethodNotAllowed", "watch needs a collection")
        resource, namespace, _, _ = route
        raw_rv = request.query.get("resourceVersion", "")
        bookmarks = request.query.get("allowWatchBookmarks") in ("1", "true")
        timeout = float(request.query.get("timeoutSeconds") or 300)
        handler = request.handler
        since = int(raw_rv) if raw_rv.isdigit() and raw_rv != "0" else 0
        initial: list[Json] = []
        if not since:
            initial, since = self.store.list(
                resource,
                namespace,
                request.query.get("labelSelector", ""),
                request.query.get("fieldSelector", ""),
            )
        expired: ApiError | None = None
        events: Iterator[WatchEvent] = iter(())
        try:
            events = self.store.watch(
                resource,
                namespace,
                since,
                request.query.get("labelSelector", ""),
                request.query.get("fieldSelector", ""),
                stop=self._stop,
                timeout_s=timeout,
            )
        except ApiError as exc:
            if exc.code != 410:
                raise
            # As the real server: 200, then one ERROR event carrying the 410 Status.
            expired = exc
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def chunk(data: Json) -> None:
            line = json.dumps(data).encode() + b"\n"
            handler.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            handler.wfile.flush()

        try:
            if expired is not None:
                chunk({"type": "ERROR", "object": expired.status()})
            for obj in initial:
                chunk({"type": "ADDED", "object": obj})
            if bookmarks:
                chunk(_bookmark(resource, since))
            for event in events:
                chunk({"type": event.type, "object": event.object})
                if event.type == "ERROR":
                    break
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            return


def _bookmark(resource: ResourceType, rv: int) -> Json:
    return {
        "type": "BOOKMARK",
        "object": {
            "kind": resource.kind,
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(rv)},
        },
    }


def _object(body: Any, resource: ResourceType) -> Json:
    if not isinstance(body, dict):
        raise ApiError(
            400, "BadRequest", f"the body of the request was not a {resource.kind} object"
        )
    return body


@contextmanager
def running(store: ClusterState | None = None) -> Iterator[SimulatedApiServer]:
    server = SimulatedApiServer(store).start()
    try:
        yield server
    finally:
        server.stop()
