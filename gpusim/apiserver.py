"""The simulated cluster's Kubernetes REST API over HTTPS on 127.0.0.1 (JSON only).

Serves what kubectl and the official `kubernetes` client call for the GPU node lifecycle:
legacy discovery, list/get/create/update/patch/delete, watch (with bookmarks and 410 Gone),
the pods `eviction`, `log` and `status` subresources, server-side Tables
(`gpusim.printing`), the access reviews (`gpusim.reviews`), the Metrics API (`gpusim.usage`),
plus the simulator's own control endpoints `POST /_sim/faults` and `/_sim/repairs`. Every
failure is the Status body the real API server sends.

Every request goes through what kube-apiserver's handler chain does before it reaches a
handler (staging/src/k8s.io/apiserver/pkg/server/config.go `DefaultBuildHandlerChain`):
TLS with the cluster's serving certificate (`gpusim.credentials`), authentication of the
bearer token (the admin's or a ServiceAccount's; no token is `system:anonymous`, a token
nobody issued is a 401 `Unauthorized`, as `WithAuthentication` answers), then RBAC
(`gpusim.authorization`; a refusal is the 403 `WithAuthorization` writes). The simulator's
own control endpoints are non-resource paths like any other: cluster-admin may call them.
When it starts it writes what kube-apiserver's bootstrap hooks write (`gpusim.bootstrap_policy`).
`audit()` is its audit log: every request with its user, RBAC verb, resource and status code,
so a test can show that a ServiceAccount got no 401 or 403, or which permission a step used.

It must never be reachable from anything but this machine: it binds 127.0.0.1 only.

`url` is a connection URL, not only an address: the API server's address with the files a
client needs as query parameters, `certificate-authority` (the cluster's CA) and
`token-file` (the admin's token), as a libpq URI carries `sslrootcert`. `bot.kube.cluster`
`KubeCluster.for_url` and `gpusim.launching` read it; `address` is the bare address kubectl's
kubeconfig holds (`write_kubeconfig`).

Over 600 lines because one request's path is read here in one go, as the real server's
handler chain runs it: authentication, authorization, the verb, the subresource, the
content type and the Status on error. The pieces with a life of their own (RBAC, Tables,
reviews, credentials, OpenAPI) are their own modules.
"""

from __future__ import annotations

import base64
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import yaml

from bot.kube_objects import meta, name_of, namespace_of, spec_of, status_of
from gpusim import faults, kubelet, protobuf
from gpusim.authorization import (
    ANONYMOUS,
    Attributes,
    Policy,
    User,
    forbidden,
    request_attributes,
    service_account_user,
)
from gpusim.bootstrap_policy import bootstrap_objects, system_namespaces
from gpusim.credentials import ADMIN_GROUPS, ADMIN_USER, Credentials, credentials_of
from gpusim.defaulting import pod_on_create
from gpusim.objects import Json
from gpusim.openapi import openapi_v3
from gpusim.printing import table, wants_table
from gpusim.resources import BY_KIND, BY_PLURAL, RESOURCES, ApiError, ResourceType
from gpusim.reviews import access_review, rules_review, self_subject_review
from gpusim.serving import LoopbackServer
from gpusim.state import ClusterState
from gpusim.usage import node_metrics, pod_metrics
from gpusim.watch_history import WatchEvent

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
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
UNAUTHORIZED = ApiError(401, "Unauthorized", "Unauthorized")
"""What `WithAuthentication` answers a request whose credentials nobody issued."""
AUDIT_LIMIT = 100_000
"""Requests `audit()` keeps, newest last: a drill's simulated hour stays within memory."""


@dataclass(frozen=True)
class AuditEvent:
    """One request as kube-apiserver's audit log has it at ResponseComplete (a watch: at
    ResponseStarted): who, the RBAC verb and resource it was authorized as, and the status
    code answered. `user` is "" for credentials nobody issued (the 401)."""

    user: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    path: str
    code: int

    def __str__(self) -> str:
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        if self.subresource:
            resource += f"/{self.subresource}"
        where = f" -n {self.namespace}" if self.namespace else ""
        what = f"{self.verb} {resource or self.path}{f' {self.name}' if self.name else ''}"
        return f"{self.user or '?'}: {what}{where} -> {self.code}"


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


