"""The Metrics port on prometheus-api-client: the one module that imports it.

`PrometheusConnect.custom_query` sends the instant query (`/api/v1/query` with `time` and
`timeout`); everything that can go wrong becomes one of gpubot's own errors, once, here:

- no connection, a read past `timeout_s`, a broken stream, 408, 429 or 5xx (Prometheus
  answers 503 when its own query timeout strikes) → `TemporaryError`: asking again may work;
- any other 4xx (400 `bad_data` for a query that does not parse, 422 `execution` for one that
  cannot run) → `PermanentError` carrying Prometheus' own error text and the status code;
- a 200 that is not Prometheus' JSON, or a range vector where an instant vector belongs →
  `PermanentError`.

The client's default retries (three, with backoff, on 5xx) are switched off: the caller owns
the deadline, and a retry inside it would only hide that Prometheus is struggling. Non-200
answers are caught by a response hook on our own session, so the status, the headers and the
JSON body survive; the library's own exception flattens them into one string.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import requests
import urllib3
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from bot.errors import GpubotError, PermanentError, TemporaryError
from bot.ports import Sample

_TEMPORARY_STATUS = frozenset({408, 429})
_CONFIG_ERRORS = (
    requests.exceptions.InvalidURL,
    requests.exceptions.MissingSchema,
    requests.exceptions.InvalidSchema,
    requests.exceptions.InvalidHeader,
)
_POOL_SIZE = 32
"""Connections kept per Prometheus: the evidence pipeline runs its queries side by side."""


class _NotOk(Exception):
    """Raised by the response hook for any status but 200; carries the response."""

    def __init__(self, response: requests.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _raise_unless_ok(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    if response.status_code != 200:
        raise _NotOk(response)


def _prometheus_error(response: requests.Response) -> str:
    """Prometheus' `error` text (`errorType: error`), or the start of whatever came back."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("error"):
        kind = body.get("errorType")
        return f"{kind}: {body['error']}" if kind else str(body["error"])
    text = response.text.strip()
    return text[:300] if text else response.reason or str(response.status_code)


def _from_status(response: requests.Response, url: str) -> GpubotError:
    code = response.status_code
    message = f"Prometheus at {url} answered {code}: {_prometheus_error(response)}"
    if code >= 500 or code in _TEMPORARY_STATUS:
        retry = response.headers.get("Retry-After", "")
        return TemporaryError(message, float(retry) if retry.isdigit() else None)
    return PermanentError(message, code)


def _causes(exc: BaseException) -> list[BaseException]:
    """`exc` and every exception nested in it (args, urllib3's `reason`, the chain)."""
    seen: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        pending += [a for a in current.args if isinstance(a, BaseException)]
        for attribute in ("reason", "__cause__", "__context__"):
            inner = getattr(current, attribute, None)
            if isinstance(inner, BaseException):
                pending.append(inner)
    return seen


def _root_cause(exc: BaseException) -> str | None:
    """The innermost OS error ("Connection refused") instead of urllib3's nested reprs."""
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
    return None


def _timed_out(exc: BaseException) -> bool:
    """A read or connect timeout, however deep requests and urllib3 wrapped it. (urllib3's
    NewConnectionError is a ConnectTimeoutError too: ask `_root_cause` first.)"""
    return any(
        isinstance(c, TimeoutError | requests.exceptions.Timeout | urllib3.exceptions.TimeoutError)
        for c in _causes(exc)
    )


def _samples(result: Any) -> list[Sample]:
    """`data.result` of an instant query as samples; a scalar is one sample without labels."""
    if not isinstance(result, list):
        raise PermanentError(f"not a Prometheus query result: {str(result)[:200]}")
    if len(result) == 2 and not isinstance(result[0], dict):  # scalar or string: [ts, "v"]
        return [({}, _value(result[1]))]
    samples: list[Sample] = []
    for item in result:
        if not isinstance(item, dict) or "value" not in item:
            if isinstance(item, dict) and "values" in item:
                raise PermanentError(
                    "the query returned a range vector; the Metrics port takes instant vectors"
                )
            raise PermanentError(f"not a Prometheus sample: {str(item)[:200]}")
        labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        samples.append((labels, _value(item["value"][1])))
    return samples


def _value(raw: Any) -> float:
    try:
        return float(raw)  # Prometheus writes "NaN", "+Inf" and "-Inf" as float() reads them
    except (TypeError, ValueError) as exc:
        raise PermanentError(f"not a number in the query result: {raw!r}") from exc


class PrometheusMetrics:
    """Instant queries against one Prometheus (or anything speaking its HTTP API: Thanos,
    Mimir, VictoriaMetrics). Safe to share between threads."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        verify_tls: bool = True,
    ) -> None:
        self.url = url.rstrip("/")
        self._session = requests.Session()
        self._session.hooks["response"].append(_raise_unless_ok)
        no_retries = Retry(total=0, redirect=0, status_forcelist=(), raise_on_status=False)
        self._prometheus = PrometheusConnect(
            url=self.url,
            headers=dict(headers) if headers else None,
            disable_ssl=not verify_tls,
            retry=no_retries,
            auth=auth,
            session=self._session,
        )
        # The client mounts an adapter with the default pool (10) on the URL; ours replaces it.
        self._session.mount(self.url, HTTPAdapter(max_retries=no_retries, pool_maxsize=_POOL_SIZE))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> PrometheusMetrics:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def query(
        self, promql: str, at: datetime | None = None, timeout_s: float = 5.0
    ) -> list[Sample]:
        if not math.isfinite(timeout_s) or timeout_s <= 0:
            raise ValueError(f"timeout_s must be a positive number of seconds, not {timeout_s}")
        params = {"timeout": f"{timeout_s:.3f}"}  # float seconds, as Prometheus parses them
        if at is not None:
            moment = at if at.tzinfo else at.replace(tzinfo=UTC)
            params["time"] = f"{moment.timestamp():.3f}"
        try:
            result = self._prometheus.custom_query(promql, params=params, timeout=timeout_s)
        except _NotOk as exc:
            raise _from_status(exc.response, self.url) from exc
        except requests.exceptions.JSONDecodeError as exc:
            raise PermanentError(f"Prometheus at {self.url}: not a query API answer") from exc
        except _CONFIG_ERRORS as exc:
            raise PermanentError(f"Prometheus URL {self.url!r}: {exc}") from exc
        except requests.exceptions.RequestException as exc:
            cause = _root_cause(exc)
            if cause is None and _timed_out(exc):
                raise TemporaryError(
                    f"Prometheus at {self.url} did not answer within {timeout_s:g} s"
                ) from exc
            raise TemporaryError(f"cannot reach Prometheus at {self.url}: {cause or exc}") from exc
        except PrometheusApiClientException as exc:  # only if the hook was bypassed
            raise TemporaryError(f"Prometheus at {self.url}: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise PermanentError(f"Prometheus at {self.url}: not a query API answer") from exc
        return _samples(result)
