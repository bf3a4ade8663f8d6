"""The kubernetes client's construction: from a connection URL, a kubeconfig, or the pod's
ServiceAccount.

Why a module of its own: how gpubot finds and authenticates to an API server is a choice made
once at start-up, with its own failure (credentials a person must fix), and nothing to do with
the requests made afterwards. Every client built here has urllib3's retries off: they doubled
the time a request could take and logged a warning line per attempt (hundreds in an outage);
the callers retry, each on its own schedule. And each keeps `KUBE_CONNECTIONS` connections
for the next request: the client's default (`cpu_count() * 5`) is smaller than a drain's
evictions in flight, and urllib3 closed the rest with a warning each (issue 31, item 6).

What it must never do: make a request, or let a loader's traceback stand for a kubeconfig or
ServiceAccount that cannot be used (it is one `InputError` line naming it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import yaml
from kubernetes import client, config
from kubernetes.config.incluster_config import InClusterConfigLoader

from bot.config import DRAIN_CONCURRENCY
from bot.errors import InputError

SERVICEACCOUNT_DIR_ENV = "GPUBOT_SERVICEACCOUNT_DIR"
"""Where `in_cluster` reads the ServiceAccount's token and CA, when not from the standard
mount (set for `gpubot serve --in-cluster` against the simulator)."""

STANDING_CONNECTIONS = 8
"""Requests in flight beside a drain's: the three watches' streams (nodes, pods, events),
the leader election, a pass's reads, the readiness probe, the smoke test, a second look."""

KUBE_CONNECTIONS = DRAIN_CONCURRENCY + STANDING_CONNECTIONS
"""The connections a client keeps for the next request (urllib3's pool `maxsize`). The client
speaks HTTP/1.1, one connection per request in flight; a connection over the pool's size is
closed when its request ends, with a "Connection pool is full, discarding connection"
warning, and the next request pays a new TLS handshake. (client-go speaks HTTP/2 to the API
server: kubectl drain's concurrent evictions share one connection.) It bounds what is kept,
not what is used: urllib3 opens more when more are asked for at once (`block=False`)."""


def client_for_url(url: str) -> client.ApiClient:
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
    return _client(configuration)


def client_from_kubeconfig(
    path: Path | None = None, context: str | None = None
) -> client.ApiClient:
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
    return _client(configuration)


def client_in_cluster() -> client.ApiClient:
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
    return _client(configuration)


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


def _client(configuration: client.Configuration) -> client.ApiClient:
    """No urllib3 retries: each caller retries on its own schedule, and urllib3's log a
    warning line per attempt. A pool of `KUBE_CONNECTIONS`: a drain's evictions and the
    watches at once, none closed for want of room."""
    configuration.retries = False
    configuration.connection_pool_maxsize = KUBE_CONNECTIONS
    return client.ApiClient(configuration)
