"""The HTTP app of `gpubot serve`: the webhook, health, readiness and metrics on one port.

Why it exists: the process' own endpoints (`/healthz`, `/readyz`, `/metrics`) sit beside the
intake's (`POST /alertmanager`, and Slack's `/slack/events` passed in as extra routes with
their own authentication), and a supervisor reads them to decide whether to route traffic
here or restart the process. `/readyz` fails while the store or (with its probe) the
Kubernetes API does not answer; `/healthz` says only that the process serves. Both are open
and say nothing of where anything is; `/metrics` asks for a bearer token when one is set.

The server around the app (`server_config`) cuts what uvicorn alone would hold for good: a
connection whose request headers are not complete within `header_timeout_s` (of opening, or
of the previous response) is closed. Bodies have their own deadline, in the endpoints that
read them (`bot.process.bodies`).

What it must never do: run a database call on the event loop, let the webhook's credentials
open another route (or the metrics token the webhook), or show a connection string.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable, Sequence

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from bot.clock import Clock, utcnow
from bot.errors import InputError, StoreUnavailable
from bot.ports import SignalStore
from bot.process.health import Outage, Probe
from bot.process.telemetry import Telemetry
from bot.sources.alertmanager.endpoint import Webhook, WebSettings

log = logging.getLogger(__name__)


def store_probe(store: SignalStore, outage: Outage | None = None) -> Probe:
    """`/readyz`'s store check: `store.ping`, asked at every probe (it is one cheap query).
    Its reason is the ping's, which names no URL, host, user or database; the log (with
    `outage`) gets the whole error, once."""

    def check() -> str | None:
        try:
            store.ping()
        except StoreUnavailable as exc:
            if outage is not None:
                outage.down(str(exc.__cause__ or exc))
            return f"store unavailable: {exc}"
        if outage is not None:
            outage.up()
        return None

    return Probe("store", check)


def build_app(
    store: SignalStore,
    settings: WebSettings,
    on_delivery: Callable[[], None],
    ready: Callable[[], bool] = lambda: True,
    registry: CollectorRegistry | None = None,
    *,
    metrics: Telemetry | None = None,
    clock: Clock = utcnow,
    extra_routes: Sequence[BaseRoute] = (),
    probes: Sequence[Probe] = (),
) -> Starlette:
    """The ASGI app of `gpubot serve`.

    `on_delivery` is told of each stored delivery, on the event loop's thread: it must not
    block (enqueue and return). `ready` says whether the
    rest of the process is up (for `/readyz`); the store is probed too (`store_probe`, its
    outages told once, shared with the webhook), and so is each of `probes` (the Kubernetes
    API's, from `gpubot serve`). Metrics go to `metrics` when given (the lead
    builds one to share with the pipeline), else to a new `Telemetry` on `registry` (a
    fresh registry when None); either way `app.state.metrics` is the one in use.
    `extra_routes` carry their own authentication (Slack's `/slack/events` is signed), not the
    webhook's credentials.

    Raises `InputError` when no credentials are configured: the webhook never runs open.
    """
    if settings.bearer_token is None and not settings.basic_auth:
        raise InputError(
            "web settings",
            "no webhook credentials: set a bearer token or basic-auth users "
            "(the webhook never accepts unauthenticated requests)",
        )
    if metrics is None:
        metrics = Telemetry(registry)
    elif registry is not None and registry is not metrics.registry:
        raise ValueError("pass either metrics or registry, or metrics on that registry")
    store_outage = Outage("store", log)
    webhook = Webhook(store, settings, on_delivery, metrics, clock, store_outage)
    checks = [store_probe(store, store_outage), *probes]
    metrics_token = None if settings.metrics_token is None else settings.metrics_token.encode()

    def not_ready() -> list[str]:
        return [reason for reason in (check() for check in checks) if reason is not None]

    async def healthz(_request: Request) -> Response:
        return JSONResponse({"alive": True})

    async def readyz(_request: Request) -> Response:
        try:
            up = ready()
        except Exception:
            log.exception("the readiness callback raised")
            up = False
        if not up:
            return JSONResponse({"ready": False, "reason": "not ready"}, status_code=503)
        reasons = await run_in_threadpool(not_ready)
        if reasons:
            return JSONResponse({"ready": False, "reason": "; ".join(reasons)}, status_code=503)
        return JSONResponse({"ready": True})

    async def metrics_endpoint(request: Request) -> Response:
        if metrics_token is not None and not _bearer_is(request, metrics_token):
            return JSONResponse(
                {"error": "missing or wrong credentials"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="gpubot-metrics"'},
            )
        body = generate_latest(webhook.metrics.registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    app = Starlette(
        routes=[
            Route("/alertmanager", webhook.handle, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
            *extra_routes,
        ]
    )
    app.state.metrics = metrics
    return app


def _bearer_is(request: Request, token: bytes) -> bool:
    scheme, _, credentials = request.headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode(), token)


# ---- the server -----------------------------------------------------------------------------


def _arm_header_deadline(protocol: HttpToolsProtocol, timeout_s: float) -> None:
    """Closes the connection unless a request's headers are complete within `timeout_s`:
    uvicorn starts a new request cycle only then, so the cycle is what tells."""
    cycle = protocol.cycle
    transport = protocol.transport

    def expire() -> None:
        if protocol.cycle is cycle and not transport.is_closing():
            transport.close()

    protocol.loop.call_later(timeout_s, expire)


class HeaderDeadlineHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol (its default when httptools is installed, as gpubot's
    dependencies make it), whose connections must send a request's headers in time."""

    header_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        _arm_header_deadline(self, self.header_timeout_s)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        _arm_header_deadline(self, self.header_timeout_s)


def server_config(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    header_timeout_s: float = 10.0,
    keep_alive_s: int = 5,
) -> uvicorn.Config:
    """uvicorn's configuration for gpubot's app: headers within `header_timeout_s`, an idle
    kept-alive connection closed after `keep_alive_s`, its own log at warning."""
    protocol = type(
        "HeaderDeadlineProtocol", (HeaderDeadlineHttpTools,), {"header_timeout_s": header_timeout_s}
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        # Its records go through the process's log (`bot.process.logs`), not a format of its own.
        log_config=None,
        lifespan="off",
        http=protocol,
        timeout_keep_alive=keep_alive_s,
    )
