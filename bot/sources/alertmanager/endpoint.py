"""`POST /alertmanager`: Alertmanager's webhook, authenticated, bounded, validated, stored.

Alertmanager retries a webhook on 5xx and never on 4xx, so the status code is the contract:
- 200 only after the payload is in the store (invariant 8): validated, then kept as received,
  in one row. The pipeline hears of it afterwards, through `on_delivery`, and splits it into
  signals behind the 200 (`inbox`); a failure there is logged and counted, never turned into
  a 5xx for alerts that are already stored.
- 503 with Retry-After when the store could not take them (down, locked) or did not within
  `store_deadline_s` (a table lock holds the write): Alertmanager sends them again. A write
  that commits after its 503 makes the retry a duplicate, which the split stores once.
- 4xx for bad input (no or wrong credentials, too large, a body not complete within
  `body_timeout_s` (408), not UTF-8, not JSON, wrong shape, text the store cannot hold), and
  then nothing is stored (invariant 7). Bad input never gets a 5xx. What gets a 200 can be
  split: the door and the split judge a body with one function (`storable_payload`).
  A 413 loses that notification's alerts for good, so it is told in the log, once per cause
  and then every `REFUSALS_TOLD_EVERY_S`, with the size and the fix: `max_alerts` in the
  receiver's webhook_config (`alerts_that_fit`); the 413's body says the same, and
  Alertmanager writes it to its own log.
- 500 only for a bug, always logged: the alert is not acknowledged, so it is not lost either.

What this module must never do: answer before storing, read an unbounded body or wait for
one without end, wait for the store without end, compare credentials with `==`, run a
database call on the event loop, or say the store's address to the sender.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from bot.config import ServeSettings, Settings
from bot.errors import InputError, StoreUnavailable
from bot.ports import SignalStore
from bot.process.bodies import CLOSE_CONNECTION, BodyTooLarge, BodyTooSlow, read_body
from bot.process.health import Outage, Recurring
from bot.process.telemetry import Telemetry
from bot.sources.alertmanager.payloads import alerts_that_fit, storable_payload
from bot.sources.alertmanager.writer import DeliveryWriter

log = logging.getLogger(__name__)

MiB = 1 << 20
# A body this small is checked on the event loop: pydantic reads a hundred alerts in well
# under a millisecond, less than the hop to a worker thread costs. Larger ones take the hop,
# so /healthz never waits behind a big payload.
PARSE_ON_LOOP_BYTES = 64 * 1024
# An error message echoes a field path; a path may hold a label key of any length.
MAX_ERROR_TEXT = 500
REFUSALS_TOLD_EVERY_S = 600.0
"""A refusal that recurs (Alertmanager sends a group again every group_interval) is told again
at most this often per cause, with how many came in between."""


_SERVE = ServeSettings()
"""Where the webhook's defaults come from: `gpubot serve`'s settings say them once."""


def _default_node_labels() -> list[str]:
    default = Settings.model_fields["node_labels"].default
    return list(default)


Token = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Password = Annotated[str, StringConstraints(min_length=1)]


class WebSettings(BaseModel):
    """What `build_app` needs from the configuration. Credentials are never shown in a repr."""

    model_config = ConfigDict(extra="forbid")

    bearer_token: Token | None = Field(default=None, repr=False)
    """`Authorization: Bearer <token>`, as Alertmanager's `http_config.authorization` sends it
    (surrounding whitespace dropped, as Alertmanager drops it from a `credentials_file`)."""
    basic_auth: dict[str, Password] = Field(default_factory=dict, repr=False)
    """User → password, as Alertmanager's `http_config.basic_auth` sends them."""
    max_body_bytes: int = Field(default=_SERVE.max_body_bytes, gt=0)
    body_timeout_s: float = Field(default=_SERVE.body_timeout_s, gt=0)
    """A body not complete this long after its first byte was awaited is a 408."""
    store_deadline_s: float = Field(default=_SERVE.store_deadline_s, gt=0)
    """A delivery the store has not committed within this is a 503 with Retry-After."""
    retry_after_s: int = Field(default=5, ge=0)
    """The Retry-After of a 503."""
    metrics_token: Token | None = Field(default=None, repr=False)
    """`/metrics` asks for `Authorization: Bearer <this>` when set; open when None."""
    node_labels: list[str] = Field(default_factory=_default_node_labels)
    """Alert labels that name the node (`bot.config.Settings.node_labels`)."""

    @classmethod
    def from_settings(cls, settings: Settings, **values: Any) -> WebSettings:
        """The webhook's part of `settings` (the token is the caller's to read: it may come
        from a file), under `values`."""
        serve = settings.serve
        metrics_token = serve.metrics_token
        given: dict[str, Any] = {
            "max_body_bytes": serve.max_body_bytes,
            "body_timeout_s": serve.body_timeout_s,
            "store_deadline_s": serve.store_deadline_s,
            "metrics_token": metrics_token.get_secret_value() if metrics_token else None,
            "node_labels": list(settings.node_labels),
        }
        return cls(**{**given, **values})


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    if len(message) > MAX_ERROR_TEXT:
        message = message[:MAX_ERROR_TEXT] + "…"
    return JSONResponse({"error": message}, status_code=status, headers=headers)


