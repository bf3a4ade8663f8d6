"""The Cluster port on the official `kubernetes` client: the one module that imports it.

Objects travel as the API server's JSON (`_preload_content=False`), the same shape the
snapshot parser reads, so live facts and offline snapshots go through one code path. Every
`ApiException` and transport failure becomes one of gpubot's own errors, once, here.

Every request has a timeout (`request_timeout_s`; a watch reads for its own length plus it),
and urllib3's own retries are off: they doubled the time a request could take and logged a
warning line per attempt (hundreds in an outage). The callers retry, each on its own
schedule (informers, leader election, the next pass). An outage is told once instead: one
warning when the API server stops answering, one line when it is back (`Outage`), and
`unreachable` answers `/readyz` with a reason that names no URL.
"""

from __future__ import annotations

import builtins
import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.incluster_config import InClusterConfigLoader
from kubernetes.watch.watch import iter_resp_lines

from bot.errors import (
    AlreadyExists,
    Conflict,
    EvictionBlocked,
    GpubotError,
    InputError,
    NotFound,
    PermanentError,
    TemporaryError,
    WatchExpired,
)
from bot.kube_objects import Obj, meta
from bot.ports import Kind
from bot.process.health import Outage

log = logging.getLogger("gpubot.kube")

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
SERVICEACCOUNT_DIR_ENV = "GPUBOT_SERVICEACCOUNT_DIR"
"""Where `in_cluster` reads the ServiceAccount's token and CA, when not from the standard
mount (set for `gpubot serve --in-cluster` against the simulator)."""


def short_reason(exc: BaseException) -> str:
    """Why a request failed, in a few words that name no URL, host or port: for `/readyz`,
    which anyone may read, and for the one line an outage gets in the log."""
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason or ''}".strip()
    if isinstance(exc, urllib3.exceptions.NameResolutionError):
        return "host name does not resolve"
    if isinstance(exc, urllib3.exceptions.SSLError):
        return "TLS error"
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower()
        return "cannot connect"
    if isinstance(exc, urllib3.exceptions.ConnectTimeoutError):
        return "connect timed out"
    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
        return "read timed out"
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        return "connection broken"
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        return short_reason(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return type(exc).__name__


@contextmanager
def _converted(what: str, outage: Outage | None = None) -> Iterator[None]:
    """The client's errors as gpubot's; with `outage`, a transport failure (nothing answered)
    begins one and any answer ends it."""
    try:
        yield
    except ApiException as exc:
        if outage is not None:
            outage.up()
        raise _from_api_exception(exc, what) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        if outage is not None:
            outage.down(short_reason(exc))
        raise TemporaryError(f"{what}: {exc}") from exc
    if outage is not None:
        outage.up()


@contextmanager
def _unusable_config(where: str) -> Iterator[None]:
    """A kubeconfig or ServiceAccount that cannot be used is the person's input to fix: one
    line naming it, not the loader's traceback."""
    try:
        yield
    except (
        config.ConfigException,
        yaml.YAMLError,
        OSError,
        ValueError,
        TypeError,
        AttributeError,
    ) as exc:
        # A YAML file that is no kubeconfig fails inside the loader as whatever it tripped on.
        raise InputError(
            where,
            # One line: a YAML error spans several.
            f"cannot be used: {' '.join(str(exc).split())} (give --kubeconfig FILE, --kube-url "
            "URL or --in-cluster)",
        ) from None


def _configured(configuration: client.Configuration) -> client.Configuration:
    """No urllib3 retries: each caller retries on its own schedule, and urllib3's log a
    warning line per attempt."""
    configuration.retries = False
    return configuration


def _status_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or b"{}")
    except (ValueError, TypeError):
        return str(exc.reason or exc.status)
    message = str(body.get("message") or exc.reason or exc.status)
    # An eviction's 429 names the budget only in its causes: keep them, the on-call needs it.
    causes = [
        c.get("message")
        for c in (body.get("details") or {}).get("causes") or []
        if c.get("message")
    ]
    return f"{message} ({'; '.join(causes)})" if causes else message


def _from_api_exception(exc: ApiException, what: str) -> GpubotError:
    code = int(exc.status or 0)
    headers: Mapping[str, str] = exc.headers or {}
    message = f"{what}: {_status_message(exc)}"
    retry = headers.get("Retry-After")
    retry_after = float(retry) if retry and str(retry).isdigit() else None
    if code == 404:
        return NotFound(message, code)
    if code == 410:
        # An expired continue token or watch version: list again from the start.
        return WatchExpired(message)
    if code == 429 and "eviction" in what:
        return EvictionBlocked(message, retry_after)
    if code == 409:
        try:
            reason = str(json.loads(exc.body or b"{}").get("reason") or "Conflict")
        except (ValueError, TypeError, AttributeError):
            reason = "Conflict"
        # The API server's Status says which: the name is taken (for good), or the object
        # changed since it was read (read again and retry).
        if reason == "AlreadyExists":
            return AlreadyExists(message, code)
        return Conflict(message)
    if code == 429 or code >= 500 or code == 0:
        return TemporaryError(message, retry_after)
    return PermanentError(message, code)


