"""`POST /alertmanager`: Alertmanager's webhook, authenticated, bounded, validated, stored.

Alertmanager retries a webhook on 5xx and never on 4xx, so the status code is the contract:
- 200 only after the payload is in the store (invariant 8): validated, then kept as received,
  in one row. The pipeline hears of it afterwards, through `on_delivery`, and splits it into
  signals behind the 200 (`inbox`); a failure there is logged and counted, never turned into
  a 5xx for alerts that are already stored.
- 503 when the store could not take them (down, locked): Alertmanager sends them again.
- 4xx for bad input (no or wrong credentials, too large, not JSON, wrong shape, text the
  store cannot hold), and then nothing is stored (invariant 7). Bad input never gets a 5xx.
- 500 only for a bug, always logged: the alert is not acknowledged, so it is not lost either.

What this module must never do: answer before storing, read an unbounded body, compare
credentials with `==`, or run a database call on the event loop.
"""

from __future__ import annotations

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

from bot.config import Settings
from bot.errors import InputError, StoreUnavailable
from bot.ports import SignalStore
from bot.process.telemetry import Telemetry
from bot.sources.alertmanager.payloads import WebhookPayload, node_from_labels, parse_webhook
from bot.sources.alertmanager.writer import DeliveryWriter

log = logging.getLogger(__name__)

MiB = 1 << 20

# What the store's columns hold (bot/store/tables.py, `signals`): PostgreSQL refuses longer
# text, NUL characters and lone surrogates with an error that would otherwise be a 500.
MAX_NAME = 200
MAX_FINGERPRINT = 200
MAX_NODE = 253
MAX_INT32 = 2**31 - 1
# A body this small is checked on the event loop: pydantic reads a hundred alerts in well
# under a millisecond, less than the hop to a worker thread costs. Larger ones take the hop,
# so /healthz never waits behind a big payload.
PARSE_ON_LOOP_BYTES = 64 * 1024
# An error message echoes a field path; a path may hold a label key of any length.
MAX_ERROR_TEXT = 500


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
    max_body_bytes: int = Field(default=MiB, gt=0)
    node_labels: list[str] = Field(default_factory=_default_node_labels)
    """Alert labels that name the node (`bot.config.Settings.node_labels`)."""

    @classmethod
    def from_settings(cls, settings: Settings, **values: Any) -> WebSettings:
        return cls(node_labels=list(settings.node_labels), **values)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    if len(message) > MAX_ERROR_TEXT:
        message = message[:MAX_ERROR_TEXT] + "…"
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class Webhook:
    """Owns the webhook's credentials, its writer thread (`DeliveryWriter`) and nothing
    stored: each request is checked, stored, then announced through `on_delivery`."""

    def __init__(
        self,
        store: SignalStore,
        settings: WebSettings,
        on_delivery: Callable[[], None],
        metrics: Telemetry,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.on_delivery = on_delivery
        self.writer = DeliveryWriter(store)
        self.metrics = metrics
        self.clock = clock
        self.max_body = settings.max_body_bytes
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
                return self._too_large()
        try:
            body = await self._read(request, self.max_body)
        except ClientDisconnect:
            return _error(400, "the client went away before sending the whole body")
        if body is None:
            return self._too_large()

        try:
            if len(body) > PARSE_ON_LOOP_BYTES:
                alerts, truncated = await run_in_threadpool(self._check, body)
            else:
                alerts, truncated = self._check(body)
        except InputError as exc:
            return _error(400, str(exc))

        try:
            await self.writer.add("alertmanager", body, self.clock())
        except StoreUnavailable as exc:
            log.warning("webhook: store unavailable, answering 503 for a retry: %s", exc)
            return _error(503, f"store unavailable, retry: {exc}", {"Retry-After": "5"})

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

    def _too_large(self) -> Response:
        return _error(413, f"body larger than {self.max_body} bytes")

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

    @staticmethod
    async def _read(request: Request, limit: int) -> bytes | None:
        """The body, or None as soon as it grows past `limit` (a chunked request has no
        Content-Length to check up front)."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _check(self, body: bytes) -> tuple[int, int]:
        """(alerts, truncatedAlerts) of a payload the store can keep, or an `InputError`."""
        payload = parse_webhook(body)
        # pydantic's reader refuses lone surrogates, and NUL can only come as an escape:
        # unless one is spelled out, every text is fit to store.
        texts_fit = b"\\u0000" not in body and b"\\ud" not in body and b"\\uD" not in body
        _check_storable(payload, self.node_labels, check_texts=not texts_fit)
        return len(payload.alerts), payload.truncatedAlerts


def _check_text(where: str, text: str) -> None:
    if "\0" in text:
        raise InputError("payload", f"field {where}: contains a NUL character")
    try:
        text.encode()
    except UnicodeEncodeError as exc:
        raise InputError("payload", f"field {where}: not valid Unicode ({exc.reason})") from exc


def _check_storable(
    payload: WebhookPayload, node_labels: list[str], *, check_texts: bool = True
) -> None:
    """Text and numbers the store can hold, or an `InputError` naming the field: a valid
    payload must not meet its first refusal in the database (that would be a 5xx).
    `check_texts=False` skips looking for NUL and lone surrogates, for a body known free of
    them."""
    if not 0 <= payload.truncatedAlerts <= MAX_INT32:
        raise InputError("payload", f"field truncatedAlerts: must be 0 to {MAX_INT32}")
    if check_texts:
        _check_text("groupKey", payload.groupKey)
    for index, alert in enumerate(payload.alerts):
        at = f"alerts.{index}"
        if check_texts:
            for field, mapping in (("labels", alert.labels), ("annotations", alert.annotations)):
                for key, value in mapping.items():
                    _check_text(f"{at}.{field} (a key)", key)
                    _check_text(f"{at}.{field}.{_short(key)}", value)
            _check_text(f"{at}.fingerprint", alert.fingerprint)
        if len(alert.fingerprint) > MAX_FINGERPRINT:
            raise InputError(
                "payload", f"field {at}.fingerprint: longer than {MAX_FINGERPRINT} characters"
            )
        if len(alert.labels.get("alertname", "")) > MAX_NAME:
            raise InputError(
                "payload", f"field {at}.labels.alertname: longer than {MAX_NAME} characters"
            )
        node = node_from_labels(alert.labels, node_labels)
        if node is not None and len(node) > MAX_NODE:
            raise InputError(
                "payload",
                f"field {at}.labels: the node name {_short(node)!r} is longer than "
                f"{MAX_NODE} characters",
            )