class Webhook:
    """Owns the webhook's credentials, its writer thread (`DeliveryWriter`) and nothing
    stored: each request is checked, stored, then announced through `on_delivery`. A store
    outage it meets is told once through `store_outage` (shared with `/readyz`), a body too
    large once per cause and interval (`refusals`)."""

    def __init__(
        self,
        store: SignalStore,
        settings: WebSettings,
        on_delivery: Callable[[], None],
        metrics: Telemetry,
        clock: Callable[[], datetime],
        store_outage: Outage | None = None,
    ) -> None:
        self.store = store
        self.on_delivery = on_delivery
        self.writer = DeliveryWriter(store)
        self.metrics = metrics
        self.clock = clock
        self.store_outage = store_outage or Outage("store", log)
        self.refusals = Recurring(log, REFUSALS_TOLD_EVERY_S, lambda: self.clock().timestamp())
        self.max_body = settings.max_body_bytes
        self.body_timeout_s = settings.body_timeout_s
        self.store_deadline_s = settings.store_deadline_s
        self.retry_after = {"Retry-After": str(settings.retry_after_s)}
        self.node_labels = list(settings.node_labels)
        self.token = None if settings.bearer_token is None else settings.bearer_token.encode()
        self.users = {user: pw.encode() for user, pw in settings.basic_auth.items()}
        challenges = []
        if self.token is not None:
            challenges.append('Bearer realm="gpubot"')
        if self.users:
            challenges.append('Basic realm="gpubot", charset="UTF-8"')
        self.challenge = ", ".join(challenges)

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        try:
            response = await self._handle(request)
        except Exception:
            # A bug: not acknowledged, so Alertmanager sends it again; logged to be fixed.
            log.exception("webhook request failed")
            response = _error(500, "internal error: the alerts were not stored")
        self.metrics.webhook_requests.labels(code=str(response.status_code)).inc()
        self.metrics.webhook_duration.observe(time.perf_counter() - started)
        return response

    async def _handle(self, request: Request) -> Response:
        if not self._authorized(request.headers.get("authorization")):
            self.metrics.webhook_auth_failures.inc()
            return _error(401, "missing or wrong credentials", {"WWW-Authenticate": self.challenge})
        declared = request.headers.get("content-length")
        if declared is not None:
            if not (declared.isascii() and declared.strip().isdigit()):
                return _error(400, "Content-Length is not a number")
            if int(declared) > self.max_body:
                return self._too_large(int(declared))
        try:
            body = await read_body(request, self.max_body, self.body_timeout_s)
        except ClientDisconnect:
            return _error(400, "the client went away before sending the whole body")
        except BodyTooLarge:
            return self._too_large(None)
        except BodyTooSlow as exc:
            return _error(408, str(exc), CLOSE_CONNECTION)

        try:
            if len(body) > PARSE_ON_LOOP_BYTES:
                alerts, truncated = await run_in_threadpool(self._check, body)
            else:
                alerts, truncated = self._check(body)
        except InputError as exc:
            return _error(400, str(exc))

        stuck = self.writer.stuck_for()
        if stuck > self.store_deadline_s:
            # A write hangs (a table lock): queueing more bodies behind it helps nobody.
            self.store_outage.down(
                f"a write has waited {stuck:.0f} s (a lock?); webhooks are answered 503"
            )
            return self._unavailable("store busy")
        try:
            await asyncio.wait_for(
                self.writer.add("alertmanager", body, self.clock()), self.store_deadline_s
            )
        except StoreUnavailable as exc:
            self.store_outage.down(f"{exc} (webhooks are answered 503)")
            reason = "store locked" if "locked" in str(exc) else "store unavailable"
            return self._unavailable(reason)
        except TimeoutError:
            self.store_outage.down(
                f"no commit within {self.store_deadline_s:g} s (webhooks are answered 503)"
            )
            return self._unavailable(f"store did not answer within {self.store_deadline_s:g} s")
        self.store_outage.up()

        if truncated:
            self.metrics.alerts_truncated.inc(truncated)
            log.warning("webhook: Alertmanager left out %d alerts of a group", truncated)
        try:
            self.on_delivery()
        except Exception:
            # Stored is stored: the next split takes it; the sender need not send it again.
            self.metrics.signal_handler_errors.inc()
            log.exception("webhook: on_delivery raised for a stored delivery")
        return JSONResponse({"accepted": alerts, "truncated_alerts": truncated})

    def _too_large(self, size: int | None) -> Response:
        """413, told in the log (once per cause and interval) and in the answer, which
        Alertmanager logs: it does not retry a 4xx, so the notification's alerts are lost.
        `size`: as the request declared it (None when it sent no Content-Length)."""
        fit = alerts_that_fit(self.max_body)
        fix = (
            f"set max_alerts in Alertmanager's webhook_config (about {fit} alerts fit) or "
            "raise serve.max_body_bytes"
        )
        lost = "Alertmanager does not retry a 4xx: the alerts of that notification are lost"
        if size is None:
            self.refusals.tell(
                "streamed",
                "webhook refused (413): a body sent without Content-Length grew past "
                "serve.max_body_bytes (%d); %s; %s",
                self.max_body,
                lost,
                fix,
            )
        else:
            self.refusals.tell(
                "declared",
                "webhook refused (413): a body of %d bytes, over serve.max_body_bytes (%d); %s; %s",
                size,
                self.max_body,
                lost,
                fix,
            )
        return _error(413, f"body larger than {self.max_body} bytes: {fix}")

    def _unavailable(self, why: str) -> Response:
        """503: Alertmanager sends the delivery again. Says nothing of where the store is."""
        return _error(503, f"{why}: the alerts were not stored, retry", self.retry_after)

    def _authorized(self, header: str | None) -> bool:
        if not header:
            return False
        scheme, _, credentials = header.strip().partition(" ")
        scheme = scheme.lower()
        credentials = credentials.strip()
        if scheme == "bearer" and self.token is not None:
            return hmac.compare_digest(credentials.encode(), self.token)
        if scheme == "basic" and self.users:
            try:
                decoded = base64.b64decode(credentials, validate=True).decode()
            except ValueError:  # binascii.Error, UnicodeDecodeError, non-ASCII text
                return False
            user, sep, password = decoded.partition(":")
            expected = self.users.get(user)
            # Compare even for an unknown user, so the timing does not tell who exists.
            same = hmac.compare_digest(
                password.encode(), b"\0" * 32 if expected is None else expected
            )
            return bool(sep) and expected is not None and same
        return False

    def _check(self, body: bytes) -> tuple[int, int]:
        """(alerts, truncatedAlerts) of a payload the store can keep, or an `InputError`."""
        payload = storable_payload(body, self.node_labels)
        return len(payload.alerts), payload.truncatedAlerts