class _Request:
    """One HTTP request, its body read at once (a kept-alive connection must not keep it)."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        split = urlsplit(handler.path)
        self.path = split.path
        self.parts = [p for p in split.path.split("/") if p]
        self.accept = handler.headers.get("Accept") or ""
        self.user = ANONYMOUS
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
        if (self.handler.headers.get("Content-Type") or "").startswith(protobuf.CONTENT_TYPE):
            try:
                return protobuf.decode(raw)
            except protobuf.ProtobufError as exc:
                raise ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - {exc}; accepted "
                    "media types include: application/json, application/yaml",
                ) from exc
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
    """The HTTPS server; `store` is the state tests and fault injection act on."""

    def __init__(self, store: ClusterState | None = None, port: int = 0) -> None:
        self.store = store or ClusterState()
        self.credentials: Credentials = credentials_of(self.store)
        # kube-apiserver's post-start hooks: the system namespaces and the default RBAC.
        self.store.load(system_namespaces() + bootstrap_objects(), missing_only=True)
        self._stop = threading.Event()
        self._policy: tuple[tuple[int, ...], Policy] | None = None
        self._tokens: tuple[int, dict[str, User]] | None = None
        self._policy_lock = threading.Lock()
        self._audit: deque[AuditEvent] = deque(maxlen=AUDIT_LIMIT)
        self._audit_lock = threading.Lock()
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

        self._http = LoopbackServer(
            Handler, port, "sim-apiserver", tls=self.credentials.server_context()
        )

    @property
    def port(self) -> int:
        return self._http.port

    @property
    def address(self) -> str:
        """`https://127.0.0.1:PORT`: what a kubeconfig's `server` holds."""
        return self._http.url

    @property
    def url(self) -> str:
        """The connection URL: the address with the CA and the admin's token file (see the
        module docstring)."""
        query = urlencode(
            {
                "certificate-authority": str(self.credentials.ca_file),
                "token-file": str(self.credentials.admin_token_file),
            }
        )
        return f"{self.address}?{query}"

    @property
    def admin_token(self) -> str:
        return self.credentials.admin_token

    def start(self) -> SimulatedApiServer:
        self._http.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._http.stop()

    def service_account_token(self, namespace: str, name: str) -> str:
        """The bearer token of a ServiceAccount the cluster holds."""
        account = self.store.get(BY_KIND["ServiceAccount"], namespace, name)
        return self.credentials.token_for(namespace, name, str(meta(account).get("uid", "")))

    def service_account_dir(self, namespace: str, name: str) -> Path:
        """The ServiceAccount's projected token volume (`token`, `ca.crt`, `namespace`): what
        `gpubot serve --in-cluster` reads, pointed at it by GPUBOT_SERVICEACCOUNT_DIR."""
        account = self.store.get(BY_KIND["ServiceAccount"], namespace, name)
        return self.credentials.mount(namespace, name, str(meta(account).get("uid", "")))

    def write_kubeconfig(self, path: Path, service_account: tuple[str, str] | None = None) -> Path:
        """A kubeconfig for kubectl: the server's address, the cluster's CA as
        `certificate-authority-data`, and the admin's token (or a ServiceAccount's, given as
        (namespace, name))."""
        if service_account is None:
            user, token = ADMIN_USER, self.admin_token
        else:
            user = f"system:serviceaccount:{service_account[0]}:{service_account[1]}"
            token = self.service_account_token(*service_account)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "gpubot-sim",
                    "cluster": {
                        "server": self.address,
                        "certificate-authority-data": self.credentials.ca_data,
                    },
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [
                {"name": "gpubot-sim", "context": {"cluster": "gpubot-sim", "user": user}}
            ],
            "current-context": "gpubot-sim",
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path

    # ---- authentication and authorization ---------------------------------------------

    def _users(self) -> dict[str, User]:
        """Bearer token -> user: the admin's and one per ServiceAccount, rebuilt when the
        ServiceAccounts change."""
        version = self.store.kind_versions.get("ServiceAccount", 0)
        with self._policy_lock:
            if self._tokens is not None and self._tokens[0] == version:
                return self._tokens[1]
        users = {self.admin_token: User(ADMIN_USER, ADMIN_GROUPS)}
        accounts, _ = self.store.list(BY_KIND["ServiceAccount"], "")
        for account in accounts:
            namespace, name = namespace_of(account), name_of(account)
            uid = str(meta(account).get("uid", ""))
            users[self.credentials.token_for(namespace, name, uid)] = service_account_user(
                namespace, name, uid
            )
        with self._policy_lock:
            self._tokens = (version, users)
        return users

    def _authenticate(self, handler: BaseHTTPRequestHandler) -> User:
        header = handler.headers.get("Authorization") or ""
        if not header:
            return ANONYMOUS
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UNAUTHORIZED
        user = self._users().get(token.strip())
        if user is None:
            raise UNAUTHORIZED
        return user

    def policy(self) -> Policy:
        """The cluster's RBAC objects, compiled; compiled again after any of them changes."""
        versions = tuple(self.store.kind_versions.get(kind, 0) for kind in RBAC_KINDS)
        with self._policy_lock:
            if self._policy is not None and self._policy[0] == versions:
                return self._policy[1]
        lists = [self.store.list(BY_KIND[kind], "")[0] for kind in RBAC_KINDS]
        compiled = Policy(*lists)
        with self._policy_lock:
            self._policy = (versions, compiled)
        return compiled

    def _authorize(self, attributes: Attributes) -> None:
        allowed, reason = self.policy().authorize(attributes)
        if not allowed:
            raise forbidden(attributes, reason)

    # ---- the audit log ------------------------------------------------------------------

    def audit(self) -> list[AuditEvent]:
        """Every request served so far (the newest AUDIT_LIMIT), oldest first: what a test
        counts 401s and 403s in, or checks that a permission was used."""
        with self._audit_lock:
            return list(self._audit)

    def _record(self, attributes: Attributes, code: int) -> None:
        event = AuditEvent(
            attributes.user.name,
            attributes.verb,
            attributes.api_group,
            attributes.resource,
            attributes.subresource,
            attributes.namespace,
            attributes.name,
            attributes.path,
            code,
        )
        with self._audit_lock:
            self._audit.append(event)

    # ---- dispatch -----------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        request = _Request(handler)
        if self._stop.is_set():
            # A stopped server drops its kept-alive connections, as a restarted one would.
            handler.close_connection = True
            stopping = ApiError(503, "ServiceUnavailable", "the simulated API server is stopping")
            self._send(handler, 503, json.dumps(stopping.status()).encode(), "application/json")
            return
        # Until authenticated, the request is nobody's (a 401 names no user).
        attributes = request_attributes(User(""), method, request.path, request.query)
        try:
            request.user = self._authenticate(handler)
            attributes = request_attributes(request.user, method, request.path, request.query)
            self._authorize(attributes)
            if method == "GET" and request.query.get("watch") in ("1", "true"):
                started = attributes
                self._watch(request, lambda: self._record(started, 200))
                return
            code, body = self._dispatch(request, method)
        except ApiError as exc:
            code, body = exc.code, exc.status()
        except Exception as exc:  # the server stays up whatever a request does
            code, body = (
                500,
                ApiError(500, "InternalError", f"Internal error occurred: {exc}").status(),
            )
        self._record(attributes, code)
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
        if not resource.stored:
            return self._computed(request, method, resource, namespace, name)
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
            found = store.get(resource, namespace, name)
            if wants_table(request.accept):
                return 200, table(
                    resource.kind,
                    [found],
                    str(meta(found).get("resourceVersion", "")),
                    request.query.get("includeObject") or "PartialObjectMetadata",
                )
            return 200, found
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

    def _computed(
        self, request: _Request, method: str, resource: ResourceType, namespace: str, name: str
    ) -> tuple[int, Json]:
        """The kinds answered on the spot: the reviews (create) and the Metrics API (read)."""
        if method == "POST" and "create" in resource.verbs and not name:
            user = request.user
            if resource.kind == "SelfSubjectRulesReview":
                return 201, rules_review(request.body(), user, self.policy())
            if resource.kind == "SelfSubjectReview":
                return 201, self_subject_review(user)
            return 201, access_review(resource.kind, request.body(), user, self.policy(), namespace)
        if method == "GET" and resource.group == "metrics.k8s.io":
            return 200, self._metrics(resource, namespace, name)
        raise ApiError(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )

    def _metrics(self, resource: ResourceType, namespace: str, name: str) -> Json:
        now = datetime.now(UTC)
        store = self.store
        found: list[Json] = []
        if resource.kind == "NodeMetrics":
            nodes = (
                [store.get(BY_KIND["Node"], "", name)]
                if name
                else store.list(BY_KIND["Node"], "")[0]
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

    def _list(self, request: _Request, resource: ResourceType, namespace: str) -> bytes | Json:
        token = request.query.get("continue") or ""
        try:
            # [namespace, name, resourceVersion of the first page]
            decoded = json.loads(base64.urlsafe_b64decode(token)) if token else None
            after = (str(decoded[0]), str(decoded[1])) if decoded else None
            first_rv = int(decoded[2]) if decoded else None
            limit = int(request.query.get("limit") or 0)
        except (ValueError, TypeError, IndexError, KeyError) as exc:
            raise ApiError(400, "BadRequest", f"invalid continue token or limit: {exc}") from exc
        selectors = (request.query.get("labelSelector", ""), request.query.get("fieldSelector", ""))
        as_table = wants_table(request.accept)
        if as_table:
            objects, rv, following = self.store.list_page(
                resource, namespace, *selectors, limit, after
            )
        else:
            items, rv, following = self.store.list_page_encoded(
                resource, namespace, *selectors, limit, after
            )
        # Every page reports the first page's version: a watch from it replays whatever
        # changed while the later pages were read, as the real server's snapshot list does.
        rv = first_rv if first_rv is not None else rv
        metadata: Json = {"resourceVersion": str(rv)}
        if following is not None:
            position = json.dumps([following[0], following[1], rv]).encode()
            metadata["continue"] = base64.urlsafe_b64encode(position).decode()
        if as_table:
            return table(
                resource.kind,
                objects,
                str(rv),
                request.query.get("includeObject") or "PartialObjectMetadata",
                continue_token=metadata.get("continue"),
            )
        head = json.dumps(
            {
                "kind": _list_kind(resource),
                "apiVersion": resource.api_version,
                "metadata": metadata,
            }
        ).encode()
        return head[:-1] + b', "items": [' + b", ".join(items) + b"]}"

    def _watch(self, request: _Request, started: Callable[[], None]) -> None:
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
        started()

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
