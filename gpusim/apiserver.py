"""The simulated cluster's Kubernetes REST API over HTTPS on 127.0.0.1 (JSON only).

Serves what kubectl and the official `kubernetes` client call for the GPU node lifecycle:
discovery (`gpusim.discovery`), list/get/create/update/patch/delete and the pods
`eviction`, `log` and `status` subresources (`gpusim.resource_handlers`), watch with
bookmarks and 410 Gone (`gpusim.watch_streaming`), server-side Tables (`gpusim.printing`),
the access reviews and the Metrics API (`gpusim.computed_kinds`), plus the simulator's own
control endpoints `POST /_sim/faults` and `/_sim/repairs` (`gpusim.control_routes`). Every
failure is the Status body the real API server sends.

Every request goes through what kube-apiserver's handler chain does before it reaches a
handler (staging/src/k8s.io/apiserver/pkg/server/config.go `DefaultBuildHandlerChain`),
and this module is that chain: TLS with the cluster's serving certificate
(`gpusim.credentials`), authentication of the bearer token (the admin's or a
ServiceAccount's; no token is `system:anonymous`, a token nobody issued is a 401
`Unauthorized`, as `WithAuthentication` answers), then impersonation (the `Impersonate-*`
headers of `kubectl --as`, each allowed by RBAC first, as `WithImpersonation` does:
`gpusim.impersonation`), then RBAC (`gpusim.access_control` over `gpusim.authorization`, for
the user the request acts as; a refusal is the 403 `WithAuthorization` writes), then the handler
the path names, and the audit record (`gpusim.auditing`). The simulator's own control
endpoints are non-resource paths like any other: cluster-admin may call them. When it starts
it writes what kube-apiserver's bootstrap hooks write (`gpusim.bootstrap_policy`).
`audit()` is its audit log: every request with its user, RBAC verb, resource and status
code, so a test can show that a ServiceAccount got no 401 or 403, or which permission a step
used.

It must never be reachable from anything but this machine: it binds 127.0.0.1 only; and it
must never answer a request itself that a handler module owns.

`url` is a connection URL, not only an address: the API server's address with the files a
client needs as query parameters, `certificate-authority` (the cluster's CA) and
`token-file` (the admin's token), as a libpq URI carries `sslrootcert`. `bot.kube.cluster`
`KubeCluster.for_url` and `gpusim.launching` read it; `address` is the bare address kubectl's
kubeconfig holds (`write_kubeconfig`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import yaml

from bot.kube_objects import meta
from gpusim.access_control import AccessControl
from gpusim.api_requests import NOT_FOUND, ApiRequest, route
from gpusim.auditing import AuditEvent, AuditLog
from gpusim.authorization import Policy, User, request_attributes
from gpusim.bootstrap_policy import bootstrap_objects, system_namespaces
from gpusim.computed_kinds import serve_computed
from gpusim.control_routes import control
from gpusim.credentials import ADMIN_USER, Credentials, credentials_of
from gpusim.discovery import discovery
from gpusim.impersonation import HeadersError
from gpusim.objects import Json
from gpusim.pressure import ApiPressure
from gpusim.resource_handlers import serve_stored
from gpusim.resources import BY_KIND, ApiError
from gpusim.serving import LoopbackServer
from gpusim.state import ClusterState
from gpusim.watch_streaming import stream_watch


class SimulatedApiServer:
    """The HTTPS server and its handler chain; `store` is the state tests and fault injection
    act on. It owns the listening server, the cluster's credentials, the access control and
    the audit log, and whether it is stopping; it must never answer a request but through
    the chain (`_handle`)."""

    def __init__(self, store: ClusterState | None = None, port: int = 0) -> None:
        self.store = store or ClusterState()
        self.credentials: Credentials = credentials_of(self.store)
        # kube-apiserver's post-start hooks: the system namespaces and the default RBAC.
        self.store.load(system_namespaces() + bootstrap_objects(), missing_only=True)
        self._stop = threading.Event()
        self._access = AccessControl(self.store, self.credentials)
        self._audit = AuditLog()
        self.pressure = ApiPressure()
        """Requests answered as a loaded or failing API server answers them, while applied."""
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

    def policy(self) -> Policy:
        """The cluster's RBAC objects, compiled; compiled again after any of them changes."""
        return self._access.policy()

    def audit(self) -> list[AuditEvent]:
        """Every request served so far (the newest AUDIT_LIMIT), oldest first: what a test
        counts 401s and 403s in, or checks that a permission was used."""
        return self._audit.events()

    # ---- the handler chain --------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        request = ApiRequest(handler)
        if self._stop.is_set():
            # A stopped server drops its kept-alive connections, as a restarted one would.
            handler.close_connection = True
            stopping = ApiError(503, "ServiceUnavailable", "the simulated API server is stopping")
            self._send(handler, 503, json.dumps(stopping.status()).encode(), "application/json")
            return
        # Until authenticated, the request is nobody's (a 401 names no user); until its
        # impersonation is allowed, the caller's (a refused one is the caller's 403).
        attributes = request_attributes(User(""), method, request.path, request.query)
        caller: User | None = None  # the authenticated user, when it acts as another
        try:
            authenticated = self._access.authenticate(handler.headers.get("Authorization") or "")
            attributes = request_attributes(authenticated, method, request.path, request.query)
            request.user = authenticated
            acting = self._access.impersonate(authenticated, handler.headers.items())
            if acting is not None:
                caller, request.user = authenticated, acting
                attributes = request_attributes(acting, method, request.path, request.query)
            self._access.authorize(attributes)
            if method == "GET" and request.query.get("watch") in ("1", "true"):
                started = attributes
                stream_watch(
                    self.store,
                    request,
                    self._stop,
                    lambda: self._audit.record(started, 200, caller),
                )
                return
            refused = self.pressure.refusal(request.path)
            if refused is not None:
                self._audit.record(attributes, refused.error.code)
                payload = json.dumps(refused.error.status()).encode()
                self._send(
                    handler, refused.error.code, payload, "application/json", refused.headers
                )
                return
            code, body = self._dispatch(request, method)
        except HeadersError as exc:  # WithImpersonation's InternalError: plain text
            code, body = 500, exc.response(handler.path)
        except ApiError as exc:
            code, body = exc.code, exc.status()
        except Exception as exc:  # the server stays up whatever a request does
            code, body = (
                500,
                ApiError(500, "InternalError", f"Internal error occurred: {exc}").status(),
            )
        self._audit.record(attributes, code, caller)
        if isinstance(body, bytes):  # JSON already
            self._send(handler, code, body, "application/json")
        elif isinstance(body, str):
            self._send(handler, code, body.encode(), "text/plain")
        else:
            self._send(handler, code, json.dumps(body).encode(), "application/json")

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        code: int,
        payload: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        handler.send_response(code)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _dispatch(self, request: ApiRequest, method: str) -> tuple[int, Json | str | bytes]:
        """The handler the path names: the control endpoints, discovery, then the kinds."""
        controlled = control(self.store, request.parts, method, request.body)
        if controlled is not None:
            return 201, controlled
        if method == "GET":
            document = discovery(request.parts, self.port)
            if document is not None:
                return 200, document
        routed = route(request.parts)
        if routed is None:
            raise ApiError(404, "NotFound", NOT_FOUND)
        resource, namespace, name, sub = routed
        if not resource.stored:
            return serve_computed(
                self.store, self.policy, request, method, resource, namespace, name
            )
        return serve_stored(self.store, request, method, resource, namespace, name, sub)


@contextmanager
def running(store: ClusterState | None = None) -> Iterator[SimulatedApiServer]:
    server = SimulatedApiServer(store).start()
    try:
        yield server
    finally:
        server.stop()
