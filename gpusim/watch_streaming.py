"""`GET ...?watch=true`: a watch streamed as kube-apiserver streams it.

A chunked 200 of one JSON event per line: the initial ADDED events when the watch starts from
no resourceVersion, a BOOKMARK when asked for (`allowWatchBookmarks`), then every change
until the timeout or the server stops. A resourceVersion older than the watch window is
still a 200, carrying one ERROR event with the 410 Status, as the real server answers, so
that client-go's reflector relists. The window itself is `gpusim.watch_history`'s.

It must never write to the cluster, nor answer anything but a watch of a collection.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator

from gpusim.api_requests import ApiRequest, route
from gpusim.objects import Json
from gpusim.resources import ApiError, ResourceType
from gpusim.state import ClusterState
from gpusim.watch_history import WatchEvent


def stream_watch(
    store: ClusterState,
    request: ApiRequest,
    stop: threading.Event,
    started: Callable[[], None],
) -> None:
    """Stream the watch `request` asks for until its timeout or `stop`; `started()` once the
    200 is sent (what the audit log records a watch at)."""
    routed = route(request.parts)
    if routed is None or routed[2]:
        raise ApiError(405, "MethodNotAllowed", "watch needs a collection")
    resource, namespace, _, _ = routed
    raw_rv = request.query.get("resourceVersion", "")
    bookmarks = request.query.get("allowWatchBookmarks") in ("1", "true")
    timeout = float(request.query.get("timeoutSeconds") or 300)
    handler = request.handler
    since = int(raw_rv) if raw_rv.isdigit() and raw_rv != "0" else 0
    initial: list[Json] = []
    if not since:
        initial, since = store.list(
            resource,
            namespace,
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
        )
    expired: ApiError | None = None
    events: Iterator[WatchEvent] = iter(())
    try:
        events = store.watch(
            resource,
            namespace,
            since,
            request.query.get("labelSelector", ""),
            request.query.get("fieldSelector", ""),
            stop=stop,
            timeout_s=timeout,
        )
    except ApiError as exc:
        if exc.code != 410:
            raise
        # As the real server: 200, then one ERROR event carrying the 410 Status.
        expired = exc
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    started()

    def chunk(data: Json) -> None:
        line = json.dumps(data).encode() + b"\n"
        handler.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        handler.wfile.flush()

    try:
        if expired is not None:
            chunk({"type": "ERROR", "object": expired.status()})
        for obj in initial:
            chunk({"type": "ADDED", "object": obj})
        if bookmarks:
            chunk(_bookmark(resource, since))
        for event in events:
            chunk({"type": event.type, "object": event.object})
            if event.type == "ERROR":
                break
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        return


def _bookmark(resource: ResourceType, rv: int) -> Json:
    return {
        "type": "BOOKMARK",
        "object": {
            "kind": resource.kind,
            "apiVersion": resource.api_version,
            "metadata": {"resourceVersion": str(rv)},
        },
    }
