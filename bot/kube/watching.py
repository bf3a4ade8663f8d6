"""A watch stream's lines as (type, object) events.

Why a module of its own: gpubot reads a watch as raw JSON lines rather than through
`kubernetes.watch.Watch`, which deserialises every object into models (slow, memory-hungry at
100,000 pods) and mishandles ERROR events raw. What a line means (an event, a bookmark, an
expired version that sends the caller back to list, a broken stream) is decided here, once.

What it must never do: import the kubernetes client (it is given the lines), open or close
the connection, or pass an ERROR event on as an object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from bot.errors import TemporaryError, WatchExpired
from bot.kube_objects import Obj


def watch_events(lines: Iterable[str | bytes], kind: str) -> Iterator[tuple[str, Obj]]:
    """Each event's type and object, its kind filled in; `WatchExpired` for a 410 ERROR (list
    again), `TemporaryError` for any other."""
    for line in lines:
        if not line:
            continue
        event = json.loads(line)
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":
            message = f"watch {kind}: {obj.get('message', 'error')}"
            if obj.get("code") == 410:
                raise WatchExpired(message)
            raise TemporaryError(message)
        obj.setdefault("kind", kind)
        yield str(event.get("type")), obj
