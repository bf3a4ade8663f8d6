"""The kubernetes client's failures as gpubot's own errors, and in words fit for anyone.

Why a module of its own: every request the adapter makes fails the same few ways (an
`ApiException` with a Status body, or urllib3 and the OS giving up before anything answered),
and what each way means (retry, read again, give up, the eviction budget says no) must be
decided once, for reads, watches and writes alike; beside it, the few words `/readyz` and
the outage line say, which must name no URL, host or port.

What it must never do: make a request, retry one, or let a client exception escape as
itself (callers above the adapter know only `bot.errors`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import urllib3
from kubernetes.client.exceptions import ApiException

from bot.errors import (
    AlreadyExists,
    Conflict,
    EvictionBlocked,
    GpubotError,
    NotFound,
    PermanentError,
    TemporaryError,
    WatchExpired,
)
from bot.process.health import Outage


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


def unreachable_reason(exc: GpubotError) -> str:
    """What `/readyz` says of a failed `GET /version`: an answer that refused, or none."""
    cause = exc.__cause__
    if isinstance(cause, ApiException):
        return f"kubernetes api answers {short_reason(cause)}"
    return f"kubernetes api unreachable: {short_reason(cause or exc)}"


@contextmanager
def converted(what: str, outage: Outage | None = None) -> Iterator[None]:
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