class KubeCluster:
    """Talks to one API server: in-cluster, a kubeconfig, or a URL (the simulator).

    Owns the client, the request timeout and whether the API server is in an outage (told
    once, `Outage`). Never retries a request itself: its callers do, on their schedules."""

    def __init__(self, api_client: client.ApiClient, request_timeout_s: float = 10.0) -> None:
        self._api = api_client
        self._core = client.CoreV1Api(api_client)
        self._apps = client.AppsV1Api(api_client)
        self._policy = client.PolicyV1Api(api_client)
        self._coordination = client.CoordinationV1Api(api_client)
        self._version = client.VersionApi(api_client)
        self._timeout = request_timeout_s
        self.outage = Outage("kubernetes api", log, down_as="unreachable")

    @classmethod
    def for_url(cls, url: str, request_timeout_s: float = 10.0) -> KubeCluster:
        """An API server by URL. The URL may carry what a kubeconfig would, as query
        parameters (as a libpq connection URI carries `sslrootcert`):
        `certificate-authority=FILE` (the CA that signed the server's certificate, instead of
        the system's) and `token-file=FILE` (a bearer token). The simulator's `url` is such a
        connection URL; `--kube-url` takes one."""
        parts = urlsplit(url)
        params = dict(parse_qsl(parts.query))
        configuration = client.Configuration()
        configuration.host = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        if params.get("certificate-authority"):
            configuration.ssl_ca_cert = params["certificate-authority"]
        if params.get("token-file"):
            token = Path(params["token-file"]).read_text().strip()
            configuration.api_key = {"authorization": f"Bearer {token}"}
        return cls(client.ApiClient(_configured(configuration)), request_timeout_s)

    @classmethod
    def from_kubeconfig(
        cls, path: Path | None = None, context: str | None = None, request_timeout_s: float = 10.0
    ) -> KubeCluster:
        configuration = client.Configuration()
        shown = str(path) if path else os.environ.get("KUBECONFIG") or "~/.kube/config"
        if path is not None and not path.is_file():
            raise InputError(f"kubeconfig {path}", "no such file")
        with _unusable_config(f"kubeconfig {shown}"):
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(path) if path else None,
                context=context,
                client_configuration=configuration,
            )
        return cls(client.ApiClient(_configured(configuration)), request_timeout_s)

    @classmethod
    def in_cluster(cls, request_timeout_s: float = 10.0) -> KubeCluster:
        """The pod's ServiceAccount: KUBERNETES_SERVICE_HOST/PORT and the projected token
        volume. GPUBOT_SERVICEACCOUNT_DIR names another directory holding its `token` and
        `ca.crt` than /var/run/secrets/kubernetes.io/serviceaccount (the simulator writes one
        per ServiceAccount, see docs/simulator.md)."""
        configuration = client.Configuration()
        directory = os.environ.get(SERVICEACCOUNT_DIR_ENV)
        with _unusable_config("--in-cluster"):
            if directory:
                InClusterConfigLoader(  # type: ignore[no-untyped-call]
                    token_filename=str(Path(directory) / "token"),
                    cert_filename=str(Path(directory) / "ca.crt"),
                ).load_and_set(client_configuration=configuration)
            else:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return cls(client.ApiClient(_configured(configuration)), request_timeout_s)

    def unreachable(self, timeout_s: float = 2.0) -> str | None:
        """None when the API server answers `GET /version` (open to every client, the
        cheapest request there is) within `timeout_s`; else why not, as `/readyz` says it:
        "kubernetes api unreachable: connection refused", no URL."""
        try:
            with _converted("GET /version", self.outage):
                response: Any = self._version.get_code(
                    _preload_content=False, _request_timeout=timeout_s
                )
                response.read()  # a few bytes; read, so the connection can be used again
                response.release_conn()
        except GpubotError as exc:
            cause = exc.__cause__
            if isinstance(cause, ApiException):
                return f"kubernetes api answers {short_reason(cause)}"
            return f"kubernetes api unreachable: {short_reason(cause or exc)}"
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
        reviews: Any = client.AuthorizationV1Api(self._api)
        with _converted(f"access review: {verb} {resource}"):
            response = reviews.create_self_subject_access_review(
                body, _preload_content=False, _request_timeout=self._timeout
            )
            review: Obj = json.loads(response.data)
        return bool((review.get("status") or {}).get("allowed"))

    # ---- reads --------------------------------------------------------------------------

    def _lister(self, kind: Kind, namespace: str) -> Callable[..., Any]:
        core, apps, policy = self._core, self._apps, self._policy
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
                self._coordination.list_lease_for_all_namespaces,
                self._coordination.list_namespaced_lease,
            ),
        }
        everywhere, scoped = table[kind]
        if namespace:
            return lambda **kw: scoped(namespace, **kw)
        return everywhere

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
        lister = self._lister(kind, namespace)
        items: list[Obj] = []
        token: str | None = None
        with _converted(f"list {kind}", self.outage):
            while True:
                response = lister(
                    label_selector=label_selector or None,
                    field_selector=field_selector or None,
                    limit=500,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=self._timeout,
                )
                page = json.loads(response.data)
                api_version = page.get("apiVersion", "v1")
                for item in page.pop("items", None) or []:
                    item.setdefault("kind", kind)
                    item.setdefault("apiVersion", api_version)
                    if each is None:
                        items.append(item)
                    else:
                        each(item)
                token = meta(page).get("continue")
                if not token:
                    return items, str(meta(page).get("resourceVersion", ""))

    def watch(
        self,
        kind: Kind,
        resource_version: str,
        namespace: str = "",
        label_selector: str = "",
        field_selector: str = "",
        timeout_s: int = 300,
    ) -> Iterator[tuple[str, Obj]]:
        # Raw lines rather than kubernetes.watch.Watch: it deserialises every object into
        # models (slow, memory-hungry at 100,000 pods) and mishandles ERROR events raw.
        lister = self._lister(kind, namespace)
        with _converted(f"watch {kind}", self.outage):
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
            with _converted(f"watch {kind}", self.outage):
                for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                    if not line:
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        message = f"watch {kind}: {obj.get('message', 'error')}"
                        if obj.get("code") == 410:
                            raise WatchExpired(message)
                        raise TemporaryError(message)
                    obj.setdefault("kind", kind)
                    yield str(event.get("type")), obj
        finally:
            response.close()
            response.release_conn()

    def get(self, kind: Kind, namespace: str, name: str) -> Obj:
        core, apps, policy = self._core, self._apps, self._policy
        readers: dict[str, Callable[..., Any]] = {
            "Node": lambda **kw: core.read_node(name, **kw),
            "Pod": lambda **kw: core.read_namespaced_pod(name, namespace, **kw),
            "Event": lambda **kw: core.read_namespaced_event(name, namespace, **kw),
            "PodDisruptionBudget": lambda **kw: policy.read_namespaced_pod_disruption_budget(
                name, namespace, **kw
            ),
            "DaemonSet": lambda **kw: apps.read_namespaced_daemon_set(name, namespace, **kw),
            "ReplicaSet": lambda **kw: apps.read_namespaced_replica_set(name, namespace, **kw),
            "Lease": lambda **kw: self._coordination.read_namespaced_lease(name, namespace, **kw),
        }
        with _converted(f"get {kind} {namespace + '/' if namespace else ''}{name}", self.outage):
            response = readers[kind](_preload_content=False, _request_timeout=self._timeout)
            obj: Obj = json.loads(response.data)
            return obj

    # ---- writes -------------------------------------------------------------------------

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> Obj:
        with _converted(f"patch node {name}", self.outage):
            response: Any = self._core.patch_node(
                name,
                dict(patch),
                _content_type=STRATEGIC_MERGE,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
            obj: Obj = json.loads(response.data)
            return obj

    def evict(self, namespace: str, name: str, grace_period_s: int | None = None) -> None:
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            delete_options=client.V1DeleteOptions(grace_period_seconds=grace_period_s)
            if grace_period_s is not None
            else None,
        )
        with _converted(f"eviction of pod {namespace}/{name}", self.outage):
            self._core.create_namespaced_pod_eviction(
                name, namespace, body, _preload_content=False, _request_timeout=self._timeout
            )

    def delete_pod(self, namespace: str, name: str, grace_period_s: int | None = None) -> None:
        with _converted(f"delete pod {namespace}/{name}", self.outage):
            self._core.delete_namespaced_pod(
                name,
                namespace,
                grace_period_seconds=grace_period_s,
                _preload_content=False,
                _request_timeout=self._timeout,
            )

    def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> Obj:
        creators: dict[str, Callable[..., Any]] = {
            "Pod": self._core.create_namespaced_pod,
            "Lease": self._coordination.create_namespaced_lease,
        }
        name = str(meta(body).get("name", ""))
        with _converted(f"create {kind} {namespace}/{name}", self.outage):
            response = creators[kind](
                namespace, dict(body), _preload_content=False, _request_timeout=self._timeout
            )
            obj: Obj = json.loads(response.data)
            return obj

    def replace(self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]) -> Obj:
        replacers: dict[str, Callable[..., Any]] = {
            "Lease": self._coordination.replace_namespaced_lease,
        }
        with _converted(f"replace {kind} {namespace}/{name}", self.outage):
            response = replacers[kind](
                name, namespace, dict(body), _preload_content=False, _request_timeout=self._timeout
            )
            obj: Obj = json.loads(response.data)
            return obj

    def pod_log(self, namespace: str, name: str, container: str | None = None) -> str:
        with _converted(f"log of pod {namespace}/{name}", self.outage):
            response: Any = self._core.read_namespaced_pod_log(
                name,
                namespace,
                container=container,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
            return bytes(response.data).decode(errors="replace")
