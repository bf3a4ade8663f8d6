"""Raw HTTPS requests to a simulated API server, as a client that trusts the cluster's CA and
sends a bearer token (the admin's unless another is given): for the tests that check the
API at the HTTP level (Status bodies, watch streams, 401 and 403) rather than through a
client library. TLS verification is never turned off."""

from __future__ import annotations

import http.client
import urllib.request
from typing import Any

from gpusim.apiserver import SimulatedApiServer


def urlopen(
    api: SimulatedApiServer,
    path: str,
    *,
    method: str = "GET",
    data: bytes | None = None,
    headers: dict[str, str] | None = None,
    token: str | None = None,
    timeout: float = 10,
) -> Any:
    """`urllib.request.urlopen` on `api.address + path`; HTTP errors raise HTTPError."""
    request = urllib.request.Request(api.address + path, data=data, method=method)
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    if token != "":
        request.add_header("Authorization", f"Bearer {token or api.admin_token}")
    return urllib.request.urlopen(
        request, timeout=timeout, context=api.credentials.client_context()
    )


def connection(api: SimulatedApiServer, timeout: float = 10) -> http.client.HTTPSConnection:
    """A kept-alive HTTPS connection to the server (for tests that reuse one)."""
    return http.client.HTTPSConnection(
        "127.0.0.1", api.port, timeout=timeout, context=api.credentials.client_context()
    )
