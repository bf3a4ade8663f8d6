"""The HTTP app of `gpubot serve`: the webhook, health, readiness and metrics on one port.

Why it exists: the process' own endpoints (`/healthz`, `/readyz`, `/metrics`) sit beside the
intake's (`POST /alertmanager`, and Slack's `/slack/events` passed in as extra routes with
their own authentication), and a supervisor reads them to decide whether to route traffic
here or restart the process.

What it must never do: run a database call on the event loop, or let the webhook's
credentials open another route.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.clock import Clock, utcnow
from bot.errors import InputError, StoreUnavailable
from bot.ports import SignalStore
from bot.process.telemetry import Telemetry
from bot.sources.alertmanager.endpoint import Webhook, WebSettings

log = logging.getLogger(__name__)


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
) -> Starlette:
    """The ASGI app of `gpubot serve`.

    `on_delivery` is told of each stored delivery, on the event loop's thread: it must not
    block (enqueue and return). `ready` says whether the
    rest of the process is up (for `/readyz`). Metrics go to `metrics` when given (the lead
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
    webhook = Webhook(store, settings, on_delivery, metrics, clock)

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
        try:
            await run_in_threadpool(store.ping)
        except StoreUnavailable as exc:
            return JSONResponse({"ready": False, "reason": str(exc)}, status_code=503)
        except Exception:
            log.exception("the store's readiness probe failed")
            return JSONResponse({"ready": False, "reason": "store probe failed"}, status_code=503)
        return JSONResponse({"ready": True})

    async def metrics_endpoint(_request: Request) -> Response:
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
