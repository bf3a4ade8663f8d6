"""The simulated cluster's watch window: the last writes, each as the object was at its version.

A watch from a resourceVersion replays what was written after it and then follows new writes,
as kube-apiserver's watch cache and etcd's history do; a watch from further back than the
window reaches gets 410 Gone and must relist. Keeping this apart from the objects lets the
store stay the one place that decides what a write is, while the window only remembers.

It must never hold the objects' current state (that is `gpusim.storage`) nor decide what a
write does; and it must never be read without the store's lock, which it shares.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.kube_objects import labels_of, namespace_of
from gpusim.field_selectors import FieldSelector
from gpusim.label_selectors import LabelSelector
from gpusim.objects import Json
from gpusim.resources import ApiError, ResourceType

HISTORY = 20_000
"""Writes a cluster remembers for its watchers by default."""


@dataclass(frozen=True)
class WatchEvent:
    """One entry of the watch history: the object as it was written at that version."""

    resource_version: int
    type: str
    resource: ResourceType
    object: Json


class WatchHistory:
    """The last `size` writes of one cluster, oldest first. It owns that bounded list and wakes
    the watchers waiting on the shared lock when a write lands; it must never drop an event
    out of order or keep one longer than the window allows."""

    def __init__(self, lock: threading.Condition, size: int = HISTORY) -> None:
        self._lock = lock
        self._events: deque[WatchEvent] = deque(maxlen=size)

    def record(
        self, resource_version: int, event_type: str, resource: ResourceType, obj: Json
    ) -> None:
        """A write, kept as a copy: the store changes its objects in place afterwards. The
        caller holds the lock."""
        self._events.append(WatchEvent(resource_version, event_type, resource, copy.deepcopy(obj)))
        self._lock.notify_all()

    def check(self, since: int, current: int) -> None:
        """410 Gone when a watch from `since` starts before what the window still holds
        (`current`: the cluster's resourceVersion, for an empty window)."""
        with self._lock:
            oldest = self._events[0].resource_version if self._events else current
            if since and since < oldest - 1:
                raise ApiError(410, "Expired", f"too old resource version: {since} ({oldest - 1})")

    def events(
        self,
        resource: ResourceType,
        namespace: str,
        since: int,
        labels: LabelSelector,
        fields: FieldSelector,
        stop: threading.Event | None,
        timeout_s: float,
    ) -> Iterator[WatchEvent]:
        """The events of `resource` after `since` that the selectors pass, waiting for new ones
        until `stop` or the timeout; one ERROR event carrying the 410 when the watcher falls
        behind the window."""
        deadline = datetime.now(UTC).timestamp() + timeout_s
        cursor = since
        while not (stop and stop.is_set()) and datetime.now(UTC).timestamp() < deadline:
            with self._lock:
                if self._events and self._events[0].resource_version > cursor + 1:
                    # The watcher fell behind the history: tell it to relist, as etcd would.
                    oldest = self._events[0].resource_version - 1
                    expired = ApiError(
                        410, "Expired", f"too old resource version: {cursor} ({oldest})"
                    )
                    yield WatchEvent(cursor, "ERROR", resource, expired.status())
                    return
                start = bisect.bisect_right(self._events, cursor, key=lambda e: e.resource_version)
                pending = list(itertools.islice(self._events, start, None))
                if not pending:
                    self._lock.wait(timeout=0.2)
                    continue
            for event in pending:
                cursor = event.resource_version
                obj = event.object
                if event.resource is not resource:
                    continue
                if namespace and namespace_of(obj) != namespace:
                    continue
                if labels.matches(labels_of(obj)) and fields.matches(obj):
                    yield event
