"""The webhook's one writer: deliveries that arrive together are stored in one transaction.

Each webhook request waits for its own delivery to be committed (the 200 comes after), but
requests that arrive while a commit is under way do not each pay for a transaction of their
own: the writer thread takes everything waiting and stores it at once (group commit, as
databases do with their log). It also keeps the store's calls off the event loop.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Sequence
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
    def __init__(self, store: SignalStore) -> None:
        self.store = store
        self._waiting: queue.SimpleQueue[_Waiting] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._running = False

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
            self._store(group)

    def _store(self, group: Sequence[_Waiting]) -> None:
        try:
            ids = self.store.add_deliveries([(w.source, w.body, w.received_at) for w in group])
        except BaseException as exc:  # every waiting request hears it, whatever it is
            for waiting in group:
                waiting.loop.call_soon_threadsafe(_fail, waiting.done, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for waiting, delivery_id in zip(group, ids, strict=True):
            waiting.loop.call_soon_threadsafe(_succeed, waiting.done, delivery_id)


def _succeed(done: asyncio.Future[int], delivery_id: int) -> None:
    if not done.done():  # the request may have been cancelled (client gone)
        done.set_result(delivery_id)


def _fail(done: asyncio.Future[int], exc: BaseException) -> None:
    if not done.done():
        done.set_exception(exc)
