"""What the simulated controllers remember of pods between rounds, to notice the ones gone.

A level-based round sees only the pods that are there; a pod deleted between two rounds
leaves no trace in the next listing. So the controllers keep the pods as they last saw
them (listed, or created since) and, while their watch threads run, each pod the watch
shows deleted: a pod in the memory and not in the listing is gone, and its owner may want a
replacement.

It must never write to the cluster, nor remember a pod longer than one round after it went.
"""

from __future__ import annotations

import threading

from gpusim.objects import Json
from gpusim.reading import uid_of


class KnownPods:
    """The pods the controllers last saw, by uid, and the pods the watch showed deleted since.
    It owns that memory and the lock the watch threads take to add to it; it must never
    write to the cluster."""

    def __init__(self, pods: list[Json]) -> None:
        self._pods: dict[str, Json] = {uid_of(p): p for p in pods}
        """uid -> the pod as last listed: what lets a deletion be noticed."""
        self._deleted: list[Json] = []
        self._deleted_lock = threading.Lock()

    def deleted(self, pod: Json) -> None:
        """A pod as the watch showed it deleted (from a watch thread)."""
        with self._deleted_lock:
            self._deleted.append(pod)

    def remember(self, pod: Json) -> None:
        """A pod a controller has just created: gone by the next round, it is still noticed."""
        self._pods[uid_of(pod)] = pod

    def gone(self, pods: list[Json]) -> list[Json]:
        """The pods seen before and not among `pods` (now listed), each as the watch last
        showed it, else as the previous round listed it; `pods` becomes the memory."""
        current = {uid_of(p): p for p in pods}
        with self._deleted_lock:
            deleted, self._deleted = self._deleted, []
        last_seen = {uid: p for uid, p in self._pods.items() if uid not in current}
        last_seen.update({uid_of(p): p for p in deleted if uid_of(p) not in current})
        self._pods = current
        return list(last_seen.values())
