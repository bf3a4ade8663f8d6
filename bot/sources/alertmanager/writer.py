"""The webhook's one writer: deliveries that arrive together are stored in one transaction.

Each webhook request waits for its own delivery to be committed (the 200 comes after), but
requests that arrive while a commit is under way do not each pay for a transaction of their
own: the writer thread takes everything waiting and stores it at once (group commit, as
databases do with their log). It also keeps the store's calls off the event loop.

A request that gives up waiting (the webhook's store deadline: it answers 503 and Alertmanager
sends the delivery again) is left out of the next group if it has not been taken yet; one
already being written may still be committed, and the retry is then a duplicate the split
stores once. While one write hangs (a table lock), `stuck_for` tells the webhook, which then
answers 503 at once instead of queueing more bodies behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.ports import SignalStore

# An idle writer thread ends, and the next delivery starts another: apps built and dropped
# (tests build hundreds) leave no thread behind.
IDLE_EXIT_S = 10.0
# Deliveries in one transaction at most: at 1 MiB each, a bounded write.
MAX_GROUP = 32


@dataclass(frozen=True)
class _Waiting:
    source: str
    body: bytes
    received_at: datetime
    done: asyncio.Future[int]
    loop: asyncio.AbstractEventLoop


class DeliveryWriter:
    """Owns the webhook's one writer thread and the deliveries waiting for it. Never: writes
    on the event loop, or writes a delivery whose request gave up before it was taken."""

    def __init__(self, store: SignalStore) -> None:
        self.store = store
        self._waiting: queue.SimpleQueue[_Waiting] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running = False
        self._writing_since: float | None = None

    def stuck_for(self) -> float:
        """Seconds the write under way has taken so far (0 when none is)."""
        since = self._writing_since
        return 0.0 if since is None else time.monotonic() - since

    async def add(self, source: str, body: bytes, received_at: datetime) -> int:
        """The delivery's id once it is committed; the store's error when it could not be."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()
        self._waiting.put(_Waiting(source, body, received_at, done, loop))
        with self._lock:
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="webhook-writer", daemon=True).start()
        return await done

    def _run(self) -> None:
        while True:
            try:
                first = self._waiting.get(timeout=IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._waiting.empty():
                        self._running = False
                        return
                continue
            group = [first]
            while len(group) < MAX_GROUP:
                try:
                    group.append(self._waiting.get_nowait())
                except queue.Empty:
                    break
            # A request that gave up (answered 503) is sent again by Alertmanager: not this one.
            group = [waiting for waiting in group if not waiting.done.done()]
            if group:
                self._store(group)

    def _store(self, group: Sequence[_Waiting]) -> None:
        self._writing_since = time.monotonic()
        try:
            ids = self.store.add_deliveries([(w.source, w.body, w.received_at) for w in group])
        except BaseException as exc:  # every waiting request hears it, whatever it is
            for waiting in group:
                _call_soon(waiting, _fail, exc)
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            self._writing_since = None
        for waiting, delivery_id in zip(group, ids, strict=True):
            _call_soon(waiting, _succeed, delivery_id)


def _call_soon(waiting: _Waiting, then: Callable[..., None], value: object) -> None:
    # A loop that is closed (its request gave up and a test's loop ended): nobody waits.
    with contextlib.suppress(RuntimeError):
        waiting.loop.call_soon_threadsafe(then, waiting.done, value)


def _succeed(done: asyncio.Future[int], delivery_id: int) -> None:
    if not done.done():  # the request may have been cancelled (client gone)
        done.set_result(delivery_id)


def _fail(done: asyncio.Future[int], exc: BaseException) -> None:
    if not done.done():
        done.set_exception(exc)
